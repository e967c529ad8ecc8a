"""A GPT-2 above the task's cap of 27,040,089 parameters (90% of gpt2-xs; random weights).

expect: the parameter count is
"""
import mlrb_invalid as I

I.too_many_parameters(27_040_089)
