"""Starter script for the mlrb task `mini_math_reasoning`.

Fine-tunes AlgorithmicResearchGroup/gpt2-xs on the GSM8K training problems (question,
then the worked solution; loss on the solution only). The evaluation is multiple
choice: data closer to MMLU mathematics and MathQA, and answer-option formats, are
the obvious next steps.

Run from the workspace root on the GPU:
    python3 train.py
    python3 train.py --base <another hub model> --epochs 3 --lr 1e-5
"""
import argparse
import json
import math
import os
import random
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--base", default="AlgorithmicResearchGroup/gpt2-xs")
parser.add_argument("--epochs", type=float, default=3)
parser.add_argument("--lr", type=float, default=1e-4)
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--max-length", type=int, default=256)
parser.add_argument("--hours", type=float, default=2)
parser.add_argument("--out", default="model")
args = parser.parse_args()

random.seed(0)
torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
started = time.time()


def make_prompt(question):
    return f"Question: {question}\nAnswer:"


from datasets import load_dataset

_rows = list(load_dataset("openai/gsm8k", "main", split="train"))
random.Random(0).shuffle(_rows)
examples = [(make_prompt(r["question"]), " " + r["answer"].strip()) for r in _rows]
dev_examples, train_examples = examples[:200], examples[200:]

try:
    tokenizer = AutoTokenizer.from_pretrained(args.base)
except Exception:  # a repository without tokenizer files (gpt2-xs uses GPT-2's tokenizer)
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float32).to(device)
model.gradient_checkpointing_enable()
eos = tokenizer.eos_token or ""


def encode(example):
    """Prompt and target token ids; the loss covers the target (and the end-of-text token) only."""
    prompt, target = example
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    t = tokenizer(target + eos, add_special_tokens=False)["input_ids"]
    ids = (p + t)[-args.max_length:]
    labels = ([-100] * len(p) + t)[-args.max_length:]
    return ids, labels


encoded = [encode(e) for e in train_examples]
dev_encoded = [encode(e) for e in dev_examples]
pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def collate(rows):
    width = max(len(ids) for ids, _ in rows)
    x = torch.full((len(rows), width), pad)
    y = torch.full((len(rows), width), -100)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (ids, labels) in enumerate(rows):
        x[i, :len(ids)] = torch.tensor(ids)
        y[i, :len(ids)] = torch.tensor(labels)
        mask[i, :len(ids)] = 1
    return x.to(device), y.to(device), mask.to(device)


@torch.no_grad()
def dev_loss():
    model.eval()
    losses = [model(input_ids=x, attention_mask=m, labels=y, use_cache=False).loss.item()
              for x, y, m in (collate(dev_encoded[i:i + args.batch]) for i in range(0, len(dev_encoded), args.batch))]
    model.train()
    return sum(losses) / max(1, len(losses))


optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
steps = max(1, int(args.epochs * len(encoded) / args.batch))
deadline = started + args.hours * 3600
model.train()
for step in range(steps):
    if time.time() > deadline:
        break
    lr = args.lr * min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / steps))
    for g in optimizer.param_groups:
        g["lr"] = lr
    x, y, m = collate(random.sample(encoded, min(args.batch, len(encoded))))
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
        loss = model(input_ids=x, attention_mask=m, labels=y, use_cache=False).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step % 50 == 0:
        print(f"step {step}/{steps} loss {loss.item():.4f} {time.time() - started:.0f}s", flush=True)
print(f"dev loss {dev_loss():.4f}")

model.eval()
os.makedirs(args.out, exist_ok=True)
model.save_pretrained(args.out)
tokenizer.save_pretrained(args.out)
print(f"saved the model to {args.out}/")
