"""The held-out data of the GPU tasks, built from hub data sets by prepare
scripts (with network access): one split of a hub data set, a fixed-seed
subsample, and the benchmarks as ``choice``, ``pairs``, ``numeric`` and
``rouge_l`` items (formats in :mod:`mlrb_llm_eval`). The datasets library is
imported inside the functions."""
from __future__ import annotations

import random
import re

from mlrb_eval import one_line
from mlrb_llm_protocol import log
from mlrb_llm_text_metrics import _clean_number


def hub_dataset(paths, name=None, split="test"):
    """One split of a Hugging Face hub data set, trying each repository id in
    ``paths`` (a string or a list: data sets move between ids), first at its
    default revision and then at its Parquet export
    (``refs/convert/parquet``), for data sets that still need a loading
    script. Raises the last error when none loads."""
    import datasets
    if isinstance(paths, str):
        paths = [paths]
    last = None
    for path in paths:
        for revision in (None, "refs/convert/parquet"):
            try:
                kwargs = {"split": split}
                if revision:
                    kwargs["revision"] = revision
                ds = datasets.load_dataset(path, name, **kwargs)
                log(f"loaded {path}{'/' + name if name else ''} [{split}] ({len(ds)} rows)")
                return ds
            except Exception as e:  # noqa: BLE001 - try the next source
                last = e
                log(f"could not load {path} {name or ''} {split} at {revision or 'main'}: {one_line(e, 200)}")
    raise RuntimeError(f"no source of {paths} {name or ''} [{split}] could be loaded") from last


def subsample(n_total, n, seed=0):
    """``n`` distinct indices of ``range(n_total)`` chosen with a fixed seed,
    in increasing order (all of them when ``n`` is None or large enough)."""
    if n is None or n >= n_total:
        return list(range(n_total))
    return sorted(random.Random(seed).sample(range(n_total), n))


MMLU_SOURCES = ["cais/mmlu"]


def build_mmlu(per_subject=None, subjects=None, split="test", seed=0, prefix="mmlu"):
    """MMLU as ``choice`` items in lm-evaluation-harness's zero-shot format
    ("The following are multiple choice questions (with answers) about
    <subject>." / question / A.-D. / "Answer:", choices " A" ... " D").
    ``per_subject`` questions per subject (fixed seed), all subjects unless
    ``subjects`` names some."""
    if subjects is None:
        ds = hub_dataset(MMLU_SOURCES, "all", split)
        by_subject = {}
        for i, s in enumerate(ds["subject"]):
            by_subject.setdefault(s, []).append(i)
        groups = [(s, by_subject[s], ds) for s in sorted(by_subject)]
    else:
        groups = []
        for s in subjects:
            ds = hub_dataset(MMLU_SOURCES, s, split)
            groups.append((s, list(range(len(ds))), ds))
    items = []
    for s, idx, ds in groups:
        chosen = [idx[j] for j in subsample(len(idx), per_subject, seed)]
        for i in chosen:
            row = ds[i]
            subject = s.replace("_", " ")
            text = (f"The following are multiple choice questions (with answers) about {subject}.\n\n"
                    f"{row['question'].strip()}\n"
                    + "".join(f"{'ABCD'[k]}. {c}\n" for k, c in enumerate(row["choices"]))
                    + "Answer:")
            items.append({"id": f"{prefix}-{s}-{i}", "subject": s, "context": text,
                          "choices": [" A", " B", " C", " D"], "label": int(row["answer"])})
    return items


def _hellaswag_clean(text):
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def build_hellaswag(n=1000, seed=0):
    """HellaSwag (validation) as ``choice`` items scored with acc_norm
    (lm-evaluation-harness's preprocessing)."""
    ds = hub_dataset(["Rowan/hellaswag", "hellaswag"], None, "validation")
    items = []
    for i in subsample(len(ds), n, seed):
        row = ds[i]
        ctx = row["ctx_a"] + " " + row["ctx_b"].capitalize()
        items.append({"id": f"hellaswag-{i}", "context": _hellaswag_clean(row["activity_label"] + ": " + ctx),
                      "choices": [" " + _hellaswag_clean(e) for e in row["endings"]], "label": int(row["label"])})
    return items


