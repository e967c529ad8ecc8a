"""Scoring with language models: log-likelihoods of continuations (multiple
choice, sentence pairs), greedy generation, perplexity with a sliding window
and generation throughput. torch is imported inside the functions."""
from __future__ import annotations

import math
import os
import time

from mlrb_eval import Invalid
from mlrb_llm_env import peak_memory_bytes, reset_peak_memory
from mlrb_llm_protocol import agent_code


# A fixed English text (written for mlrb) used to build prompts of a given
# length for throughput and memory probes.
PROBE_TEXT = (
    "The old lighthouse stood at the end of a narrow spit of land, where the river met the sea. "
    "Every evening the keeper climbed the spiral stairs, trimmed the wick and polished the great lens "
    "until it caught the last of the daylight. Ships coming home from the north would look for its "
    "beam long before they could see the harbour, and fishermen said that on clear nights it could be "
    "seen from the islands forty miles away. In the town below, the market closed at dusk, the bakers "
    "set their dough to rise for the morning, and children were called in from the quay. "
    "Scientists who study coastal weather keep careful records of wind, tide and temperature. "
    "A single year of hourly measurements fills thousands of rows, and patterns appear only when "
    "the numbers are averaged over many seasons: the spring tides that flood the marsh, the autumn "
    "gales that strip the beach of sand, the long calm weeks of late summer. "
)
PROBE_PROMPTS = (
    "Hello, my name is Sam. I am writing to you because I did not get an answer to my last letter.",
    "The three most important things to remember when cooking rice are",
    "Once upon a time, in a village at the edge of a great forest, there lived",
    "The history of the printing press begins in the fifteenth century, when",
    "To measure the speed of sound in air, a student can",
    "The best way to learn a new language as an adult is",
    "Photosynthesis is the process by which plants",
    "In the year 2050, most people will travel to work by",
)


def _encode(tokenizer, text, add_special_tokens=False):
    return list(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])


def _prefix_token_id(tokenizer):
    for tid in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if tid is not None:
            return int(tid)
    raise Invalid("the tokenizer has neither a bos nor an eos token, needed to score text without context")


def _pad_token_id(tokenizer):
    for tid in (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.bos_token_id):
        if tid is not None:
            return int(tid)
    return 0


