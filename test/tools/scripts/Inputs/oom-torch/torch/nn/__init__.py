"""Every layer of the stand-in is an empty module."""
import types

from torch import _Module as Module


def __getattr__(name):
    if name == "init":
        return types.SimpleNamespace(normal_=lambda *a, **k: None,
                                     zeros_=lambda *a, **k: None)
    return Module
