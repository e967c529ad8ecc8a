"""Starter script for the mlrb task `mini_llm_efficiency`.

Continues training AlgorithmicResearchGroup/gpt2-xs on WikiText-103 (as the original
example does) for one hour. Instruction data, better mixtures, a longer context and
a tuned schedule are the obvious next steps.

Run from the workspace root on the GPU:
    python3 train.py                      # defaults below
    python3 train.py --hours 1 --lr 3e-4  # shorter run, other learning rate

It writes the model and its tokenizer to model/ (safetensors), the folder
the evaluator scores. This is a plain PyTorch loop on purpose: change
anything (data, architecture, objective, schedule, tokenizer).
"""
import argparse
import math
import os
import random
import time

import torch
from datasets import load_dataset
from transformers import AutoTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--hours", type=float, default=1, help="wall-clock budget of the training loop")
parser.add_argument("--max-steps", type=int, default=1000000)
parser.add_argument("--block", type=int, default=256, help="training sequence length in tokens")
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--lr", type=float, default=3e-4)
parser.add_argument("--warmup", type=int, default=200)
parser.add_argument("--eval-every", type=int, default=500)
parser.add_argument("--out", default="model")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

random.seed(args.seed)
torch.manual_seed(args.seed)
device = "cuda" if torch.cuda.is_available() else "cpu"
started = time.time()

# --------------------------------------------------------------------------
# Data: train_texts() yields training documents, dev_texts() returns a few
# held-out documents to watch the loss.
_wiki = load_dataset("Salesforce/wikitext", "wikitext-103-raw-v1")


def _documents(split, lines_per_document=40):
    group = []
    for line in _wiki[split]["text"]:
        if line.strip():
            group.append(line.strip())
        if len(group) == lines_per_document:
            yield "\n".join(group)
            group = []


def train_texts():
    return _documents("train")


def dev_texts():
    return list(_documents("validation"))[:200]

# --------------------------------------------------------------------------
# Model and tokenizer.
from transformers import AutoModelForCausalLM

BASE = "AlgorithmicResearchGroup/gpt2-xs"  # the 30M-parameter GPT-2 of the task
try:
    tokenizer = AutoTokenizer.from_pretrained(BASE)
except Exception:  # the repository may ship no tokenizer: gpt2-xs uses GPT-2's
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained(BASE, torch_dtype=torch.float32)
model.to(device)
print(f"parameters: {sum(p.numel() for p in model.parameters()):,}")
if tokenizer.eos_token_id is None:
    raise SystemExit("the tokenizer needs an end-of-text token")


def token_blocks(texts, limit_tokens=None):
    """Concatenates tokenized documents (separated by the end-of-text token)
    and cuts them into blocks of args.block tokens."""
    buf, n = [], 0
    batch = []
    for text in texts:
        batch.append(text)
        if len(batch) == 256:
            for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]:
                buf.extend(ids + [tokenizer.eos_token_id])
            batch = []
            while len(buf) >= args.block:
                yield buf[:args.block]
                buf = buf[args.block:]
                n += args.block
                if limit_tokens and n >= limit_tokens:
                    return
    if batch:
        for ids in tokenizer(batch, add_special_tokens=False)["input_ids"]:
            buf.extend(ids + [tokenizer.eos_token_id])
        while len(buf) >= args.block:
            yield buf[:args.block]
            buf = buf[args.block:]


def batches():
    """Endless shuffled batches of training blocks (a shuffle buffer over the stream)."""
    pool = []
    while True:
        for block in token_blocks(train_texts()):
            pool.append(block)
            if len(pool) >= 64 * args.batch:
                random.shuffle(pool)
                while len(pool) > 32 * args.batch:
                    chunk, pool = pool[:args.batch], pool[args.batch:]
                    yield torch.tensor(chunk, dtype=torch.long)
        random.shuffle(pool)
        while len(pool) >= args.batch:
            chunk, pool = pool[:args.batch], pool[args.batch:]
            yield torch.tensor(chunk, dtype=torch.long)


dev_blocks = torch.tensor(list(token_blocks(dev_texts(), limit_tokens=200 * args.block)), dtype=torch.long)


@torch.no_grad()
def dev_loss():
    model.eval()
    losses = []
    for i in range(0, len(dev_blocks), args.batch):
        x = dev_blocks[i:i + args.batch].to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            losses.append(model(input_ids=x, labels=x, use_cache=False).loss.float().item())
    model.train()
    return sum(losses) / max(1, len(losses))


decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=args.lr, betas=(0.9, 0.95), fused=device == "cuda")


deadline = started + args.hours * 3600
loop_started = time.time()


def lr_at(step):
    """Linear warm-up, then a cosine decay to 10% over the step or time budget, whichever ends first."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    by_steps = (step - args.warmup) / max(1, args.max_steps - args.warmup)
    by_time = (time.time() - loop_started) / max(1.0, deadline - loop_started)
    progress = min(1.0, max(by_steps, by_time))
    return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


model.train()
step = 0
for x in batches():
    if step >= args.max_steps or time.time() > deadline:
        break
    for group in optimizer.param_groups:
        group["lr"] = lr_at(step)
    x = x.to(device, non_blocking=True)
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
        loss = model(input_ids=x, labels=x, use_cache=False).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.4f} lr {lr_at(step):.2e} {time.time() - started:.0f}s", flush=True)
    if step % args.eval_every == 0:
        print(f"step {step} dev loss {dev_loss():.4f}", flush=True)
    step += 1

print(f"final dev loss {dev_loss():.4f} after {step} steps, {time.time() - started:.0f}s")
model.eval()

os.makedirs(args.out, exist_ok=True)
model.save_pretrained(args.out)
tokenizer.save_pretrained(args.out)
print(f"saved the model to {args.out}/")
