"""The stand-in hub of mlrb's smoke profile (``mlrb tasks test <task> --smoke``).

Usage: python3 mlrb_standin.py <out_dir>

Builds, offline and deterministically (fixed seeds, fixed commit hashes), an
offline Hugging Face cache that the task scripts read, unchanged, with
HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_CACHE=<out_dir>/hub
HF_DATASETS_CACHE=<out_dir>/datasets:

* <out_dir>/hub: toy-size models for every hub model id the tasks use, in the
  huggingface_hub cache layout (models--<org>--<name>/refs/main and
  snapshots/<commit>/): the real architecture (model_type) built from a small
  config with random weights, and a small byte-level BPE tokenizer with the
  special tokens (and chat template) of the real model;
* <out_dir>/datasets: synthetic data sets in the exact schema of each real one
  (column names and types, split names, config names, ClassLabel and Sequence
  features), a handful of rows per split, in the arrow cache layout that a
  real ``load_dataset`` leaves (<org>___<name>/<config>/0.0.0/<hash>/);
* <out_dir>/index.json: {"models": [ids], "datasets": {id: [configs]}}.

EVERY ROW AND EVERY WEIGHT IS SYNTHETIC: random words and numbers written by
this file, never text or weights of the real data sets and models. The
stand-in only checks that the scripts run and that their data flows through;
its scores mean nothing.

Registry contract (other modules may extend it):

* ``DATASETS = {(repo_id, config_or_None): fn}``; ``fn(rng)`` gets a seeded
  ``random.Random`` and returns ``(features, {split: [row dict, ...]})``
  (``features`` a ``datasets.Features`` or None to infer) or
  ``{split: datasets.Dataset}``. A config of None is written as "default".
* ``MODELS = {repo_id: fn}``; ``fn(snapshot_dir, seed)`` writes the files of
  the model's snapshot (config.json, model.safetensors, tokenizer files).
* ``ALIASES = {alias: repo_id}``: ids written as copies of another model.
* If the module ``mlrb_standin_images`` can be imported (next to this file),
  main() merges its ``DATASETS`` dict (same contract; and ``MODELS`` if it
  has one) over these; it may ``import mlrb_standin`` for the helpers
  (``features``, ``png``, ``rows``, ``sentence`` ...).
"""
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlrb_llm_eval as E  # noqa: E402

HASH = "0" * 16  # the <hash> directory of every data set in the arrow cache
VERSION = "0.0.0"

# ---------------------------------------------------------------------------
# Synthetic text

WORDS = ("the a an this that some every no one two three many few red blue old new small large quiet happy "
         "dog cat bird teacher student river city house book tree car song friend doctor child apple garden "
         "runs walks sees finds likes reads writes builds opens carries watches helps knows makes takes gives "
         "and or but because while after before if when then also very often never always slowly quickly "
         "in on at with from under over near through into of for to by about is was are were has had will "
         "can should might number value energy market history science water light system theory model").split()
NAMES = ("Alice Bob Carol Dan Eve Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil "
         "Trent Victor Walter").split()


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def sentence(rng, lo=5, hi=12):
    text = words(rng, rng.randint(lo, hi))
    return text[0].upper() + text[1:] + rng.choice(".!?" if rng.random() < 0.1 else ".")


def paragraph(rng, n=4):
    return " ".join(sentence(rng) for _ in range(n))


def number(rng, lo=0, hi=999):
    return rng.randint(lo, hi)


def rows(n, make, rng):
    return [make(rng, i) for i in range(n)]


def text_table(splits, make_text):
    """A data set of one "text" column: ``splits`` = {split: rows}."""
    return lambda rng: (features(text="str"), {s: [{"text": make_text(rng)} for _ in range(k)]
                                               for s, k in splits.items()})


def features(**cols):
    """datasets.Features from short type names: "str", "int32", "int64",
    "bool", "float32", ["str"] (a Sequence), a list of label names given as
    ("label", names), or a nested dict."""
    import datasets

    def one(t):
        if isinstance(t, tuple) and t[0] == "label":
            return datasets.ClassLabel(names=list(t[1]))
        if isinstance(t, list):
            return datasets.Sequence(one(t[0]))
        if isinstance(t, dict):
            return {k: one(v) for k, v in t.items()}
        if t == "image":
            return datasets.Image()
        return datasets.Value({"str": "string"}.get(t, t))
    return datasets.Features({k: one(v) for k, v in cols.items()})


