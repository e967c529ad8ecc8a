"""Starter script for the mlrb task `mini_budget_model_inference`: quantize
the 30M-parameter GPT-2 AlgorithmicResearchGroup/gpt2-xs for faster generation.

It loads gpt2-xs quantized to 8 bits with bitsandbytes, saves it to model/
(config.json then carries the quantization_config) and measures, on the
WikiText-2 *validation* split (the evaluator uses the test split), the
perplexity and the generation speed of the quantized and the original model.

8-bit bitsandbytes matrices are often slower than float16 for a model this
small; try 4-bit (--bits 4, with --compute-dtype), other settings of
BitsAndBytesConfig, or anything else that keeps the supplied model,
quantized, and its perplexity within 5% of the original's.

Run from the workspace root on the GPU:
    python3 train.py
    python3 train.py --bits 4 --compute-dtype float16
"""
import argparse
import math
import os
import time

import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

parser = argparse.ArgumentParser()
parser.add_argument("--base", default="AlgorithmicResearchGroup/gpt2-xs")
parser.add_argument("--bits", type=int, default=8, choices=[4, 8])
parser.add_argument("--compute-dtype", default="float16", choices=["float16", "bfloat16", "float32"])
parser.add_argument("--out", default="model")
args = parser.parse_args()

try:
    tokenizer = AutoTokenizer.from_pretrained(args.base)
except Exception:  # the repository may ship no tokenizer: gpt2-xs uses GPT-2's
    tokenizer = AutoTokenizer.from_pretrained("gpt2")

if args.bits == 8:
    qconfig = BitsAndBytesConfig(load_in_8bit=True)
else:
    qconfig = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=getattr(torch, args.compute_dtype))
quantized = AutoModelForCausalLM.from_pretrained(args.base, quantization_config=qconfig, device_map={"": 0})
reference = AutoModelForCausalLM.from_pretrained(args.base).to("cuda")

text = "".join(" \n" if s == "" else s for s in load_dataset("Salesforce/wikitext", "wikitext-2-raw-v1",
                                                                 split="validation")["text"])
ids = tokenizer(text)["input_ids"]


@torch.no_grad()
def perplexity(model, context=256, stride=128):
    nll, count, prev = 0.0, 0, 0
    for begin in range(0, len(ids), stride):
        end = min(begin + context, len(ids))
        x = torch.tensor([ids[begin:end]], device="cuda")
        new = end - max(prev, begin + 1)
        logp = torch.log_softmax(model(x).logits[0, -new - 1:-1].float(), -1)
        nll -= logp.gather(1, x[0, -new:].unsqueeze(1)).sum().item()
        count += new
        prev = end
        if end == len(ids):
            break
    return math.exp(nll / count)


@torch.no_grad()
def tokens_per_second(model, prompt="The history of the printing press begins", new_tokens=128, runs=5):
    x = tokenizer(prompt, return_tensors="pt").input_ids.to("cuda")
    kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                  pad_token_id=tokenizer.eos_token_id)
    model.generate(x, **kwargs)  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(runs):
        model.generate(x, **kwargs)
    torch.cuda.synchronize()
    return runs * new_tokens / (time.perf_counter() - t0)


for name, model in (("original", reference), (f"{args.bits}-bit", quantized)):
    print(f"{name}: validation perplexity {perplexity(model):.3f}, {tokens_per_second(model):.1f} tokens/s")

os.makedirs(args.out, exist_ok=True)
quantized.save_pretrained(args.out)
tokenizer.save_pretrained(args.out)
print(f"saved the quantized model to {args.out}/")
