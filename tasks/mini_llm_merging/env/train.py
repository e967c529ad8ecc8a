"""Starter script for the mlrb task `mini_llm_merging`: merge expert models into one.

This is the example merging code of the task: it builds the merged model by
a weighted average of the parameters of models that share one architecture
(like the LlamaAvg / FlanT5Avg examples of the LLM-Merging competition) and
writes it to model/. Put your own merging method in this file (a new
function next to `average`, selected with --method), so that

    python3 train.py --method <yours> --models <hub ids ...>

rebuilds the submitted model from public checkpoints. The whole merge (and
any fine-tuning) must finish within one hour: a single script run is
stopped after 60 minutes.

Rules for the input models: public on the Hugging Face hub, uploaded before
31 May 2024, of at most 8 GB each. Fine-tuned models and adapters of
such models are allowed.

Run from the workspace root:
    python3 train.py                                   # the default pair below
    python3 train.py --models A B C --weights 0.5 0.25 0.25
"""
import argparse
import gc
import os
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--models", nargs="+", default=["Qwen/Qwen1.5-1.8B", "Qwen/Qwen1.5-1.8B-Chat"],
                    help="hub ids (or local folders) of models with identical architectures")
parser.add_argument("--weights", nargs="+", type=float, default=None, help="one weight per model (default: equal)")
parser.add_argument("--method", default="average", choices=["average"])
parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
parser.add_argument("--tokenizer-from", type=int, default=0, help="index of the model whose tokenizer is saved")
parser.add_argument("--out", default="model")
args = parser.parse_args()

started = time.time()
dtype = getattr(torch, args.dtype)
weights = args.weights or [1.0 / len(args.models)] * len(args.models)
if len(weights) != len(args.models):
    raise SystemExit("give one weight per model")


def load(name):
    """Loads a model on the CPU (causal or encoder-decoder, as its config says)."""
    config = AutoConfig.from_pretrained(name)
    cls = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForCausalLM
    return cls.from_pretrained(name, torch_dtype=dtype, low_cpu_mem_usage=True)


def average(names, weights):
    """Weighted average of the parameters of models with the same architecture.
    Models are loaded one at a time to bound memory; the sum is kept in float32."""
    merged = load(names[0])
    acc = {k: v.detach().float() * weights[0] for k, v in merged.state_dict().items() if v.is_floating_point()}
    for name, w in zip(names[1:], weights[1:]):
        other = load(name).state_dict()
        for k in acc:
            if k not in other or other[k].shape != acc[k].shape:
                raise SystemExit(f"{name} does not match {names[0]} at {k}")
            acc[k] += other[k].float() * w
        del other
        gc.collect()
    merged.load_state_dict({k: v.to(dtype) for k, v in acc.items()}, strict=False)
    return merged


METHODS = {"average": average}

model = METHODS[args.method](args.models, weights)
tokenizer = AutoTokenizer.from_pretrained(args.models[args.tokenizer_from])
os.makedirs(args.out, exist_ok=True)
model.save_pretrained(args.out)
tokenizer.save_pretrained(args.out)
print(f"merged {len(args.models)} models into {args.out}/ "
      f"({sum(p.numel() for p in model.parameters()):,} parameters) in {time.time() - started:.0f}s")