def labelled(feats, make, splits, test_label=-1):
    """A table whose "test" split has label -1 (as GLUE/SuperGLUE test sets)."""
    def fn(rng):
        out = {}
        for split, n in splits.items():
            out[split] = []
            for i in range(n):
                row = make(rng, i)
                if split.startswith("test") and "label" in row:
                    row["label"] = test_label
                out[split].append(row)
        return feats, out
    return fn


# ---------------------------------------------------------------------------
# Data sets: one function per hub id (and config)

DATASETS = {}


def dataset(repo_id, *configs):
    """Registers ``fn`` for ``repo_id`` under each config (None: default)."""
    def register(fn):
        for c in configs or (None,):
            DATASETS[(repo_id, c)] = fn(c) if getattr(fn, "per_config", False) else fn
        return fn
    return register


def per_config(fn):
    fn.per_config = True
    return fn


@dataset("AlgorithmicResearchGroup/babylm")
def babylm(rng):
    feats = features(filename="str", content="str")
    sizes = {"train": (3, 30), "dev": (1, 10), "test": (1, 10)}  # (files, lines): a small dev set is fast
    return feats, {s: [{"filename": f"{s}_{i}.{s}", "content": "\n".join(sentence(rng) for _ in range(k))}
                       for i in range(n)] for s, (n, k) in sizes.items()}


BLIMP_PARADIGMS = E.BLIMP_PARADIGMS
assert len(BLIMP_PARADIGMS) == 67


@dataset("nyu-mll/blimp", *BLIMP_PARADIGMS)
@per_config
def blimp(paradigm):
    feats = features(sentence_good="str", sentence_bad="str", field="str", linguistics_term="str", UID="str",
                     simple_LM_method="bool", one_prefix_method="bool", two_prefix_method="bool",
                     lexically_identical="bool", pair_id="int32")

    def row(rng, i):
        good = sentence(rng)
        w = good.split()
        bad = " ".join(w[1:] + w[:1])
        return {"sentence_good": good, "sentence_bad": bad, "field": "syntax", "linguistics_term": "synthetic",
                "UID": paradigm, "simple_LM_method": True, "one_prefix_method": False,
                "two_prefix_method": False, "lexically_identical": True, "pair_id": i}
    return lambda rng: (feats, {"train": rows(2, row, rng)})


# mini_llm_efficiency's starter groups 40 non-empty lines into a document (and drops a last
# partial one): train and validation need a few such documents.
WIKITEXT_SPLITS = {"train": 240, "validation": 60, "test": 12}


def wikitext_line(rng):
    r = rng.random()
    if r < 0.25:
        return ""
    if r < 0.35:
        return f" = {words(rng, 2).title()} = \n"
    return " " + paragraph(rng, 2) + " \n"


for _c in ("wikitext-2-raw-v1", "wikitext-103-raw-v1", "wikitext-2-v1", "wikitext-103-v1"):
    DATASETS[("Salesforce/wikitext", _c)] = text_table(WIKITEXT_SPLITS, wikitext_line)

MMLU_SUBJECTS = (
    "abstract_algebra anatomy astronomy business_ethics clinical_knowledge college_biology college_chemistry "
    "college_computer_science college_mathematics college_medicine college_physics computer_security "
    "conceptual_physics econometrics electrical_engineering elementary_mathematics formal_logic global_facts "
    "high_school_biology high_school_chemistry high_school_computer_science high_school_european_history "
    "high_school_geography high_school_government_and_politics high_school_macroeconomics "
    "high_school_mathematics high_school_microeconomics high_school_physics high_school_psychology "
    "high_school_statistics high_school_us_history high_school_world_history human_aging human_sexuality "
    "international_law jurisprudence logical_fallacies machine_learning management marketing medical_genetics "
    "miscellaneous moral_disputes moral_scenarios nutrition philosophy prehistory professional_accounting "
    "professional_law professional_medicine professional_psychology public_relations security_studies "
    "sociology us_foreign_policy virology world_religions").split()
assert len(MMLU_SUBJECTS) == 57
MMLU_SPLITS = {"test": 2, "validation": 1, "dev": 1}


