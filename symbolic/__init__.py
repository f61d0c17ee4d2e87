"""symbolic: transformer training memory and FLOPs, derived from the tensors up.

One function per question, named like the CLI command (:mod:`symbolic.api`)::

    import symbolic
    bill = symbolic.bill("llama-2-7b", tp=8, seq=4096, gpu_memory="80GB")
    print(bill)            # the summary: verdict, total per GPU, dominant term
    bill.to_dict()         # == `symbolic bill llama-2-7b --tp 8 --seq 4096 --gpu-memory 80GB --json`
    symbolic.plan("gpt-175b", gpus=64, gpu_memory="80GB", global_batch=64)
    symbolic.solve("gpt-7b", max="micro-batch", tp=8, sp=True, seq=4096, params="7B", gpu_memory="80GB")
    symbolic.timeline("gpt-7b", seq=2048, tp=8, sp=True, recompute="full", gpu_memory="80GB")
    symbolic.derive("activations", tp=True, sp=True)

The engine underneath, imported lazily too (``import symbolic`` stays cheap)::

    from symbolic import make_bill, Layout, preset, evaluate, check_all, dims
    bill = make_bill(preset("gpt-175b"), Layout(tp=8, pp=8, sp=True, recompute="selective"))
    evaluate("activations.per_layer", tensor_parallel=True)   # s*b*h*(10 + 24/t + 5*a*s/(h*t))
"""
from importlib import import_module

_EXPORTS = {
    "bill": "symbolic.api", "plan": "symbolic.api", "solve": "symbolic.api", "timeline": "symbolic.api",
    "derive": "symbolic.api", "Bill": "symbolic.api", "Plan": "symbolic.api", "Solve": "symbolic.api",
    "Timeline": "symbolic.api", "Derivation": "symbolic.api", "from_launch": "symbolic.api",
    "make_bill": "symbolic.bill.derive",
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


class _CallablePackage(type(import_module("sys"))):
    """``symbolic.bill`` is both the package :mod:`symbolic.bill` (derive,
    evaluate, cache) and the API function :func:`symbolic.api.bill`: importing
    a submodule makes Python set the package as the attribute ``bill`` of
    ``symbolic``, so the function lives on the package as its call."""

    def __call__(self, *args, **kwargs):
        return import_module("symbolic.api").bill(*args, **kwargs)


# The package's __init__ imports nothing (a docstring): this costs no sympy.
import_module("symbolic.bill").__class__ = _CallablePackage


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    if name in _MODULES:
        return import_module(_MODULES[name])
    raise AttributeError(f"module 'symbolic' has no attribute {name!r}")
