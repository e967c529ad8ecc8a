"""A model of type 'gpt2' (not the compressed phi-2); the task allows only phi.

expect: has model_type 'gpt2'
"""
import mlrb_invalid as I

I.wrong_model_type('gpt2')