def _encode_pair_causal(tokenizer, context, continuation):
    """Token ids of context and continuation as lm-evaluation-harness forms
    them: trailing spaces of the context move to the continuation, the pair is
    encoded whole and split where the context's own encoding ends."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    if not context:
        return [_prefix_token_id(tokenizer)], _encode(tokenizer, continuation)
    whole = _encode(tokenizer, context + continuation)
    ctx = _encode(tokenizer, context)
    cont = whole[len(ctx):]
    if not cont or whole[:len(ctx)] != ctx:
        cont = _encode(tokenizer, continuation)
    return ctx, cont


def _batches(lengths, batch_tokens, max_batch):
    """Indices grouped into batches of at most ``batch_tokens`` padded tokens
    (and ``max_batch`` rows), in the given order (sorted longest first)."""
    batch, longest = [], 0
    for i, n in lengths:
        new_longest = max(longest, n)
        if batch and (new_longest * (len(batch) + 1) > batch_tokens or len(batch) >= max_batch):
            yield batch
            batch, new_longest = [], n
        batch.append(i)
        longest = new_longest
    if batch:
        yield batch


def loglikelihoods(model, tokenizer, requests, kind="causal", max_length=2048,
                   batch_tokens=4096, max_batch=64, what="scoring"):
    """Log-likelihood of each ``(context, continuation)`` pair:
    ``[(sum_logprob, is_greedy)]`` in request order. Causal models see the
    context and continuation truncated from the left to ``max_length``
    tokens; requests that share the same model input (e.g. single-token
    answer letters after one question) are computed in one forward pass.
    Encoder-decoder models get the context as encoder input."""
    import torch
    device = next(model.parameters()).device
    results = [None] * len(requests)
    if kind == "seq2seq":
        return _loglikelihoods_seq2seq(model, tokenizer, requests, max_length, batch_tokens, max_batch, what)
    groups = {}
    for i, (context, continuation) in enumerate(requests):
        ctx, cont = _encode_pair_causal(tokenizer, context, continuation)
        if not cont:
            results[i] = (0.0, True)
            continue
        seq = (ctx + cont)[-(max_length + 1):]
        inp = tuple(seq[:-1])
        n = min(len(cont), len(inp))
        groups.setdefault(inp, []).append((i, tuple(cont[-n:])))
    inputs = sorted(groups, key=lambda k: -len(k))
    pad = _pad_token_id(tokenizer)
    order = [(j, len(inp)) for j, inp in enumerate(inputs)]
    with agent_code(what):
        for batch in _batches(order, batch_tokens, max_batch):
            rows = [inputs[j] for j in batch]
            width = max(len(r) for r in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, row in enumerate(rows):
                ids[r, :len(row)] = torch.tensor(row, dtype=torch.long)
                mask[r, :len(row)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
            for r, row in enumerate(rows):
                length = len(row)
                for i, cont in groups[row]:
                    n = len(cont)
                    lp = torch.log_softmax(logits[r, length - n:length].float(), dim=-1)
                    target = torch.tensor(cont, dtype=torch.long, device=lp.device)
                    ll = lp.gather(1, target.unsqueeze(1)).sum().item()
                    greedy = bool((lp.argmax(dim=-1) == target).all().item())
                    results[i] = (ll, greedy)
            del logits
    for i, r in enumerate(results):
        if r is None or not math.isfinite(r[0]):
            raise Invalid(f"{what}: the model produced a non-finite log-likelihood")
    return results


def _loglikelihoods_seq2seq(model, tokenizer, requests, max_length, batch_tokens, max_batch, what):
    import torch
    device = next(model.parameters()).device
    encoded = []
    for context, continuation in requests:
        enc = _encode(tokenizer, context, add_special_tokens=True)[-max_length:]
        cont = _encode(tokenizer, continuation, add_special_tokens=False)[:max_length]
        if not cont:
            cont = _encode(tokenizer, continuation, add_special_tokens=True)[:max_length]
        encoded.append((enc, cont))
    order = sorted(range(len(encoded)), key=lambda i: -(len(encoded[i][0]) + len(encoded[i][1])))
    pad = _pad_token_id(tokenizer)
    results = [None] * len(requests)
    lengths = [(i, len(encoded[i][0]) + len(encoded[i][1])) for i in order]
    with agent_code(what):
        for batch in _batches(lengths, batch_tokens, max_batch):
            enc_w = max(len(encoded[i][0]) for i in batch)
            dec_w = max(len(encoded[i][1]) for i in batch)
            ids = torch.full((len(batch), enc_w), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), enc_w), dtype=torch.long)
            labels = torch.full((len(batch), dec_w), -100, dtype=torch.long)
            for r, i in enumerate(batch):
                enc, cont = encoded[i]
                ids[r, :len(enc)] = torch.tensor(enc)
                mask[r, :len(enc)] = 1
                labels[r, :len(cont)] = torch.tensor(cont)
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                           labels=labels.to(device)).logits
            for r, i in enumerate(batch):
                cont = encoded[i][1]
                lp = torch.log_softmax(logits[r, :len(cont)].float(), dim=-1)
                target = torch.tensor(cont, dtype=torch.long, device=lp.device)
                ll = lp.gather(1, target.unsqueeze(1)).sum().item()
                results[i] = (ll, bool((lp.argmax(dim=-1) == target).all().item()))
            del logits
    for r in results:
        if r is None or not math.isfinite(r[0]):
            raise Invalid(f"{what}: the model produced a non-finite log-likelihood")
    return results


def multiple_choice(model, tokenizer, items, kind="causal", max_length=2048, normalize=None,
                    batch_tokens=4096, what="multiple choice"):
    """Accuracy on ``choice`` items: the prediction is the choice with the
    highest log-likelihood (``normalize="chars"``: divided by the choice's
    length in characters, lm-evaluation-harness's acc_norm); ties go to the
    first choice. Returns ``(accuracy, predictions)``."""
    requests = [(item["context"], choice) for item in items for choice in item["choices"]]
    lls = loglikelihoods(model, tokenizer, requests, kind=kind, max_length=max_length,
                         batch_tokens=batch_tokens, what=what)
    predictions, correct, k = [], 0, 0
    for item in items:
        scores = []
        for choice in item["choices"]:
            ll = lls[k][0]
            k += 1
            if normalize == "chars":
                ll = ll / max(1, len(choice))
            scores.append(ll)
        pred = max(range(len(scores)), key=lambda j: (scores[j], -j))
        predictions.append(pred)
        correct += int(pred == item["label"])
    return correct / max(1, len(items)), predictions


def pair_accuracy(model, tokenizer, items, max_length=2048, batch_tokens=4096, what="sentence pairs"):
    """Fraction of ``pairs`` items whose good sentence has a strictly higher
    total log-probability than the bad one (both scored after the bos/eos
    token, as lm-evaluation-harness does for BLiMP)."""
    requests = []
    for item in items:
        requests.append(("", item["good"]))
        requests.append(("", item["bad"]))
    lls = loglikelihoods(model, tokenizer, requests, kind="causal", max_length=max_length,
                         batch_tokens=batch_tokens, what=what)
    correct = sum(1 for j in range(len(items)) if lls[2 * j][0] > lls[2 * j + 1][0])
    return correct / max(1, len(items))


def _cut_at_stop(text, stop):
    cut = len(text)
    for s in stop or ():
        pos = text.find(s)
        if pos != -1:
            cut = min(cut, pos)
    return text[:cut]


def generate_texts(model, tokenizer, prompts, kind="causal", max_new_tokens=128, max_length=2048,
                   stop=None, batch_size=8, what="generation"):
    """Greedy continuations of ``prompts`` (without the prompt), cut at the
    first of the ``stop`` strings. Prompts are truncated from the left so that
    prompt plus new tokens fit ``max_length``; batches of ``batch_size``
    prompts (longest first, left-padded) keep the output deterministic."""
    import torch
    device = next(model.parameters()).device
    max_new_tokens = max(1, min(max_new_tokens, max_length // 2))
    pad = _pad_token_id(tokenizer)
    eos = tokenizer.eos_token_id
    budget = max_length - max_new_tokens if kind == "causal" else max_length
    encoded = []
    for p in prompts:
        ids = _encode(tokenizer, p, add_special_tokens=(kind == "seq2seq"))
        ids = ids[-budget:] if kind == "causal" else ids[:budget]
        encoded.append(ids or [_prefix_token_id(tokenizer)])
    order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
    outputs = [None] * len(prompts)
    with agent_code(what):
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, i in enumerate(batch):
                seq = encoded[i]
                if kind == "causal":  # left padding
                    ids[r, width - len(seq):] = torch.tensor(seq)
                    mask[r, width - len(seq):] = 1
                else:
                    ids[r, :len(seq)] = torch.tensor(seq)
                    mask[r, :len(seq)] = 1
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                 max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                                 pad_token_id=pad, eos_token_id=eos)
            new = out[:, width:] if kind == "causal" else out[:, 1:]
            for r, i in enumerate(batch):
                text = tokenizer.decode(new[r].tolist(), skip_special_tokens=True)
                outputs[i] = _cut_at_stop(text, stop)
    return outputs


def perplexity(model, tokenizer, text, context_length=1024, stride=512, max_tokens=None,
               batch_size=8, what="perplexity"):
    """Perplexity of a causal model on ``text`` with a sliding window of
    ``context_length`` tokens moved by ``stride``: every token after the first
    is predicted once, with up to ``context_length - stride`` tokens of
    already-scored context (the standard fixed-length-model evaluation).
    ``max_tokens`` caps the tokens of text used. Returns a float."""
    import torch
    device = next(model.parameters()).device
    if not 0 < stride <= context_length:
        raise ValueError("perplexity needs 0 < stride <= context_length")
    ids = _encode(tokenizer, text)
    if max_tokens:
        ids = ids[:max_tokens]
    if len(ids) < 2:
        raise ValueError("perplexity text is too short")
    windows = []  # (begin, end, number of new targets)
    prev_end = 0
    for begin in range(0, len(ids), stride):
        end = min(begin + context_length, len(ids))
        windows.append((begin, end, end - max(prev_end, begin + 1)))
        prev_end = end
        if end == len(ids):
            break
    nll, count = 0.0, 0
    with agent_code(what):
        for start in range(0, len(windows), batch_size):
            chunk = windows[start:start + batch_size]
            width = max(e - b for b, e, _ in chunk)
            pad = _pad_token_id(tokenizer)
            x = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, (b, e, _) in enumerate(chunk):
                x[r, :e - b] = torch.tensor(ids[b:e])
                mask[r, :e - b] = 1
            logits = model(input_ids=x.to(device), attention_mask=mask.to(device)).logits
            for r, (b, e, n_new) in enumerate(chunk):
                length = e - b
                lp = torch.log_softmax(logits[r, length - n_new - 1:length - 1].float(), dim=-1)
                target = torch.tensor(ids[e - n_new:e], dtype=torch.long, device=lp.device)
                nll -= lp.gather(1, target.unsqueeze(1)).sum().item()
                count += n_new
            del logits
    value = math.exp(nll / count) if count and nll / count < 700 else float("inf")
    if not math.isfinite(value):
        raise Invalid(f"{what}: the model's perplexity is not finite")
    return value


def long_prompt(tokenizer, n_tokens):
    """A fixed English prompt of exactly ``n_tokens`` tokens (PROBE_TEXT
    repeated and cut)."""
    ids = []
    while len(ids) < n_tokens:
        ids += _encode(tokenizer, PROBE_TEXT)
    return ids[:n_tokens]


# The smoke profile (toy models on the CPU; its scores measure nothing).
SMOKE = os.environ.get("MLRB_SMOKE") == "1"


def generation_benchmark(model, tokenizer, prompts=PROBE_PROMPTS, kind="causal", new_tokens=128,
                         warmup=3, runs=3, max_length=2048, prompt_token_ids=None, what="throughput"):
    """Generation throughput and latency at batch size 1: each prompt is
    continued greedily by exactly ``new_tokens`` tokens (end-of-sequence
    suppressed), after ``warmup`` untimed generations, ``runs`` times over the
    prompt set. Returns ``tokens_per_second`` (new tokens over total time),
    ``ms_per_token`` (median over generations), ``latency_ms`` (median time
    of one generation) and ``peak_gpu_memory_bytes`` (None on a CPU).
    ``prompt_token_ids`` (a list of token-id lists) replaces ``prompts``.
    In the smoke profile the same code times a few tokens of two prompts."""
    import torch
    device = next(model.parameters()).device
    new_tokens = max(1, min(new_tokens, max_length // 2))
    if prompt_token_ids is None:
        prompt_token_ids = [_encode(tokenizer, p, add_special_tokens=(kind == "seq2seq")) for p in prompts]
    if SMOKE:
        new_tokens, warmup, runs, prompt_token_ids = min(new_tokens, 4), min(warmup, 1), 1, prompt_token_ids[:2]
    budget = max_length - new_tokens if kind == "causal" else max_length
    inputs = [torch.tensor([ids[-budget:] or [_prefix_token_id(tokenizer)]], device=device)
              for ids in prompt_token_ids]
    pad = _pad_token_id(tokenizer)
    gen = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, "do_sample": False,
           "num_beams": 1, "pad_token_id": pad, "eos_token_id": tokenizer.eos_token_id}

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def one(x):
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), **gen)
        return out.shape[1] - (x.shape[1] if kind == "causal" else 1)

    with agent_code(what):
        for _ in range(warmup):
            one(inputs[0])
        reset_peak_memory()
        total_tokens, total_time, per_token, latencies = 0, 0.0, [], []
        for _ in range(runs):
            for x in inputs:
                sync()
                t0 = time.perf_counter()
                n = one(x)
                sync()
                dt = time.perf_counter() - t0
                total_tokens += n
                total_time += dt
                latencies.append(dt * 1000)
                per_token.append(dt * 1000 / max(1, n))
        peak = peak_memory_bytes()
    per_token.sort()
    latencies.sort()
    return {
        "tokens_per_second": total_tokens / total_time if total_time > 0 else 0.0,
        "ms_per_token": per_token[len(per_token) // 2],
        "latency_ms": latencies[len(latencies) // 2],
        "peak_gpu_memory_bytes": peak,
        "new_tokens": new_tokens, "generations": len(latencies),
        "prompt_tokens": [int(x.shape[1]) for x in inputs],
    }
