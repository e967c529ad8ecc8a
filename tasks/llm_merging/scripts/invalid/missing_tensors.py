"""Weight tensors missing: the model does not match its config.json.

expect: weights do not match config.json
"""
import mlrb_invalid as I

I.drop_tensors(2)
