"""The sources' claims, loaded from ``derivations/*.toml`` and checked.

A claim is data: what a source says (its words, section, conditions, unit)
and how to ask the engine for the same thing (a named quantity from
:mod:`symbolic.claims.quantities` with options, evaluated at some dimension values,
or a small formula over such quantities). Checking never adjusts a claim: a
number or form the engine does not reproduce must carry a recorded erratum
(reason and corrected value), which the check then verifies in turn.

See ``derivations/README.md`` for the file format.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from sympy import Expr, Integer, Rational, expand, fraction, sstr, together

from ..core.dims import SYMBOLS
from ..core.expressions import parse_formula
from ..core.numeric import UNITS, round_half_up, substitute
from .quantities import evaluate

#: symbolic/derivations: the repository's derivations/ through a link, a copy inside a wheel (pyproject's package-data)
DERIVATIONS = Path(__file__).resolve().parents[1] / "derivations"

STATUSES = ("reproduced", "erratum", "failed")


@dataclass(frozen=True)
class Erratum:
    reason: str
    corrected: str


@dataclass(frozen=True)
class Claim:
    """One claim of a source. ``kind`` is ``form`` (symbolic equality) or
    ``number`` (exact value rounded to the stated precision)."""

    id: str
    document: str
    section: str
    text: str
    kind: str
    unit: str
    conditions: str
    stated: str
    spec: dict = field(hash=False, compare=False)
    note: str = ""
    erratum: Erratum | None = None

    @property
    def decimals(self) -> int:
        if "decimals" in self.spec:
            return int(self.spec["decimals"])
        if self.kind != "number":
            return 0
        if "within" in self.spec:  # an interval: the corrected value's precision, if one is recorded
            return _places(self.erratum.corrected) if self.erratum is not None else 2
        return _places(self.stated)


def _places(number: str) -> int:
    """Decimal places of a number as written ("2.73" → 2)."""
    return max(0, -Decimal(number).as_tuple().exponent)


@dataclass(frozen=True)
class Result:
    claim: Claim
    status: str
    engine: str  # the engine's value (rounded, in the claim's unit) or simplified form
    message: str

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        return {"id": c.id, "document": c.document, "section": c.section, "kind": c.kind, "status": self.status,
                "stated": c.stated, "engine": self.engine, "unit": c.unit, "conditions": c.conditions,
                "text": c.text, "note": c.note, "message": self.message,
                "erratum": None if c.erratum is None else {"reason": c.erratum.reason,
                                                            "corrected": c.erratum.corrected}}


# --- loading ---------------------------------------------------------------

_CLAIM_KEYS = {"id", "section", "text", "kind", "unit", "conditions", "value", "form", "note", "erratum",
               "quantity", "options", "at", "let", "expr", "decimals", "within", "tolerance"}


def load(path: Path) -> list[Claim]:
    """The claims of one derivations file."""
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    document = data.get("document", path.stem)
    claims = []
    for raw in data.get("claim", []):
        unknown = set(raw) - _CLAIM_KEYS
        if unknown:
            raise ValueError(f"{path.name}: claim {raw.get('id')!r} has unknown keys {sorted(unknown)}")
        kind = raw.get("kind", "form" if "form" in raw else "number")
        if ("within" in raw or "tolerance" in raw) and kind != "number":
            raise ValueError(f"{path.name}: claim {raw.get('id')!r}: 'within' and 'tolerance' are for numbers")
        if "within" in raw:
            bounds = raw["within"]
            if not (isinstance(bounds, list) and len(bounds) == 2 and all(isinstance(x, str) for x in bounds)):
                raise ValueError(f"{path.name}: claim {raw.get('id')!r}: 'within' is two strings, [low, high] "
                                 "(\"\" for no bound)")
            stated = str(raw["value"]) if "value" in raw else f"[{bounds[0] or '-inf'}, {bounds[1] or 'inf'}]"
        else:
            stated = raw["form"] if kind == "form" else str(raw["value"])
        erratum = raw.get("erratum")
        claims.append(Claim(
            id=raw["id"], document=document, section=raw.get("section", ""), text=raw.get("text", ""),
            kind=kind, unit=raw.get("unit", "B"), conditions=raw.get("conditions", ""), stated=stated,
            spec=raw, note=raw.get("note", ""),
            erratum=None if erratum is None else Erratum(erratum["reason"], str(erratum["corrected"]))))
    return claims


def load_all(folder: Path = DERIVATIONS) -> list[Claim]:
    """Every claim of every ``*.toml`` in ``folder``, ids unique."""
    claims = [c for path in sorted(folder.glob("*.toml")) for c in load(path)]
    seen = set()
    for claim in claims:
        if claim.id in seen:
            raise ValueError(f"duplicate claim id {claim.id!r}")
        seen.add(claim.id)
    return claims


# --- evaluating --------------------------------------------------------------

def _values(at: dict | None) -> dict:
    out = {}
    for name, value in (at or {}).items():
        if name not in SYMBOLS:
            raise ValueError(f"unknown dimension {name!r} in 'at'")
        out[name] = parse_formula(str(value), {})
    return out


def _binding(spec: dict) -> Expr:
    """The expression a ``let`` entry (or the claim itself) asks for."""
    if "number" in spec:
        return parse_formula(str(spec["number"]), {})
    if "quantity" not in spec:
        raise ValueError(f"a binding needs 'quantity' or 'number': {spec}")
    expr = evaluate(spec["quantity"], **spec.get("options", {}))
    return substitute(expr, _values(spec.get("at")))


def engine_expression(claim: Claim) -> Expr:
    """What the engine says for ``claim``, in base units, before rounding."""
    spec = claim.spec
    if "expr" in spec:
        names = {name: _binding(b) for name, b in spec.get("let", {}).items()}
        names.update({k: v for k, v in SYMBOLS.items() if k not in names})
        expr = parse_formula(spec["expr"], names)
        return substitute(expr, _values(spec.get("at")))
    return _binding(spec)


def _unit_factor(unit: str) -> Expr:
    if unit not in UNITS:
        raise ValueError(f"unknown unit {unit!r}")
    factor = UNITS[unit]
    return Integer(factor) if isinstance(factor, int) else factor


def _form_names(claim: Claim) -> dict:
    names = dict(SYMBOLS)
    names.update({name: _binding(b) for name, b in claim.spec.get("let", {}).items()})
    return names


def _matches_form(engine: Expr, form: str, claim: Claim) -> bool:
    target = parse_formula(form, _form_names(claim)) * _unit_factor(claim.unit)
    target = substitute(target, _values(claim.spec.get("at")))
    return equal(engine, target)


def equal(left: Expr, right: Expr) -> bool:
    """Exact symbolic equality: the numerator of ``left - right`` over a common
    denominator expands to zero (deterministic, no ``simplify``)."""
    numerator, _ = fraction(together(left - right))
    return expand(numerator) == 0


def _matches_number(engine: Rational, stated: str, claim: Claim) -> bool:
    return round_half_up(engine / _unit_factor(claim.unit), claim.decimals) == Decimal(stated)


def _matches_stated_number(engine: Rational, claim: Claim) -> bool:
    """The engine against the source's number. ``within = [low, high]`` (formulas, "" for no bound):
    the source states an interval or a bound ("30–40%", "under 20%", or a value known only to its
    printed rounding), and the exact value must lie in it. ``tolerance``: |engine − value| ≤ tolerance,
    in the claim's unit. Otherwise the exact value rounded half-up to the stated decimals."""
    value = engine / _unit_factor(claim.unit)
    if "within" in claim.spec:
        low, high = (parse_formula(bound, {}) if bound.strip() else None for bound in claim.spec["within"])
        return (low is None or value >= low) and (high is None or value <= high)
    if "tolerance" in claim.spec:
        return abs(value - parse_formula(claim.stated, {})) <= parse_formula(str(claim.spec["tolerance"]), {})
    return _matches_number(engine, claim.stated, claim)


