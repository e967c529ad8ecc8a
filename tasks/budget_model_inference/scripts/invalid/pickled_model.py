"""model/model.pt saved as a pickle of the weights (torch.save of the
state_dict) instead of TorchScript: the evaluator only loads TorchScript
with torch.jit.load and never unpickles.

expect: with torch.jit.load failed
"""
import mlrb_invalid_images as I

I.pickle_model()
