"""Not the supplied model: gpt2-xs with its last transformer block removed
(one layer fewer, so faster), saved with a bitsandbytes quantization_config.

expect: but this task requires n_layer =
"""
import mlrb_invalid as I


def drop_last_block(model):
    model.transformer.h = model.transformer.h[:-1]
    model.config.n_layer -= 1


I.save_hub_model("AlgorithmicResearchGroup/gpt2-xs", edit=drop_last_block)
I.add_quantization_config()
