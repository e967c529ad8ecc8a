"""The weights stored as float64; the task allows only FP16/FP32.

expect: stores weights as float64
"""
import mlrb_invalid as I

I.cast_weights("float64")
