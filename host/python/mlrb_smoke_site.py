"""The smoke profile's one change to a library: torchvision's CIFAR
integrity check (an md5 of each batch file against the real data's, which
a stand-in cannot have) checks that the files are present, as its
`check_integrity(path, md5=None)` does. Installed as `sitecustomize` only in
the smoke profile (the stand-in hub's `python/`, first on PYTHONPATH), so a
folder's unchanged train.py and eval.py, whose `download=True` then finds
the stand-in present, read it; never outside the smoke profile.
"""
import importlib.util
import sys

MODULE = "torchvision.datasets.cifar"


def present_only(module):
    for cls in (getattr(module, "CIFAR10", None), getattr(module, "CIFAR100", None)):
        if cls is None or "train_list" not in vars(cls):
            continue
        cls.train_list = [[name, None] for name, _ in cls.train_list]
        cls.test_list = [[name, None] for name, _ in cls.test_list]
        cls.meta = dict(cls.meta, md5=None)
        cls.tgz_md5 = None


class Finder:
    """Patches the module right after it is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            present_only(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    if MODULE in sys.modules:
        present_only(sys.modules[MODULE])
    elif not any(isinstance(f, Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, Finder())
