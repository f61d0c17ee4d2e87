"""Every named quantity, loaded: the ledgers' and the step's, registered in
:data:`symbolic.core.registry.REGISTRY`, and :func:`evaluate` to ask for one.

``symbolic derive``, the claims and the renderers go through here, so each
sees every name whichever module registered it.
"""
from __future__ import annotations

from sympy import Expr

from ..core.registry import REGISTRY, Quantity, quantity  # noqa: F401 (the registry's surface)
from ..ledgers import quantities as ledger_quantities  # noqa: F401 (registers the ledgers' names)
from ..step import quantities as step_quantities  # noqa: F401 (registers the step's names)


def evaluate(name: str, **options) -> Expr:
    """The expression of quantity ``name`` under ``options``."""
    if name not in REGISTRY:
        raise ValueError(f"unknown quantity {name!r}; known: {', '.join(sorted(REGISTRY))}")
    try:
        return REGISTRY[name].fn(**options)
    except TypeError as error:
        raise ValueError(f"quantity {name!r}: {error}") from None


# --- a whole bill, for the claims about one model under one layout ------------------------------

#: Where a claim's model path (``derivations/models/*.json``) is read from: the package, whose
#: ``derivations`` is the repository's through a link in a clone and a copy in a wheel.
_ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _model(name: str):
    """A built-in model by name, or an HF ``config.json`` given relative to the repository root."""
    from ..models.builtin import presets, preset
    from ..models.hf import load_hf_config

    if name in presets():
        return preset(name)
    path = (_ROOT / name).resolve()
    if (_ROOT / "derivations").resolve() not in path.parents or path.suffix != ".json":
        raise ValueError(f"model {name!r}: a built-in name or a .json path inside the repository")
    return load_hf_config(path)


@quantity("bill.value", "B")
def _bill_value(model: str = "gpt-22b", key: str = "total_bytes", line: str | None = None,
                not_counted: str | None = None, params: int | str | None = None, **layout) -> Expr:
    """One exact number of ``symbolic bill MODEL`` under a layout (``layout``: the fields of
    :class:`symbolic.layout.layout.Layout`, e.g. ``tp = 8, sp = true``): a total of the bill
    (``key``: ``total_bytes`` the verdict, ``paper_total_bytes``, ``model_states_bytes``,
    ``activation_bytes``, ``output_side_bytes``, ``cpu_bytes``, ``flops_per_iteration``,
    ``model_flops_per_iteration``, ``params``, ...), or the value of the ``line`` of that name, or
    the estimate of the item of what the verdict leaves out (``not_counted``: the item's first
    words). ``params``: seed 001's hand-filled N. The model: a built-in name or a config path
    relative to the repository root. Derivations come from the bill's cache, as ``bill``'s do."""
    from fractions import Fraction

    from sympy import Rational

    from ..bill.cache import derivation
    from ..bill.evaluate import evaluate as evaluate_bill
    from ..layout.layout import Layout

    fields = dict(layout)
    if "moe_capacity" in fields:
        fields["moe_capacity"] = Fraction(str(fields["moe_capacity"]))
    if "recompute_modules" in fields:
        fields["recompute_modules"] = tuple(fields["recompute_modules"])
    chosen = Layout(**fields)
    config = _model(model)
    hand = None if params is None else int(Rational(str(params)))
    chosen.validate(config)
    bill = evaluate_bill(derivation(config, chosen, hand), config, chosen, hand)
    if line is not None:
        found = [item.value for item in bill.lines if item.name == line]
        if len(found) != 1:
            raise ValueError(f"bill of {model}: {len(found)} lines named {line!r}; lines: "
                             + ", ".join(item.name for item in bill.lines))
        value = found[0]
    elif not_counted is not None:
        found = [size for item, size, _source in bill.not_counted if item.startswith(not_counted)]
        if len(found) != 1:
            raise ValueError(f"bill of {model}: no single item of what is not counted starts with {not_counted!r}")
        value = found[0]
    else:
        if key not in bill.totals or bill.totals[key] is None or isinstance(bill.totals[key], str):
            raise ValueError(f"bill of {model}: no number {key!r}; totals: {', '.join(bill.totals)}")
        value = bill.totals[key]
    value = Fraction(value)
    return Rational(value.numerator, value.denominator)