def mmlu_rows(subject, split, rng):
    return [{"question": sentence(rng)[:-1] + "?", "subject": subject,
             "choices": [words(rng, 3) for _ in range(4)], "answer": rng.randrange(4)}
            for _ in range(MMLU_SPLITS[split])]


def mmlu_features():
    return features(question="str", subject="str", choices=["str"], answer=("label", "ABCD"))


@dataset("cais/mmlu", "all", *MMLU_SUBJECTS)
@per_config
def mmlu(config):
    subjects = MMLU_SUBJECTS if config == "all" else [config]
    # Every subject has its own seed so that "all" holds the rows of the subject configs.
    return lambda rng: (mmlu_features(), {
        s: [r for subj in subjects for r in mmlu_rows(subj, s, random.Random(f"mmlu-{subj}-{s}"))]
        for s in MMLU_SPLITS})


def superglue_wic(rng, i):
    word = rng.choice(WORDS)
    s1, s2 = f"{sentence(rng)[:-1]} {word}.", f"{word} {sentence(rng)}"
    return {"word": word, "sentence1": s1, "sentence2": s2, "start1": len(s1) - len(word) - 1,
            "start2": 0, "end1": len(s1) - 1, "end2": len(word), "idx": i, "label": rng.randrange(2)}


def superglue_wsc(rng, i):
    w = sentence(rng).split()
    return {"text": " ".join(w), "span1_index": 0, "span2_index": len(w) - 1, "span1_text": w[0],
            "span2_text": w[-1], "idx": i, "label": rng.randrange(2)}


SUPERGLUE = {
    "boolq": (dict(question="str", passage="str", idx="int32", label=("label", ["False", "True"])),
              lambda rng, i: {"question": words(rng, 6), "passage": paragraph(rng, 2), "idx": i,
                              "label": rng.randrange(2)}),
    "cb": (dict(premise="str", hypothesis="str", idx="int32",
                label=("label", ["entailment", "contradiction", "neutral"])),
           lambda rng, i: {"premise": sentence(rng), "hypothesis": sentence(rng), "idx": i, "label": rng.randrange(3)}),
    "copa": (dict(premise="str", choice1="str", choice2="str", question="str", idx="int32",
                  label=("label", ["choice1", "choice2"])),
             lambda rng, i: {"premise": sentence(rng), "choice1": sentence(rng), "choice2": sentence(rng),
                             "question": rng.choice(["cause", "effect"]), "idx": i, "label": rng.randrange(2)}),
    "rte": (dict(premise="str", hypothesis="str", idx="int32", label=("label", ["entailment", "not_entailment"])),
            lambda rng, i: {"premise": sentence(rng), "hypothesis": sentence(rng), "idx": i, "label": rng.randrange(2)}),
    "wic": (dict(word="str", sentence1="str", sentence2="str", start1="int32", start2="int32", end1="int32",
                 end2="int32", idx="int32", label=("label", ["False", "True"])), superglue_wic),
    "wsc.fixed": (dict(text="str", span1_index="int32", span2_index="int32", span1_text="str", span2_text="str",
                       idx="int32", label=("label", ["False", "True"])), superglue_wsc),
}
SUPERGLUE["wsc"] = SUPERGLUE["wsc.fixed"]
for _c, (_cols, _make) in SUPERGLUE.items():
    DATASETS[("aps/super_glue", _c)] = labelled(features(**_cols), _make, {"train": 3, "validation": 4, "test": 2})


def pair(a, b, names):
    return lambda rng, i: {a: sentence(rng), b: sentence(rng), "label": rng.randrange(len(names)), "idx": i}


def single(names):
    return lambda rng, i: {"sentence": sentence(rng), "label": rng.randrange(len(names)), "idx": i}


