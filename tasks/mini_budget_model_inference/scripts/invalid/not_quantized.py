"""The unmodified gpt2-xs saved in float32 (no quantization): the task
requires weights quantized with bitsandbytes.

expect: is not quantized: config.json has no quantization_config
"""
import mlrb_invalid as I

I.save_hub_model("AlgorithmicResearchGroup/gpt2-xs")
