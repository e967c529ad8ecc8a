"""A model whose output is not one logit per class of the task (100): it
returns 10 logits per image.

expect: the model must return logits of shape [batch,
"""
import mlrb_invalid_images as I

I.wrong_num_classes(10)
