"""Starter script for the mlrb task `edge_llm_compression`: compress microsoft/phi-2.

A simple structured compression without any training: in every layer it keeps
the MLP neurons with the largest weight norms (|fc1 row| x |fc2 column|) and
removes the others, shrinking `intermediate_size` from 10240 to 8192. That
takes the model from 2,779,683,840 to 2,444,073,984 parameters (88%), within
the task's limit of 90% of phi-2. The weights stay in float16, with no
quantization, and the architecture stays phi-2's (`model_type` "phi"), so
transformers loads the result without custom code.

Ideas to try: better importance scores (activation statistics on a few
hundred sequences of open calibration text such as C4 or WikiText training
data, without gradient updates), pruning attention heads or whole layers,
non-uniform budgets per layer.

Run from the workspace root on the GPU:
    python3 train.py                 # keep 8192 neurons per layer
    python3 train.py --keep 7680
"""
import argparse
import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

parser = argparse.ArgumentParser()
parser.add_argument("--base", default="microsoft/phi-2")
parser.add_argument("--keep", type=int, default=8192, help="MLP neurons kept per layer (phi-2 has 10240)")
parser.add_argument("--out", default="model")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
tokenizer = AutoTokenizer.from_pretrained(args.base)
model = AutoModelForCausalLM.from_pretrained(args.base, torch_dtype=torch.float16).to(device)
before = sum(p.numel() for p in model.parameters())

with torch.no_grad():
    for layer in model.model.layers:
        fc1, fc2 = layer.mlp.fc1, layer.mlp.fc2
        score = fc1.weight.float().norm(dim=1) * fc2.weight.float().norm(dim=0)
        keep = score.topk(args.keep).indices.sort().values
        new_fc1 = torch.nn.Linear(fc1.in_features, args.keep, bias=True, dtype=fc1.weight.dtype, device=device)
        new_fc2 = torch.nn.Linear(args.keep, fc2.out_features, bias=True, dtype=fc2.weight.dtype, device=device)
        new_fc1.weight.copy_(fc1.weight[keep])
        new_fc1.bias.copy_(fc1.bias[keep])
        new_fc2.weight.copy_(fc2.weight[:, keep])
        new_fc2.bias.copy_(fc2.bias)
        layer.mlp.fc1, layer.mlp.fc2 = new_fc1, new_fc2
model.config.intermediate_size = args.keep

after = sum(p.numel() for p in model.parameters())
print(f"parameters: {before:,} -> {after:,} ({after / before:.1%})")
os.makedirs(args.out, exist_ok=True)
model.save_pretrained(args.out)
tokenizer.save_pretrained(args.out)
print(f"saved the compressed model to {args.out}/")
