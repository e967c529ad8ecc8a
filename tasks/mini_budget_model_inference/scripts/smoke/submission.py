"""Smoke submission of mini_budget_model_inference: the model/ folder that
env/train.py saves, made the same way on a CPU.

Why not train.py itself: it cannot run without a GPU. It loads gpt2-xs
quantized by bitsandbytes onto GPU 0 (``device_map={"": 0}``), moves the
unquantized reference copy ``.to("cuda")``, builds its perplexity inputs on
"cuda" and times generation with ``torch.cuda.synchronize()``.

This script does the part that makes the submission, as train.py does (its
default, 8 bits): ``AutoModelForCausalLM.from_pretrained(base,
quantization_config=BitsAndBytesConfig(load_in_8bit=True))``, then
``save_pretrained("model")`` (model.safetensors with the int8 weights and
their scales; config.json with the quantization_config) and
``tokenizer.save_pretrained("model")`` (GPT-2's tokenizer when the base
repository has none), with the model on the CPU (``device_map={"": "cpu"}``,
which bitsandbytes supports for 8-bit weights since 0.46). The perplexity and
speed comparison of train.py (information only) is left out.

It needs the bitsandbytes package (the torch image has it); without it, it
stops with exit status 2 and says so: no submission can be made, nor can the
evaluator load one (quantized models need bitsandbytes).

Run with cwd = the prepared workspace, PYTHONPATH=/mlrb/lib and the stand-in
hub's environment (HF_HUB_OFFLINE=1, HF_HUB_CACHE, ...).
"""
import importlib.util
import os
import sys

BASE = "AlgorithmicResearchGroup/gpt2-xs"
OUT = "model"

if importlib.util.find_spec("bitsandbytes") is None:
    print("smoke submission: the bitsandbytes package is not installed, and this task's submission must be "
          "quantized with it (config.json with a bitsandbytes quantization_config); no model/ written",
          file=sys.stderr)
    sys.exit(2)

from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig  # noqa: E402

try:
    tokenizer = AutoTokenizer.from_pretrained(BASE)
except Exception:  # noqa: BLE001 - the repository may ship no tokenizer: gpt2-xs uses GPT-2's
    tokenizer = AutoTokenizer.from_pretrained("gpt2")
quantized = AutoModelForCausalLM.from_pretrained(BASE, quantization_config=BitsAndBytesConfig(load_in_8bit=True),
                                                 device_map={"": "cpu"})
os.makedirs(OUT, exist_ok=True)
quantized.save_pretrained(OUT)
tokenizer.save_pretrained(OUT)
print(f"saved the 8-bit model to {OUT}/: {sorted(os.listdir(OUT))}")
