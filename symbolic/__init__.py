"""symbolic: transformer training memory and FLOPs, derived from the tensors up.

The public surface, imported lazily (``import symbolic`` stays cheap)::

    from symbolic import make_bill, Layout, preset, evaluate, check_all, dims
    bill = make_bill(preset("gpt-175b"), Layout(tp=8, pp=8, sp=True, recompute="selective"))
    evaluate("activations.per_layer", tensor_parallel=True)   # s*b*h*(10 + 24/t + 5*a*s/(h*t))
"""
from importlib import import_module

_EXPORTS = {
    "make_bill": "symbolic.bill", "Bill": "symbolic.bill",
    "Layout": "symbolic.layout",
    "ModelConfig": "symbolic.models", "preset": "symbolic.models", "PRESETS": "symbolic.models",
    "ConfigError": "symbolic.models",
    "Strategy": "symbolic.strategies",
    "evaluate": "symbolic.quantities", "REGISTRY": "symbolic.quantities",
    "check_all": "symbolic.claims", "load_all": "symbolic.claims",
}
_MODULES = ("dims", "tensors", "strategies", "ledgers", "architectures", "numeric", "claims", "quantities")

__all__ = sorted(_EXPORTS) + list(_MODULES)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    if name in _MODULES:
        return import_module(f"symbolic.{name}")
    raise AttributeError(f"module 'symbolic' has no attribute {name!r}")
