"""The sources' claims, loaded from ``derivations/*.toml`` and checked.

A claim is data: what a source says (its words, section, conditions, unit)
and how to ask the engine for the same thing (a named quantity from
:mod:`symbolic.claims.quantities` with options, evaluated at some dimension values,
or a small formula over such quantities). Checking never adjusts a claim: a
number or form the engine does not reproduce must carry a recorded erratum
(reason and corrected value), which the check then verifies in turn.

Where the source leaves an input open (which pipeline stage its table is
for, which kernel, which configuration), the claim file says so (``open``) and
lists the readings the source allows (``[[claim.reading]]``): the claim is
reproduced if some reading reproduces it — the check names that reading and
lists the others with their values — and an erratum only when none does.
Where the source's text cannot decide a claim at all (an input it does not
state moves the engine's value by more than the claim's precision), the claim
records ``[claim.underdetermined]``: what the source does not state, under what
the engine computes, and the engine's value, which the check verifies as it
does an erratum's correction; such claims are counted apart, neither
reproduced nor errata.

See ``derivations/README.md`` for the file format.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
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

STATUSES = ("reproduced", "erratum", "underdetermined", "failed")


@dataclass(frozen=True)
class Erratum:
    reason: str
    corrected: str


@dataclass(frozen=True)
class Underdetermined:
    """A claim the source's text cannot decide: ``not_stated`` (what the source leaves out), ``under``
    (what the engine assumes in its place) and ``engine`` (its value then, in the claim's unit and
    precision, checked as an erratum's correction is)."""

    not_stated: str
    under: str
    engine: str

    def message(self, unit: str) -> str:
        return (f"underdetermined: the source does not state {self.not_stated}; the engine gives "
                f"{self.engine} {unit} under {self.under}")


@dataclass(frozen=True)
class Reading:
    """One reading of a claim's open input (``[[claim.reading]]``): its name and what it sets
    (``options``, ``at``, ``let``, merged over the claim's own; ``unit``, the unit the stated value is
    read in, e.g. a "GB" the source may mean as 2^30 B)."""

    name: str
    spec: dict = field(hash=False, compare=False)

    def of(self, claim: "Claim") -> "Claim":
        """``claim`` as this reading reads it: its spec merged, its unit replaced where the reading gives one."""
        spec = _merge(claim.spec, {k: v for k, v in self.spec.items() if k != "unit"})
        return replace(claim, spec=spec, unit=str(self.spec.get("unit", claim.unit)), readings=())


@dataclass(frozen=True)
class ReadingValue:
    """The engine's value under one reading, and whether it reproduces the stated value."""

    name: str
    engine: str
    reproduces: bool
    unit: str = ""


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
    #: the input the source leaves open (``open``), "" when none is
    open: str = ""
    #: the readings of ``open`` the source allows; empty: the claim's own inputs are the one reading
    readings: tuple[Reading, ...] = ()
    underdetermined: Underdetermined | None = None

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
    #: the reading the verdict holds under ("" for a claim without open inputs)
    reading: str = ""
    #: every reading's value, the verdict's first (empty for a claim without open inputs)
    readings: tuple[ReadingValue, ...] = ()
    #: the unit ``engine`` is in: the claim's, or the verdict's reading's where it reads the unit
    unit: str = ""

    @property
    def engine_unit(self) -> str:
        return self.unit or self.claim.unit

    @property
    def other_readings(self) -> tuple[ReadingValue, ...]:
        return tuple(r for r in self.readings if r.name != self.reading)

    def to_dict(self) -> dict[str, Any]:
        c = self.claim
        u = c.underdetermined
        return {"id": c.id, "document": c.document, "section": c.section, "kind": c.kind, "status": self.status,
                "stated": c.stated, "engine": self.engine, "unit": c.unit, "engine_unit": self.engine_unit, "conditions": c.conditions,
                "text": c.text, "note": c.note, "message": self.message,
                "open": c.open or None, "reading": self.reading or None,
                "readings": [{"name": r.name, "engine": r.engine, "unit": r.unit, "reproduces": r.reproduces}
                             for r in self.readings],
                "erratum": None if c.erratum is None else {"reason": c.erratum.reason,
                                                            "corrected": c.erratum.corrected},
                "underdetermined": None if u is None else {"not_stated": u.not_stated, "under": u.under,
                                                           "engine": u.engine}}


# --- loading ---------------------------------------------------------------

_CLAIM_KEYS = {"id", "section", "text", "kind", "unit", "conditions", "value", "form", "note", "erratum",
               "quantity", "options", "at", "let", "expr", "decimals", "within", "tolerance",
               "open", "reading", "underdetermined"}
_READING_KEYS = {"name", "options", "at", "let", "unit"}
_UNDERDETERMINED_KEYS = {"not_stated", "under", "engine"}


def _readings(path: Path, raw: dict) -> tuple[Reading, ...]:
    """The claim's ``[[claim.reading]]`` tables, checked: each named, setting only options, at or let,
    the names unique; readings only with ``open`` (what they are readings of) and at least two."""
    where = f"{path.name}: claim {raw.get('id')!r}"
    readings = raw.get("reading", [])
    if not isinstance(readings, list) or not all(isinstance(r, dict) for r in readings):
        raise ValueError(f"{where}: 'reading' is a list of tables ([[claim.reading]])")
    if bool(readings) != bool(raw.get("open")):
        raise ValueError(f"{where}: 'open' (the input the source leaves open) and its [[claim.reading]] "
                         "tables come together")
    if readings and len(readings) < 2:
        raise ValueError(f"{where}: an open input has at least two readings")
    out = []
    for reading in readings:
        unknown = set(reading) - _READING_KEYS
        if unknown or not str(reading.get("name", "")).strip():
            raise ValueError(f"{where}: a reading has a 'name' and sets only {sorted(_READING_KEYS - {'name'})}"
                             + (f" (unknown keys {sorted(unknown)})" if unknown else ""))
        out.append(Reading(reading["name"], {k: v for k, v in reading.items() if k != "name"}))
    if len({r.name for r in out}) != len(out):
        raise ValueError(f"{where}: two readings share a name")
    return tuple(out)


def _underdetermined(path: Path, raw: dict) -> Underdetermined | None:
    value = raw.get("underdetermined")
    if value is None:
        return None
    where = f"{path.name}: claim {raw.get('id')!r}"
    if "erratum" in raw:
        raise ValueError(f"{where}: a claim is an erratum or underdetermined, not both")
    if not isinstance(value, dict) or set(value) != _UNDERDETERMINED_KEYS or not all(
            str(value[k]).strip() for k in _UNDERDETERMINED_KEYS):
        raise ValueError(f"{where}: [claim.underdetermined] gives not_stated, under and engine")
    return Underdetermined(str(value["not_stated"]), str(value["under"]), str(value["engine"]))


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
            erratum=None if erratum is None else Erratum(erratum["reason"], str(erratum["corrected"])),
            open=str(raw.get("open", "")), readings=_readings(path, raw),
            underdetermined=_underdetermined(path, raw)))
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