GLUE = {  # config: (text columns, label names)
    "cola": (("sentence",), ["unacceptable", "acceptable"]),
    "sst2": (("sentence",), ["negative", "positive"]),
    "mrpc": (("sentence1", "sentence2"), ["not_equivalent", "equivalent"]),
    "qqp": (("question1", "question2"), ["not_duplicate", "duplicate"]),
    "mnli": (("premise", "hypothesis"), ["entailment", "neutral", "contradiction"]),
    "qnli": (("question", "sentence"), ["entailment", "not_entailment"]),
    "rte": (("sentence1", "sentence2"), ["entailment", "not_entailment"]),
    "wnli": (("sentence1", "sentence2"), ["not_entailment", "entailment"]),
}
for _c, (_cols, _names) in GLUE.items():
    _splits = ({"train": 3, "validation_matched": 4, "validation_mismatched": 2, "test_matched": 2,
                "test_mismatched": 2} if _c == "mnli" else {"train": 3, "validation": 4, "test": 2})
    DATASETS[("nyu-mll/glue", _c)] = labelled(
        features(**{c: "str" for c in _cols}, label=("label", _names), idx="int32"),
        pair(*_cols, _names) if len(_cols) == 2 else single(_names), _splits)


@dataset("Rowan/hellaswag")
def hellaswag(rng):
    feats = features(ind="int32", activity_label="str", ctx_a="str", ctx_b="str", ctx="str", endings=["str"],
                     source_id="str", split="str", split_type="str", label="str")

    def make(split):
        def row(rng, i):
            a, b = sentence(rng), words(rng, 4)
            return {"ind": i, "activity_label": words(rng, 2).title(), "ctx_a": a, "ctx_b": b, "ctx": f"{a} {b}",
                    "endings": [words(rng, 6) + "." for _ in range(4)], "source_id": f"synthetic~{i}",
                    "split": split, "split_type": "indomain", "label": "" if split == "test" else str(rng.randrange(4))}
        return row
    return feats, {s: rows(n, make(s), rng) for s, n in {"train": 3, "validation": 6, "test": 2}.items()}


def lettered_choices(rng, n, labels="ABCDE"):
    return {"text": [words(rng, 3) for _ in range(n)], "label": list(labels[:n])}


@dataset("allenai/ai2_arc", "ARC-Easy", "ARC-Challenge")
def ai2_arc(rng):
    feats = features(id="str", question="str", choices={"text": ["str"], "label": ["str"]}, answerKey="str")

    def row(rng, i):
        ch = lettered_choices(rng, 4)
        return {"id": f"synthetic_{i}", "question": sentence(rng)[:-1] + "?", "choices": ch,
                "answerKey": rng.choice(ch["label"])}
    return feats, {s: rows(n, row, rng) for s, n in {"train": 3, "validation": 3, "test": 6}.items()}


def gsm8k_row(rng, i):
    a, b = number(rng, 1, 50), number(rng, 1, 50)
    return {"question": f"{rng.choice(NAMES)} has {a} apples and buys {b} more. How many apples now?",
            "answer": f"{rng.choice(NAMES)} has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}"}


@dataset("openai/gsm8k", "main", "socratic")
def gsm8k(rng):
    # The starter of mini_math_reasoning keeps 200 training rows for dev: the train split needs more.
    return features(question="str", answer="str"), {"train": rows(220, gsm8k_row, rng),
                                                     "test": rows(6, gsm8k_row, rng)}


@dataset("allenai/math_qa")
def math_qa(rng):
    feats = features(Problem="str", Rationale="str", options="str", correct="str", annotated_formula="str",
                     linear_formula="str", category="str")

    def row(rng, i):
        opts = [number(rng) for _ in range(5)]
        options = " , ".join(f"{k} ) {v}" for k, v in zip("abcde", opts))
        return {"Problem": f"what is {opts[0]} plus {number(rng)} ?", "Rationale": f"\"{sentence(rng)}\"",
                "options": options, "correct": rng.choice("abcde"), "annotated_formula": "add(n0,n1)",
                "linear_formula": "add(n0,n1)|", "category": "general"}
    return feats, {s: rows(n, row, rng) for s, n in {"train": 3, "validation": 3, "test": 8}.items()}


@dataset("tau/commonsense_qa")
def commonsense_qa(rng):
    feats = features(id="str", question="str", question_concept="str",
                     choices={"label": ["str"], "text": ["str"]}, answerKey="str")

    def row(rng, i):
        ch = lettered_choices(rng, 5)
        return {"id": hashlib.md5(f"csqa{i}{rng.random()}".encode()).hexdigest(), "question": sentence(rng),
                "question_concept": rng.choice(WORDS), "choices": {"label": ch["label"], "text": ch["text"]},
                "answerKey": rng.choice(ch["label"])}
    out = {s: rows(n, row, rng) for s, n in {"train": 3, "validation": 8, "test": 2}.items()}
    for r in out["test"]:
        r["answerKey"] = ""
    return feats, out


