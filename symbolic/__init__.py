"""symbolic: transformer training memory and FLOPs, derived from the tensors up.

The public surface, imported lazily (``import symbolic`` stays cheap)::

    from symbolic import make_bill, Layout, preset, evaluate, check_all, dims
    bill = make_bill(preset("gpt-175b"), Layout(tp=8, pp=8, sp=True, recompute="selective"))
    evaluate("activations.per_layer", tensor_parallel=True)   # s*b*h*(10 + 24/t + 5*a*s/(h*t))
"""
from importlib import import_module

_EXPORTS = {
    "make_bill": "symbolic.bill.derive", "Bill": "symbolic.bill.derive",
    "Layout": "symbolic.layout.layout",
    "ModelConfig": "symbolic.models.config", "preset": "symbolic.models.builtin", "PRESETS": "symbolic.models.builtin",
    "ConfigError": "symbolic.models.config",
    "Strategy": "symbolic.layout.strategies",
    "evaluate": "symbolic.claims.quantities", "REGISTRY": "symbolic.claims.quantities",
    "check_all": "symbolic.claims.claims", "load_all": "symbolic.claims.claims",
}
#: Modules reached by a short name: ``symbolic.dims`` is :mod:`symbolic.core.dims`.
_MODULES = {
    "dims": "symbolic.core.dims", "tensors": "symbolic.core.tensors", "numeric": "symbolic.core.numeric",
    "strategies": "symbolic.layout.strategies", "ledgers": "symbolic.ledgers",
    "architectures": "symbolic.models.architectures",
    "quantities": "symbolic.claims.quantities",
}

__all__ = sorted(_EXPORTS) + list(_MODULES)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    if name in _MODULES:
        return import_module(_MODULES[name])
    raise AttributeError(f"module 'symbolic' has no attribute {name!r}")