def build_arc(config="ARC-Easy", n=1000, split="test", seed=0):
    """ARC ("ARC-Easy" or "ARC-Challenge") as ``choice`` items
    ("Question: ...\\nAnswer:" followed by the answer text)."""
    ds = hub_dataset(["allenai/ai2_arc", "ai2_arc"], config, split)
    items = []
    for i in subsample(len(ds), n, seed):
        row = ds[i]
        labels = list(row["choices"]["label"])
        if row["answerKey"] not in labels:
            continue
        items.append({"id": f"arc-{i}", "context": f"Question: {row['question']}\nAnswer:",
                      "choices": [" " + t for t in row["choices"]["text"]],
                      "label": labels.index(row["answerKey"])})
    return items


# The 67 paradigms (configs) of BLiMP.
BLIMP_PARADIGMS = tuple("""
adjunct_island anaphor_gender_agreement anaphor_number_agreement animate_subject_passive animate_subject_trans
causative complex_NP_island coordinate_structure_constraint_complex_left_branch
coordinate_structure_constraint_object_extraction determiner_noun_agreement_1 determiner_noun_agreement_2
determiner_noun_agreement_irregular_1 determiner_noun_agreement_irregular_2 determiner_noun_agreement_with_adj_2
determiner_noun_agreement_with_adj_irregular_1 determiner_noun_agreement_with_adj_irregular_2
determiner_noun_agreement_with_adjective_1 distractor_agreement_relational_noun
distractor_agreement_relative_clause drop_argument ellipsis_n_bar_1 ellipsis_n_bar_2
existential_there_object_raising existential_there_quantifiers_1 existential_there_quantifiers_2
existential_there_subject_raising expletive_it_object_raising inchoative intransitive
irregular_past_participle_adjectives irregular_past_participle_verbs irregular_plural_subject_verb_agreement_1
irregular_plural_subject_verb_agreement_2 left_branch_island_echo_question left_branch_island_simple_question
matrix_question_npi_licensor_present npi_present_1 npi_present_2 only_npi_licensor_present only_npi_scope
passive_1 passive_2 principle_A_c_command principle_A_case_1 principle_A_case_2 principle_A_domain_1
principle_A_domain_2 principle_A_domain_3 principle_A_reconstruction regular_plural_subject_verb_agreement_1
regular_plural_subject_verb_agreement_2 sentential_negation_npi_licensor_present sentential_negation_npi_scope
sentential_subject_island superlative_quantifiers_1 superlative_quantifiers_2 tough_vs_raising_1
tough_vs_raising_2 transitive wh_island wh_questions_object_gap wh_questions_subject_gap
wh_questions_subject_gap_long_distance wh_vs_that_no_gap wh_vs_that_no_gap_long_distance wh_vs_that_with_gap
wh_vs_that_with_gap_long_distance""".split())


def build_blimp(per_paradigm=None, seed=0):
    """BLiMP (all 67 paradigms, sorted) as ``pairs`` items."""
    import datasets
    source = "nyu-mll/blimp"
    try:
        configs = sorted(datasets.get_dataset_config_names(source))
    except Exception:  # noqa: BLE001
        source = "blimp"
        configs = sorted(datasets.get_dataset_config_names(source))
    if configs == ["default"]:  # an offline cache (HF_DATASETS_OFFLINE) cannot list the configs
        configs = sorted(BLIMP_PARADIGMS)
    items = []
    for c in configs:
        ds = hub_dataset([source, "nyu-mll/blimp", "blimp"], c, "train")
        for i in subsample(len(ds), per_paradigm, seed):
            row = ds[i]
            items.append({"id": f"blimp-{c}-{i}", "paradigm": c, "good": row["sentence_good"],
                          "bad": row["sentence_bad"]})
    return items


def build_gsm8k(n=250, seed=0):
    """GSM8K (test) as ``numeric`` items, zero-shot
    ("Question: ...\\nAnswer:"; the gold answer is the number after ####)."""
    ds = hub_dataset(["openai/gsm8k", "gsm8k"], "main", "test")
    items = []
    for i in subsample(len(ds), n, seed):
        row = ds[i]
        gold = _clean_number(row["answer"].split("####")[-1].strip())
        items.append({"id": f"gsm8k-{i}", "prompt": f"Question: {row['question']}\nAnswer:", "answer": gold})
    return items


SUPERGLUE_SOURCES = ["aps/super_glue", "super_glue"]


