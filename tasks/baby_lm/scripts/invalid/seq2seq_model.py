"""An encoder-decoder (T5) instead of the causal language model BLiMP scoring needs.

expect: is not a causal (decoder-only) language model
"""
import mlrb_invalid as I

I.wrong_model_type("t5")