@dataset("truthfulqa/truthful_qa", "multiple_choice")
@per_config
def truthful_qa(config):
    def targets(rng, n, n_true):
        return {"choices": [sentence(rng) for _ in range(n)], "labels": [1] * n_true + [0] * (n - n_true)}

    def row(rng, i):
        return {"question": sentence(rng)[:-1] + "?", "mc1_targets": targets(rng, 4, 1),
                "mc2_targets": targets(rng, 5, 2)}
    t = {"choices": ["str"], "labels": ["int32"]}
    return lambda rng: (features(question="str", mc1_targets=t, mc2_targets=t), {"validation": rows(8, row, rng)})


@dataset("truthfulqa/truthful_qa", "generation")
def truthful_qa_generation(rng):
    feats = features(type="str", category="str", question="str", best_answer="str", correct_answers=["str"],
                     incorrect_answers=["str"], source="str")
    return feats, {"validation": [{"type": "Adversarial", "category": "Misconceptions", "question": sentence(rng),
                                   "best_answer": sentence(rng), "correct_answers": [sentence(rng)],
                                   "incorrect_answers": [sentence(rng)], "source": "synthetic"} for _ in range(4)]}


@dataset("allenai/cosmos_qa")
def cosmos_qa(rng):
    feats = features(id="str", context="str", question="str", answer0="str", answer1="str", answer2="str",
                     answer3="str", label="int32")

    def row(rng, i):
        return {"id": f"synthetic{i}", "context": paragraph(rng, 3), "question": sentence(rng)[:-1] + "?",
                **{f"answer{k}": sentence(rng) for k in range(4)}, "label": rng.randrange(4)}
    return feats, {s: rows(n, row, rng) for s, n in {"train": 3, "validation": 8, "test": 2}.items()}


@dataset("imdb", "plain_text")
def imdb(rng):
    """As MLAgentBench's imdb folder loads it: load_dataset("imdb")."""
    feats = features(text="str", label=("label", ["neg", "pos"]))

    def row(rng, i):
        return {"text": paragraph(rng, 3), "label": rng.randint(0, 1)}
    splits = {"train": 16, "test": 12, "unsupervised": 4}
    table = {s: rows(n, row, rng) for s, n in splits.items()}
    for r in table["unsupervised"]:
        r["label"] = -1
    return feats, table


@dataset("EdinburghNLP/xsum")
def xsum(rng):
    feats = features(document="str", summary="str", id="str")

    def row(rng, i):
        return {"document": paragraph(rng, 5), "summary": sentence(rng), "id": str(30000000 + i)}
    return feats, {s: rows(n, row, rng) for s, n in {"train": 3, "validation": 3, "test": 6}.items()}


@dataset("AlgorithmicResearchGroup/llm_merging", "cosmos_qa")
def merging_cosmos_qa(rng):
    feats = features(input="str", target="str", answer_choices=["str"], label="int64")

    def row(rng, i):
        choices = [sentence(rng) for _ in range(4)]
        label = rng.randrange(4)
        return {"input": f"{paragraph(rng, 3)}\nQuestion: {sentence(rng)}", "target": choices[label],
                "answer_choices": choices, "label": label}
    return feats, {"train": rows(4, row, rng)}


@dataset("AlgorithmicResearchGroup/llm_merging", "xsum")
def merging_xsum(rng):
    return features(input="str", target="str"), {"train": [{"input": paragraph(rng, 5), "target": sentence(rng)}
                                                           for _ in range(3)]}


def alpaca(rng):
    feats = features(output="str", input="str", instruction="str")
    return feats, {"train": [{"output": paragraph(rng, 2), "input": sentence(rng) if rng.random() < 0.5 else "",
                              "instruction": sentence(rng)} for _ in range(8)]}


DATASETS[("AlgorithmicResearchGroup/llm_merging", "alpaca_cleaned")] = alpaca
DATASETS[("AlgorithmicResearchGroup/edge_llm_training", "alpaca_cleaned")] = alpaca
# The starters keep the first 200 C4 documents for dev and train on the rest.
DATASETS[("AlgorithmicResearchGroup/edge_llm_training", "c4_combined_dataset")] = text_table(
    {"train": 230}, lambda rng: sentence(rng, 4, 8))  # short: the dev set (200 documents) stays small