def _merge(base: dict, over: dict) -> dict:
    """``base`` with ``over``'s entries, tables merged key by key (a reading's options over the claim's)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def engine_expression(claim: Claim) -> Expr:
    """What the engine says for ``claim``, in base units, before rounding (under a reading of its
    open input: ``engine_expression(reading.of(claim))``)."""
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


@dataclass(frozen=True)
class _Evaluated:
    """One reading evaluated: the engine's value shown, whether the stated value holds, and a test of
    another text (an erratum's correction, an underdetermined claim's engine value) against it."""

    name: str
    shown: str
    stated_matches: bool
    matches: Any
    unit: str


def _evaluate(claim: Claim, reading: Reading | None) -> _Evaluated | Result:
    """The claim under one reading, or the failed Result that says why it cannot be evaluated."""
    name = "" if reading is None else reading.name
    where = f" under {name}" if name else ""
    read = claim if reading is None else reading.of(claim)
    try:
        engine = engine_expression(read)
    except (ValueError, TypeError, KeyError) as error:
        return Result(claim, "failed", "", f"could not evaluate{where}: {error}", name)
    if claim.kind == "form":
        return _Evaluated(name, sstr(expand(engine / _unit_factor(read.unit))),
                          bool(_matches_form(engine, read.stated, read)),
                          lambda text: _matches_form(engine, text, read), read.unit)
    if claim.kind == "number":
        if engine.free_symbols or not engine.is_Rational:
            return Result(claim, "failed", sstr(engine),
                          f"does not evaluate to a number{where}: give every dimension in 'at'", name)
        return _Evaluated(name, str(round_half_up(engine / _unit_factor(read.unit), read.decimals)),
                          bool(_matches_stated_number(engine, read)), lambda text: _matches_number(engine, text, read),
                          read.unit)
    return Result(claim, "failed", "", f"unknown kind {claim.kind!r}")


def check(claim: Claim) -> Result:
    """Check one claim against the engine: under each reading of its open input, if it has one.

    Reproduced if some reading reproduces the stated value (the first that does is named); an erratum
    when none does and the recorded correction is what some reading gives; underdetermined when none
    does and the recorded engine value is what some reading gives. Anything else fails: a recorded
    erratum or underdetermined verdict for a claim some reading reproduces, a correction or engine
    value no reading gives, a reading that cannot be evaluated."""
    evaluated = []
    for reading in claim.readings or (None,):
        one = _evaluate(claim, reading)
        if isinstance(one, Result):
            return one
        evaluated.append(one)

    def verdict(status: str, chosen: _Evaluated, message: str) -> Result:
        ordered = [chosen, *(e for e in evaluated if e is not chosen)]
        values = (tuple(ReadingValue(e.name, e.shown, e.stated_matches, e.unit) for e in ordered)
                  if claim.readings else ())
        return Result(claim, status, chosen.shown, message, chosen.name, values, chosen.unit)

    reproducing = [e for e in evaluated if e.stated_matches]
    if reproducing:
        chosen = reproducing[0]
        if claim.erratum is not None:
            return verdict("failed", chosen, "an erratum is recorded but the engine reproduces the stated value"
                           + (f" (under {chosen.name})" if chosen.name else ""))
        if claim.underdetermined is not None:
            return verdict("failed", chosen, "recorded as underdetermined but the engine reproduces the stated "
                           "value" + (f" (under {chosen.name})" if chosen.name else ""))
        return verdict("reproduced", chosen, f"reproduced under: {chosen.name}" if chosen.name else "")
    first = evaluated[0]
    if claim.erratum is None and claim.underdetermined is None:
        return verdict("failed", first, f"engine gives {first.shown}, the source states {claim.stated}"
                       + (" under every reading" if claim.readings else ""))
    recorded = claim.erratum.corrected if claim.erratum is not None else claim.underdetermined.engine
    agreeing = [e for e in evaluated if e.matches(recorded)]
    if not agreeing:
        what = "correction" if claim.erratum is not None else "engine value"
        return verdict("failed", first, f"recorded {what} {recorded} does not match the engine"
                       + (" under any reading" if claim.readings else ""))
    if claim.erratum is not None:
        return verdict("erratum", agreeing[0], claim.erratum.reason)
    return verdict("underdetermined", agreeing[0], claim.underdetermined.message(agreeing[0].unit))


def check_all(claims: list[Claim] | None = None) -> list[Result]:
    return [check(claim) for claim in (load_all() if claims is None else claims)]