def build_superglue(tasks=("boolq", "cb", "copa", "rte", "wic", "wsc"), n_per_task=1000, seed=0):
    """SuperGLUE validation sets as zero-shot ``choice`` items in the prompt
    formats of lm-evaluation-harness's super-glue-lm-eval-v1. Returns
    ``{task: items}``."""
    out = {}
    for task in tasks:
        config = "wsc.fixed" if task == "wsc" else task
        ds = hub_dataset(SUPERGLUE_SOURCES, config, "validation")
        items = []
        for i in subsample(len(ds), n_per_task, seed):
            r = ds[i]
            if task == "boolq":
                ctx, ch = f"{r['passage']}\nQuestion: {r['question']}?\nAnswer:", [" no", " yes"]
            elif task == "cb":
                ctx = f"{r['premise']}\nQuestion: {r['hypothesis']}. True, False, or Neither?\nAnswer:"
                ch = [" True", " False", " Neither"]
            elif task == "copa":
                connector = {"cause": "because", "effect": "therefore"}[r["question"]]
                ctx = r["premise"].strip()[:-1] + f" {connector}"
                ch = [" " + c[0].lower() + c[1:] for c in (r["choice1"], r["choice2"])]
            elif task == "rte":
                ctx, ch = f"{r['premise']}\nQuestion: {r['hypothesis']} True or False?\nAnswer:", [" True", " False"]
            elif task == "wic":
                word = r["sentence1"][r["start1"]:r["end1"]]
                ctx = (f"Sentence 1: {r['sentence1']}\nSentence 2: {r['sentence2']}\nQuestion: Is the word "
                       f"'{word}' used in the same way in the two sentences above?\nAnswer:")
                ch = [" no", " yes"]
            elif task == "wsc":
                ctx = (f"Passage: {r['text']}\nQuestion: In the passage above, does the pronoun "
                       f"\"*{r['span2_text']}*\" refer to \"*{r['span1_text']}*\"?\nAnswer:")
                ch = [" no", " yes"]
            else:
                raise ValueError(f"unsupported SuperGLUE task {task!r}")
            items.append({"id": f"{task}-{i}", "context": ctx, "choices": ch, "label": int(r["label"])})
        out[task] = items
    return out


GLUE_SOURCES = ["nyu-mll/glue", "glue"]


