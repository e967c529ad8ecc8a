"""A LoRA adapter instead of a full model.

expect: holds an adapter only
"""
import mlrb_invalid as I

I.adapter_only()
