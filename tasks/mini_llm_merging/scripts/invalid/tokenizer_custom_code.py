"""tokenizer_config.json asks for tokenizer code shipped with the submission (auto_map).

expect: tokenizer_config.json needs custom code (auto_map)
"""
import mlrb_invalid as I

I.add_tokenizer_auto_map()
