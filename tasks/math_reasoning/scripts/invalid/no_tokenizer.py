"""The model without its tokenizer files.

expect: has no tokenizer
"""
import mlrb_invalid as I

I.remove_tokenizer()