def check(claim: Claim) -> Result:
    """Check one claim against the engine."""
    try:
        engine = engine_expression(claim)
    except (ValueError, TypeError, KeyError) as error:
        return Result(claim, "failed", "", f"could not evaluate: {error}")
    if claim.kind == "form":
        matches = lambda text: _matches_form(engine, text, claim)  # noqa: E731
        stated_matches = matches(claim.stated)
        shown = sstr(expand(engine / _unit_factor(claim.unit)))
    elif claim.kind == "number":
        if engine.free_symbols or not engine.is_Rational:
            return Result(claim, "failed", sstr(engine), "does not evaluate to a number: give every dimension in 'at'")
        matches = lambda text: _matches_number(engine, text, claim)  # noqa: E731
        stated_matches = _matches_stated_number(engine, claim)
        shown = str(round_half_up(engine / _unit_factor(claim.unit), claim.decimals))
    else:
        return Result(claim, "failed", "", f"unknown kind {claim.kind!r}")

    if stated_matches:
        if claim.erratum is not None:
            return Result(claim, "failed", shown, "an erratum is recorded but the engine reproduces the stated value")
        return Result(claim, "reproduced", shown, "")
    if claim.erratum is None:
        return Result(claim, "failed", shown, f"engine gives {shown}, the source states {claim.stated}")
    if matches(claim.erratum.corrected):
        return Result(claim, "erratum", shown, claim.erratum.reason)
    return Result(claim, "failed", shown, f"recorded correction {claim.erratum.corrected} does not match the engine")


def check_all(claims: list[Claim] | None = None) -> list[Result]:
    return [check(claim) for claim in (load_all() if claims is None else claims)]
