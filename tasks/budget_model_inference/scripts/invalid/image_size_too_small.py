"""model/preprocess.json asks for 8x8 pixel inputs, below the allowed 16 to
4096 (a way to make inference nearly free).

expect: image_size must be an integer from 16 to 4096
"""
import mlrb_invalid_images as I

I.write_spec(image_size=8)
