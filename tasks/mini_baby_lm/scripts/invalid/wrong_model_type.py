"""A model of type 'llama' (a causal LM, not GPT-2); the task allows only gpt2.

expect: has model_type 'llama'
"""
import mlrb_invalid as I

I.wrong_model_type('llama')
