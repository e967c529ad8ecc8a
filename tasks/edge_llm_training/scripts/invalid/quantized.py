"""config.json declares an 8-bit bitsandbytes quantization; the task allows only unquantized weights.

expect: is quantized (bitsandbytes)
"""
import mlrb_invalid as I

I.add_quantization_config()
