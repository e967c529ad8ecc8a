"""A model of type 'bert' (an encoder, not GPT-2); the task allows only gpt2.

expect: has model_type 'bert'
"""
import mlrb_invalid as I

I.wrong_model_type('bert')
