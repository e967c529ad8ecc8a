"""What an upstream folder's code assumed of its libraries, restored only
where the folder's environment asks for it. The torch image and the torch
venv import this module at every Python start-up (`mlrb_site_compat.pth` in
site-packages); without the variables below it does nothing.

MLRB_NUMPY_PRINT=1.25: numpy prints its scalars as numpy 1 did (`1`, not
numpy 2's `np.int64(1)`; NEP 51), through np.set_printoptions(legacy="1.25")
as numpy is first imported. Code written for numpy 1 that writes numbers
with str() of a list (identify-contrails' starter writes its masks so) then
writes what its own evaluator reads.
"""
import importlib.util
import os
import sys

LEGACY = os.environ.get("MLRB_NUMPY_PRINT", "")


def legacy_printing(numpy):
    # numpy 1 prints so already (and knows no legacy="1.25").
    if int(numpy.__version__.split(".")[0]) >= 2:
        numpy.set_printoptions(legacy=LEGACY)


class NumpyFinder:
    """Sets numpy's printing right after numpy is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "numpy":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            legacy_printing(module)

        spec.loader.exec_module = exec_module
        return spec


if LEGACY:
    if "numpy" in sys.modules:
        legacy_printing(sys.modules["numpy"])
    else:
        sys.meta_path.insert(0, NumpyFinder())
