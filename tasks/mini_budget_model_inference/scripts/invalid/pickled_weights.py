"""The quantized weights saved as a pickle (torch.save, pytorch_model.bin)
instead of safetensors; the evaluator never loads pickles.

expect: holds pickled weights
"""
import mlrb_invalid as I

I.pickle_weights()
