"""config.json asks for modelling code shipped with the submission (auto_map).

expect: needs custom code (auto_map)
"""
import mlrb_invalid as I

I.add_auto_map()
