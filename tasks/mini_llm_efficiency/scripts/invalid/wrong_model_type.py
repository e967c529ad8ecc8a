"""A model of type 'gpt_neox' (a Pythia-style LM, not GPT-2); the task allows only gpt2.

expect: has model_type 'gpt_neox'
"""
import mlrb_invalid as I

I.wrong_model_type('gpt_neox')
