"""Starter script for the mlrb task `mini_edge_llm_compression`: compress the
30M-parameter GPT-2 AlgorithmicResearchGroup/gpt2-xs.

A simple structured compression without any training: in every layer it keeps
the MLP neurons with the largest weight norms (|c_fc column| x |c_proj row|)
and removes the others, shrinking the MLP from 1536 to 768 neurons (`n_inner`).
That takes the model from 30,044,544 to 26,500,992 parameters (88%), within
the task's limit of 90% of gpt2-xs. The weights stay in float32, with no
quantization, and the architecture stays GPT-2, so transformers loads the
result without custom code.

Ideas to try: importance scores from activation statistics on open
calibration text (no gradient updates), removing attention heads or whole
layers, pruning the vocabulary, non-uniform budgets per layer.

Run from the workspace root:
    python3 train.py                # keep 768 neurons per layer
    python3 train.py --keep 1024
"""
import argparse
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--base", default="AlgorithmicResearchGroup/gpt2-xs")
parser.add_argument("--keep", type=int, default=768, help="MLP neurons kept per layer (gpt2-xs has 1536)")
parser.add_argument("--out", default="model")
args = parser.parse_args()

try:
    tokenizer = AutoTokenizer.from_pretrained(args.base)
except Exception:  # the repository may ship no tokenizer: gpt2-xs uses GPT-2's
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
model = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float32)
before = sum(p.numel() for p in model.parameters())

with torch.no_grad():
    for block in model.transformer.h:
        c_fc, c_proj = block.mlp.c_fc, block.mlp.c_proj  # Conv1D: weight [in, out]
        score = c_fc.weight.norm(dim=0) * c_proj.weight.norm(dim=1)
        keep = score.topk(args.keep).indices.sort().values
        new_fc = type(c_fc)(args.keep, c_fc.weight.shape[0])
        new_proj = type(c_proj)(c_proj.weight.shape[1], args.keep)
        new_fc.weight.copy_(c_fc.weight[:, keep])
        new_fc.bias.copy_(c_fc.bias[keep])
        new_proj.weight.copy_(c_proj.weight[keep, :])
        new_proj.bias.copy_(c_proj.bias)
        block.mlp.c_fc, block.mlp.c_proj = new_fc, new_proj
model.config.n_inner = args.keep

after = sum(p.numel() for p in model.parameters())
print(f"parameters: {before:,} -> {after:,} ({after / before:.1%})")
os.makedirs(args.out, exist_ok=True)
model.save_pretrained(args.out)
tokenizer.save_pretrained(args.out)
print(f"saved the compressed model to {args.out}/")