def build_glue(tasks=("cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "wnli"), n_per_task=1000, seed=0):
    """GLUE validation sets as zero-shot ``choice`` items in the prompt
    formats of lm-evaluation-harness's glue group. Returns ``{task: items}``."""
    out = {}
    for task in tasks:
        split = "validation_matched" if task == "mnli" else "validation"
        ds = hub_dataset(GLUE_SOURCES, task, split)
        items = []
        for i in subsample(len(ds), n_per_task, seed):
            r = ds[i]
            label = int(r["label"])
            if task == "cola":
                ctx, ch = f"{r['sentence']}\nQuestion: Does this sentence make sense?\nAnswer:", [" no", " yes"]
            elif task == "sst2":
                ctx = f"{r['sentence']}\nQuestion: Is this sentence positive or negative?\nAnswer:"
                ch = [" negative", " positive"]
            elif task == "mrpc":
                ctx = (f"Sentence 1: {r['sentence1']}\nSentence 2: {r['sentence2']}\nQuestion: Do both "
                       "sentences mean the same thing?\nAnswer:")
                ch = [" no", " yes"]
            elif task == "qqp":
                ctx = (f"Question 1: {r['question1']}\nQuestion 2: {r['question2']}\nQuestion: Do both "
                       "questions ask the same thing?\nAnswer:")
                ch = [" no", " yes"]
            elif task == "mnli":
                hyp = r["hypothesis"].strip()
                hyp = hyp if hyp.endswith(".") else hyp + "."
                ctx = f"{r['premise']}\nQuestion: {hyp} True, False or Neither?\nAnswer:"
                ch = [" True", " Neither", " False"]
            elif task == "qnli":
                ctx = f"{r['question']}\n{r['sentence']}\nQuestion: Does this response answer the question?\nAnswer:"
                ch = [" yes", " no"]
            elif task == "rte":
                ctx, ch = f"{r['sentence1']}\nQuestion: {r['sentence2']} True or False?\nAnswer:", [" True", " False"]
            elif task == "wnli":
                ctx, ch = f"{r['sentence1']}\nQuestion: {r['sentence2']} True or False?\nAnswer:", [" False", " True"]
            else:
                raise ValueError(f"unsupported GLUE task {task!r}")
            if label < 0:
                continue
            items.append({"id": f"{task}-{i}", "context": ctx, "choices": ch, "label": label})
        out[task] = items
    return out


def build_mathqa(n=1000, split="test", seed=0):
    """MathQA as ``choice`` items ("Question: <problem>\\nAnswer:" followed by
    one of the five options, as lm-evaluation-harness's mathqa)."""
    ds = hub_dataset(["allenai/math_qa", "math_qa"], None, split)
    items = []
    for i in subsample(len(ds), n, seed):
        r = ds[i]
        options = [c[4:].rstrip(" ,") for c in re.findall(r"[abcd] \) .*?, |e \) .*?$", r["options"])]
        if len(options) != 5 or r["correct"] not in "abcde":
            continue
        items.append({"id": f"mathqa-{i}", "context": f"Question: {r['Problem']}\nAnswer:",
                      "choices": [" " + o for o in options], "label": "abcde".index(r["correct"])})
    return items


def build_commonsense_qa(n=None, seed=0):
    """CommonsenseQA (validation) as ``choice`` items with answer letters."""
    ds = hub_dataset(["tau/commonsense_qa", "commonsense_qa"], None, "validation")
    items = []
    for i in subsample(len(ds), n, seed):
        r = ds[i]
        labels = list(r["choices"]["label"])
        if r["answerKey"] not in labels:
            continue
        text = f"Question: {r['question'].strip()}\n" + "".join(
            f"{lab}. {t}\n" for lab, t in zip(labels, r["choices"]["text"])) + "Answer:"
        items.append({"id": f"csqa-{i}", "context": text, "choices": [" " + lab for lab in labels],
                      "label": labels.index(r["answerKey"])})
    return items


def build_truthfulqa_mc1(n=None, seed=0):
    """TruthfulQA multiple choice (MC1, one true answer) as ``choice`` items
    ("Q: ...\\nA:" followed by each answer)."""
    ds = hub_dataset(["truthfulqa/truthful_qa", "truthful_qa"], "multiple_choice", "validation")
    items = []
    for i in subsample(len(ds), n, seed):
        r = ds[i]
        targets = r["mc1_targets"]
        items.append({"id": f"truthfulqa-{i}", "context": f"Q: {r['question']}\nA:",
                      "choices": [" " + c for c in targets["choices"]], "label": list(targets["labels"]).index(1)})
    return items


def build_cosmosqa(n=1000, seed=0, exclude_texts=()):
    """CosmosQA (validation) as ``choice`` items
    ("<context>\\nQuestion: <question>\\nAnswer:" followed by each answer),
    leaving out questions whose context appears in ``exclude_texts``."""
    ds = hub_dataset(["allenai/cosmos_qa", "cosmos_qa"], None, "validation")
    excluded = "\n".join(exclude_texts)
    items = []
    for i in subsample(len(ds), None, seed):
        r = ds[i]
        if r["context"].strip() and r["context"].strip()[:200] in excluded:
            continue
        items.append({"id": f"cosmosqa-{i}", "context": f"{r['context']}\nQuestion: {r['question']}\nAnswer:",
                      "choices": [" " + r[f"answer{k}"] for k in range(4)], "label": int(r["label"])})
    return [items[j] for j in subsample(len(items), n, seed)]


def build_xsum(n=200, seed=0, exclude_texts=(), max_document_chars=6000):
    """XSum (test) as ``rouge_l`` items: "Article: <document>\\n\\nSummarize the
    article above in one sentence.\\nSummary:" with the reference summary,
    leaving out articles that appear in ``exclude_texts``."""
    ds = hub_dataset(["EdinburghNLP/xsum", "xsum"], None, "test")
    excluded = "\n".join(exclude_texts)
    candidates = []
    for i in subsample(len(ds), None, seed):
        r = ds[i]
        doc = r["document"].strip()
        if not doc or doc[:200] in excluded:
            continue
        candidates.append((i, doc[:max_document_chars], r["summary"].strip()))
    chosen = [candidates[j] for j in subsample(len(candidates), n, seed)]
    return [{"id": f"xsum-{i}", "prompt": f"Article: {doc}\n\nSummarize the article above in one sentence.\nSummary:",
             "reference": summary} for i, doc, summary in chosen]


def build_wikitext2():
    """The WikiText-2 (raw) test set as one string, lines joined as the
    original agent-eval perplexity benchmark does (empty lines become " \\n")."""
    ds = hub_dataset(["Salesforce/wikitext", "wikitext"], "wikitext-2-raw-v1", "test")
    return "".join(" \n" if s == "" else s for s in ds["text"])