DATASETS[("AlgorithmicResearchGroup/minipile", None)] = text_table(
    {"train": 40, "validation": 8, "test": 8}, lambda rng: paragraph(rng, 4))


@dataset("databricks/databricks-dolly-15k")
def dolly(rng):
    # llm_efficiency's starter keeps 300 examples for dev and trains on the rest.
    feats = features(instruction="str", context="str", response="str", category="str")
    return feats, {"train": [{"instruction": sentence(rng), "context": sentence(rng) if rng.random() < 0.3 else "",
                              "response": sentence(rng), "category": rng.choice(["open_qa", "brainstorming"])}
                             for _ in range(320)]}


@dataset("AlgorithmicResearchGroup/math_reasoning_autoformalization_track")
def autoformalization(rng):
    # math_reasoning's prepare holds out 200 problems; the starter needs a few more to train on.
    feats = features(name="str", informal_statement="str", informal_proof="str", formal_proof="str")

    def row(rng, i):
        a, b = number(rng, 1, 99), number(rng, 1, 99)
        return {"name": f"synthetic_{i}", "informal_statement": f"Show that {a} + {b} = {a + b}.",
                "informal_proof": sentence(rng),
                "formal_proof": f"theorem synthetic_{i} : ({a}:ℕ) + {b} = {a + b} :=\nbegin\n  norm_num,\nend"}
    return feats, {"train": rows(212, row, rng)}


