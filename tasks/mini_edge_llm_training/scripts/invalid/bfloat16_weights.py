"""The weights stored as bfloat16; the task allows only FP16/FP32.

expect: stores weights as bfloat16
"""
import mlrb_invalid as I

I.cast_weights("bfloat16")
