"""model/preprocess.json asks for float64 input tensors; the evaluator feeds
float32 or float16 only.

expect: dtype must be one of
"""
import mlrb_invalid_images as I

I.write_spec(dtype="float64")
