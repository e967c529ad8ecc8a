"""A GPT-2 above the task's cap of 30,500,000 parameters (the 30M of gpt2-xs; random weights).

expect: the parameter count is
"""
import mlrb_invalid as I

I.too_many_parameters(30_500_000)