def png(rng, size, color=None):
    """A small synthetic PNG (random blocks of colour), as encoded bytes."""
    import io

    from PIL import Image
    img = Image.new("RGB", (size, size), color or tuple(rng.randrange(256) for _ in range(3)))
    for _ in range(4):
        x, y = rng.randrange(size), rng.randrange(size)
        img.paste(tuple(rng.randrange(256) for _ in range(3)), (x, y, min(size, x + size // 4), min(size, y + size // 4)))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


@dataset("AlgorithmicResearchGroup/budget_model_train")
def budget_model_train(rng):
    classes = [f"n0{1440764 + 1000 * k}" for k in range(4)]
    feats = features(image="image", **{"class": "str"})
    return feats, {s: [{"image": png(rng, 32), "class": classes[i % len(classes)]} for i in range(n)]
                   for s, n in {"train": 16, "val": 8, "test": 8}.items()}


@dataset("AlgorithmicResearchGroup/budget_model_inference")
def budget_model_inference(rng):
    feats = features(image="image", digit_sum="int64")
    return feats, {s: [{"image": png(rng, 64), "digit_sum": rng.randrange(28)} for _ in range(n)]
                   for s, n in {"train": 20, "test": 8}.items()}


# ---------------------------------------------------------------------------
# Models: one function per family; a tokenizer trained once on synthetic text

TOY = {"hidden": 64, "layers": 2, "heads": 4, "inner": 256}
VOCAB_SIZE = 1024
_BASE_TOKENIZER = []

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
INST = ("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
        "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
        "{% endif %}{% endfor %}")


def base_tokenizer():
    """A byte-level BPE (about VOCAB_SIZE entries) trained on synthetic text."""
    if not _BASE_TOKENIZER:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
        rng = random.Random(1234)
        corpus = [paragraph(rng, 5) for _ in range(400)] + [" ".join(NAMES), "0123456789 +-*/=#<>()[]{}:.,;!?'\""]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - 8, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(corpus, trainer)
        _BASE_TOKENIZER.append(tok.to_str())
    from tokenizers import Tokenizer
    return Tokenizer.from_str(_BASE_TOKENIZER[0])


def save_tokenizer(out, specials, bos=None, eos=None, unk=None, pad=None, add_bos=False, chat_template=None,
                   extra=()):
    """Saves the base tokenizer with ``specials`` (added in order) as a
    PreTrainedTokenizerFast; returns it."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    tok = base_tokenizer()
    tok.add_special_tokens(list(specials) + list(extra))
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos, unk_token=unk,
                                   pad_token=pad, model_max_length=2048)
    if chat_template:
        fast.chat_template = chat_template
    fast.save_pretrained(out)
    return fast


def save_model(out, config, seed):
    import torch
    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(out)


def ids(tok, *tokens):
    return [tok.convert_tokens_to_ids(t) if t else None for t in tokens]


def gpt2_family(n_positions=1024):
    def make(out, seed):
        from transformers import GPT2Config
        tok = save_tokenizer(out, ["<|endoftext|>"], bos="<|endoftext|>", eos="<|endoftext|>", unk="<|endoftext|>")
        bos, eos = ids(tok, "<|endoftext|>", "<|endoftext|>")
        save_model(out, GPT2Config(vocab_size=len(tok), n_positions=n_positions, n_embd=TOY["hidden"],
                                   n_layer=TOY["layers"], n_head=TOY["heads"], bos_token_id=bos,
                                   eos_token_id=eos), seed)
    return make


def pythia(out, seed):
    from transformers import GPTNeoXConfig
    tok = save_tokenizer(out, ["<|endoftext|>", "<|padding|>"], bos="<|endoftext|>", eos="<|endoftext|>",
                         unk="<|endoftext|>")
    bos, eos = ids(tok, "<|endoftext|>", "<|endoftext|>")
    save_model(out, GPTNeoXConfig(vocab_size=len(tok), hidden_size=TOY["hidden"], num_hidden_layers=TOY["layers"],
                                  num_attention_heads=TOY["heads"], intermediate_size=TOY["inner"],
                                  max_position_embeddings=2048, rotary_pct=0.25, use_parallel_residual=True,
                                  tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos), seed)


# Few positions: the evaluators generate up to max_length // 2 new tokens (math_reasoning: 200
# proofs of up to 512 tokens), which a toy model never ends early.
QWEN_POSITIONS = 128


def qwen15(chat):
    def make(out, seed):
        from transformers import Qwen2Config
        eos = "<|im_end|>" if chat else "<|endoftext|>"
        tok = save_tokenizer(out, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], eos=eos, pad="<|endoftext|>",
                             chat_template=CHATML)
        bos_id, eos_id = ids(tok, "<|endoftext|>", eos)
        save_model(out, Qwen2Config(vocab_size=len(tok), hidden_size=TOY["hidden"], num_hidden_layers=TOY["layers"],
                                    num_attention_heads=TOY["heads"], num_key_value_heads=TOY["heads"],
                                    intermediate_size=TOY["inner"], max_position_embeddings=QWEN_POSITIONS,
                                    tie_word_embeddings=False, bos_token_id=bos_id, eos_token_id=eos_id), seed)
    return make


def llama_like(config_name, max_positions):
    def make(out, seed):
        import transformers
        tok = save_tokenizer(out, ["<unk>", "<s>", "</s>"], bos="<s>", eos="</s>", unk="<unk>", add_bos=True,
                             chat_template=INST)
        bos, eos = ids(tok, "<s>", "</s>")
        cfg = getattr(transformers, config_name)(
            vocab_size=len(tok), hidden_size=TOY["hidden"], num_hidden_layers=TOY["layers"],
            num_attention_heads=TOY["heads"], num_key_value_heads=TOY["heads"], intermediate_size=TOY["inner"],
            max_position_embeddings=max_positions, tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos)
        save_model(out, cfg, seed)
    return make


def phi2(out, seed):
    from transformers import PhiConfig
    tok = save_tokenizer(out, ["<|endoftext|>"], bos="<|endoftext|>", eos="<|endoftext|>", unk="<|endoftext|>")
    bos, eos = ids(tok, "<|endoftext|>", "<|endoftext|>")
    save_model(out, PhiConfig(vocab_size=len(tok), hidden_size=TOY["hidden"], num_hidden_layers=TOY["layers"],
                              num_attention_heads=TOY["heads"], intermediate_size=TOY["inner"],
                              max_position_embeddings=2048, partial_rotary_factor=0.4, tie_word_embeddings=False,
                              bos_token_id=bos, eos_token_id=eos), seed)


MODELS = {
    "openai-community/gpt2": gpt2_family(),
    # gpt2-xs: GPT-2's tokenizer and 256 positions, as the real one.
    "AlgorithmicResearchGroup/gpt2-xs": gpt2_family(n_positions=256),
    "EleutherAI/pythia-410m": pythia,
    "Qwen/Qwen1.5-0.5B": qwen15(chat=False),
    "Qwen/Qwen1.5-1.8B": qwen15(chat=False),
    "Qwen/Qwen1.5-1.8B-Chat": qwen15(chat=True),
    "microsoft/phi-2": phi2,
    "meta-llama/Llama-2-7b-chat-hf": llama_like("LlamaConfig", 4096),
    "mistralai/Mistral-7B-Instruct-v0.2": llama_like("MistralConfig", 32768),
}
ALIASES = {"gpt2": "openai-community/gpt2"}



def merge_extensions():
    """Merges mlrb_standin_images (next to this file; same contract) over the
    registry. Called by main(), so that module may import this one."""
    try:
        import mlrb_standin_images as images
    except ImportError:
        return
    DATASETS.update(images.DATASETS)
    MODELS.update(getattr(images, "MODELS", {}))


# ---------------------------------------------------------------------------
# Writers


def commit_of(repo_id):
    return hashlib.sha1(f"mlrb-standin:{repo_id}".encode()).hexdigest()


def seed_of(key):
    return int(hashlib.sha256(repr(key).encode()).hexdigest()[:8], 16)


def write_model(hub, repo_id, make=None, source=None):
    """Writes models--<org>--<name>/{refs/main, snapshots/<commit>/}; a copy of
    ``source``'s snapshot when given."""
    root = os.path.join(hub, "models--" + repo_id.replace("/", "--"))
    commit = commit_of(repo_id)
    snap = os.path.join(root, "snapshots", commit)
    if source is not None:
        shutil.copytree(source, snap)
    else:
        os.makedirs(snap)
        make(snap, seed_of(repo_id))
    os.makedirs(os.path.join(root, "refs"), exist_ok=True)
    with open(os.path.join(root, "refs", "main"), "w") as f:
        f.write(commit)
    return snap


def as_splits(table):
    import datasets
    if isinstance(table, tuple):
        feats, splits = table
        return {s: datasets.Dataset.from_list(r, features=feats) for s, r in splits.items()}
    return dict(table)


def write_dataset(cache, repo_id, config, table):
    """Writes one config in the arrow cache layout of a real load_dataset,
    through the packaged Parquet builder."""
    from datasets.packaged_modules.parquet.parquet import Parquet
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for split, ds in as_splits(table).items():
            files[split] = [os.path.join(tmp, f"{split}.parquet")]
            ds.to_parquet(files[split][0])
        # config_id = the config name: no suffix for the data_files (the layout of a hub load)
        builder = Parquet(cache_dir=cache, dataset_name=repo_id.split("/")[-1], config_name=config or "default",
                          config_id=config or "default", hash=HASH, data_files=files)
        # The repository decides the <org>___<name> directory; set after the check that the
        # data files are the repository's own (they are local files here).
        builder.repo_id = repo_id
        builder._cache_dir = builder._build_cache_dir()
        builder.download_and_prepare()
        return builder.cache_dir


def tidy(cache):
    """Removes what the builders leave besides the data (locks, downloads)."""
    for root, dirs, files in os.walk(cache):
        for f in files:
            if f.endswith(".lock"):
                os.remove(os.path.join(root, f))
    shutil.rmtree(os.path.join(cache, "downloads"), ignore_errors=True)


def quiet_offline():
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        os.environ[key] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("HF_HOME", tempfile.mkdtemp(prefix="mlrb-standin-"))
    import datasets
    import transformers
    transformers.utils.logging.disable_progress_bar()
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: mlrb_standin.py <out_dir>")
    out = argv[1]
    hub, cache = os.path.join(out, "hub"), os.path.join(out, "datasets")
    quiet_offline()
    merge_extensions()
    index = {"models": [], "datasets": {}}
    written = {}
    for repo_id, make in MODELS.items():
        written[repo_id] = write_model(hub, repo_id, make)
        index["models"].append(repo_id)
    for alias, repo_id in ALIASES.items():
        write_model(hub, alias, source=written[repo_id])
        index["models"].append(alias)
    for (repo_id, config), fn in sorted(DATASETS.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        write_dataset(cache, repo_id, config, fn(random.Random(seed_of((repo_id, config)))))
        index["datasets"].setdefault(repo_id, []).append(config or "default")
    tidy(cache)
    with open(os.path.join(out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"stand-in hub: {len(index['models'])} models, {len(DATASETS)} data set configs in {out}")


if __name__ == "__main__":
    main(sys.argv)
