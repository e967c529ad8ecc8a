"""Text metrics and answer extraction, in pure Python: ROUGE-L, corpus BLEU,
the final number or answer letter of a generated answer, and SQuAD-style
exact match."""
from __future__ import annotations

import math
import re


def tokenize_words(text):
    """Lower-cased alphanumeric tokens (rouge-score's default tokenization)."""
    return re.findall(r"[a-z0-9]+", text.lower())


def rouge_l(prediction, reference, max_tokens=2000):
    """ROUGE-L F1 of two strings (longest common subsequence of
    :func:`tokenize_words` tokens, each side cut to ``max_tokens``)."""
    a = tokenize_words(prediction)[:max_tokens]
    b = tokenize_words(reference)[:max_tokens]
    if not a or not b:
        return 0.0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    p, r = lcs / len(a), lcs / len(b)
    return 2 * p * r / (p + r)


def _bleu_tokens(text):
    return re.findall(r"\w+|[^\w\s]", text)


def corpus_bleu(predictions, references, max_n=4):
    """Corpus BLEU (0-1) with one reference per prediction: uniform weights
    over 1..``max_n``-grams and the brevity penalty; words and punctuation
    marks are tokens."""
    matches = [0] * max_n
    totals = [0] * max_n
    pred_len = ref_len = 0
    for pred, ref in zip(predictions, references):
        p, r = _bleu_tokens(pred), _bleu_tokens(ref)
        pred_len += len(p)
        ref_len += len(r)
        for n in range(1, max_n + 1):
            pc, rc = {}, {}
            for i in range(len(p) - n + 1):
                g = tuple(p[i:i + n])
                pc[g] = pc.get(g, 0) + 1
            for i in range(len(r) - n + 1):
                g = tuple(r[i:i + n])
                rc[g] = rc.get(g, 0) + 1
            matches[n - 1] += sum(min(c, rc.get(g, 0)) for g, c in pc.items())
            totals[n - 1] += max(0, len(p) - n + 1)
    if pred_len == 0 or min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / t) for m, t in zip(matches, totals)) / max_n
    bp = 1.0 if pred_len > ref_len else math.exp(1 - ref_len / pred_len)
    return bp * math.exp(log_precision)


_NUMBER = r"-?\$?\s?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+"


def _clean_number(text):
    text = text.replace(",", "").replace("$", "").replace(" ", "")
    if text.endswith("."):
        text = text[:-1]
    return text


def extract_number(text):
    """The final numeric answer in a generated solution, as a string without
    thousands separators: after ``####`` (GSM8K's format) if present, else
    after "answer is", else the last number in the text. None if there is none."""
    for pattern in (r"####\s*(" + _NUMBER + ")", r"answer is[:\s]*(" + _NUMBER + ")"):
        m = re.search(pattern, text, flags=re.IGNORECASE)
        if m:
            return _clean_number(m.group(1))
    found = re.findall(_NUMBER, text)
    return _clean_number(found[-1]) if found else None


def numbers_match(prediction, gold, rel_tol=1e-6, abs_tol=1e-6):
    """Whether two numeric strings denote the same number."""
    if prediction is None or gold is None:
        return False
    try:
        a, b = float(_clean_number(str(prediction))), float(_clean_number(str(gold)))
    except ValueError:
        return False
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)


def extract_choice(text, n_choices=4):
    """Index of the answer letter in a generated answer ("The answer is (B)",
    "B.", "(c)", "Answer: D"), or None. Letters beyond ``n_choices`` are
    ignored."""
    letters = "ABCDEFGHIJ"[:n_choices]
    cls = f"[{letters}{letters.lower()}]"
    patterns = (
        rf"answer\s*(?:is|:)\s*\(?({cls})\b",
        rf"^\s*\(?({cls})\s*[\).:]",
        rf"^\s*({cls})\s*$",
        rf"\(({cls})\)",
        rf"\b([{letters}])\b",
    )
    for pattern in patterns:
        m = re.search(pattern, text, flags=re.MULTILINE)
        if m:
            return letters.index(m.group(1).upper())
    return None


def normalize_answer(text):
    """SQuAD-style normalisation: lower case, no punctuation, no articles,
    single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch.isalnum() or ch.isspace())
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction, gold):
    """Exact match after :func:`normalize_answer`."""
    return normalize_answer(prediction) == normalize_answer(gold)
