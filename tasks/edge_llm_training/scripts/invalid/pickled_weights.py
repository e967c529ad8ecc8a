"""The weights saved as a pickle (pytorch_model.bin) instead of safetensors.

expect: holds pickled weights
"""
import mlrb_invalid as I

I.pickle_weights()
