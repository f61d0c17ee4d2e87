"""The shared reader of every launch kind: what a reading is (:class:`LaunchReading`, its
:class:`ReadNote` lines), the accumulator each kind fills (:class:`_Reader`: take, ignore, assume,
refuse in one line), the value checks, and the file loading (a path, a command line or a mapping; TOML,
JSON, YAML) with the walk that lists every key a kind did not take as ignored (with the reason) or
refuses it."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ...core.inputs import clean
from ...models.config import ConfigError, ModelConfig
from ..choices import LAUNCH_KINDS
from ..layout import Layout

#: The kinds of launch config read, and the framework preset each names (``layout/frameworks.py``).
KINDS = LAUNCH_KINDS
MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
TORCHTITAN_COMMIT = "238fa9953e4aec2a62582121564273d7cbb1e9f1"
DEEPSPEED_COMMIT = "38327e07f6cd39b63418f60cedd1651b0be3e7c3"
ACCELERATE_COMMIT = "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"
BRIDGE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"


@dataclass(frozen=True)
class ReadNote:
    """One line of what a reader did: ``option`` (as the framework spells it), its ``value`` as
    written, and ``what`` — for a taken option what it became (``tp = 8``), for an ignored one why,
    for an assumed default the value and where in the framework's code it is."""

    option: str
    value: str
    what: str

    def line(self) -> str:
        value = f" {self.value}" if self.value not in ("", "True") else ""
        return f"{self.option}{value} → {self.what}"


@dataclass(frozen=True)
class LaunchReading:
    """What a launch config says, as far as this engine models it.

    kind: the reader (:data:`KINDS`). source: what was read (a path, or ``command line``).
    layout_fields: the :class:`Layout` fields set, as (name, value) pairs (the others keep the
    Layout's defaults). model: the ModelConfig the config describes (Megatron's
    ``--num-layers``/``--hidden-size``/...), or None. model_name: the built-in model it names or
    matches exactly (then ``model`` is that built-in), else "". framework: the name of the
    framework preset (``megatron-core``, ``nemo``, ``torchtitan``, ``fsdp``, ``deepspeed``).
    time_options: the step-time options the config implies (``overlap``). gpus: the world size the
    config states (torchrun's ``--nnodes`` × ``--nproc_per_node``, accelerate's ``num_processes``), 0
    if none. taken, ignored, assumed: :class:`ReadNote` lines. notes: what a later field may take
    (Megatron's ``--cross-entropy-loss-fusion`` for the loss kernel).
    """

    kind: str
    source: str
    layout_fields: tuple[tuple[str, object], ...]
    model: ModelConfig | None
    model_name: str
    framework: str
    time_options: tuple[tuple[str, str], ...]
    gpus: int
    taken: tuple[ReadNote, ...]
    ignored: tuple[ReadNote, ...]
    assumed: tuple[ReadNote, ...]
    notes: tuple[tuple[str, str], ...] = ()

    @property
    def fields(self) -> dict:
        return dict(self.layout_fields)

    def layout(self, **overrides) -> Layout:
        """The Layout read (``overrides`` win)."""
        return Layout(**{**self.fields, **overrides})

    def options(self) -> dict:
        """Keyword arguments for ``symbolic.bill`` / ``timeline`` (``symbolic.bill(**reading.options())``):
        the model (when the config names one), the layout fields, the step-time options and the framework
        preset (``framework=``: it fills only what the reading did not set, as ``--from`` does).
        ``symbolic.bill(**reading.options())`` is ``bill --from KIND SOURCE --json`` without its
        ``read_from``; a keyword of your own goes in the dict (``{**reading.options(), "tp": 4}``)."""
        out = {"model": self.model} if self.model is not None else {}
        for name, value in self.layout_fields:
            if name == "recompute_modules":
                out[name] = ",".join(value)
            elif name == "moe_capacity":
                out["moe_capacity_factor"] = str(value)
            else:
                out[name] = value
        return {**out, **dict(self.time_options), "framework": self.framework}

    def to_dict(self) -> dict:
        """Plain data for ``--json`` (``read_from``)."""
        def rows(notes):
            return [{"option": n.option, "value": n.value, "what": n.what} for n in notes]
        return {"kind": self.kind, "source": self.source, "framework": self.framework,
                "model": self.model_name or (self.model.name if self.model else None),
                "layout": {name: (str(value) if not isinstance(value, (int, bool, str, list)) else value)
                           for name, value in self.layout_fields},
                "time_options": dict(self.time_options), "gpus": self.gpus or None,
                "taken": rows(self.taken), "ignored": rows(self.ignored), "assumed": rows(self.assumed),
                "notes": dict(self.notes)}

    def lines(self) -> list[str]:
        """The short block the bill prints after its first lines."""
        out = [f"read from {self.kind} ({self.source}), framework preset {self.framework}: "
               f"{len(self.taken)} options taken, {len(self.ignored)} ignored, {len(self.assumed)} defaults assumed"]
        out += ["  taken: " + "; ".join(n.line() for n in self.taken)] if self.taken else []
        out += ["  assumed: " + "; ".join(n.line() for n in self.assumed)] if self.assumed else []
        by_reason: dict[str, list[str]] = {}
        for note in self.ignored:  # grouped by the reason: "--lr, --min-lr (learning-rate schedule)"
            by_reason.setdefault(note.what, []).append(note.option)
        out += ["  ignored: " + "; ".join(f"{', '.join(options)} ({why})" for why, options in by_reason.items())
                ] if self.ignored else []
        return out


class _Reader:
    """Accumulates what one reader took, ignored and assumed; refuses with one line."""

    def __init__(self, kind: str, source: str, framework: str, code: str):
        self.kind, self.source, self.framework, self.code = kind, source, framework, code
        self.fields: dict = {}
        self.taken: list[ReadNote] = []
        self.ignored: list[ReadNote] = []
        self.assumed: list[ReadNote] = []
        self.model: ModelConfig | None = None
        self.model_name = ""
        self.time: dict = {}
        self.gpus = 0
        self.notes: dict = {}

    def take(self, option, value, what, **layout) -> None:
        self.fields.update(layout)
        self.taken.append(ReadNote(option, clean(str(value)), what))

    def ignore(self, option, value, why) -> None:
        self.ignored.append(ReadNote(option, clean(str(value)), why))

    def assume(self, option, value, what, **layout) -> None:
        self.fields.update(layout)
        self.assumed.append(ReadNote(option, clean(str(value)), what))

    def refuse(self, option, value, why):
        shown = "" if value is True or value is None or value == "" else f" {clean(str(value))}"
        raise ConfigError(f"--from {self.kind}: {option}{shown}: {why}")

    def reading(self) -> LaunchReading:
        return LaunchReading(self.kind, clean(self.source), tuple(self.fields.items()), self.model, self.model_name,
                             self.framework, tuple(self.time.items()), self.gpus, tuple(self.taken),
                             tuple(self.ignored), tuple(self.assumed), tuple(self.notes.items()))


def _int(reader: _Reader, option: str, value, low: int = 1) -> int:
    """A whole number of at least ``low`` from a config value (text or int), else one line."""
    if isinstance(value, bool) or not (isinstance(value, int) or re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", str(value))):
        reader.refuse(option, value, f"give a whole number (at least {low}, at most 12 digits)")
    number = int(value)
    if number < low:
        reader.refuse(option, value, f"must be at least {low}")
    return number


def _number(reader: _Reader, option: str, value) -> float:
    text = str(value).strip()
    if isinstance(value, bool) or not re.fullmatch(r"[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]{1,3})?", text):
        reader.refuse(option, value, "give a number")
    return float(text)


def builtin_match(model: ModelConfig) -> str:
    """The built-in model whose every dimension ``model`` has, or "" (the bill then names it)."""
    from ...models.builtin import presets

    for name, builtin in presets().items():
        if replace(model, name=builtin.name, source=builtin.source) == builtin:
            return name
    return ""


# ----------------------------------------------------------------------------------------------
# Megatron-LM: a command line, an arguments file, or a launch script's literal arguments
# ----------------------------------------------------------------------------------------------

def _source_text(source, kind: str):
    """(text or word list, where) from a path, a command line or a word list."""
    if isinstance(source, (list, tuple)):
        return [str(word) for word in source], "command line"
    text = str(source)
    if kind == "megatron" and ("\n" in text or re.search(r"(^|\s)--[a-z]", text)):
        return text, "command line"
    path = Path(text).expanduser()
    try:
        if path.is_file():
            return path.read_text(encoding="utf-8"), str(path)
        if path.exists():  # a folder, a FIFO, a device: reading it could block or mean nothing
            raise ConfigError(f"--from {kind} {clean(text)!r}: not a regular file; give the config file's path")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"--from {kind} {clean(text)!r}: cannot read ({clean(str(error))})") from None
    raise ConfigError(f"--from {kind} {clean(text)!r}: no such file"
                      + (" (or give the command line, its options starting with --)" if kind == "megatron" else ""))
    return text, "command line"


# ----------------------------------------------------------------------------------------------
# Structured configs: TOML (torchtitan), JSON (DeepSpeed), YAML (accelerate, NeMo / Megatron-Bridge)


def _load_mapping(source, kind: str) -> tuple[dict, str]:
    if isinstance(source, dict):
        return source, "a mapping"
    text, where = _source_text(source, kind)
    suffix = Path(where).suffix.lower()
    try:
        if suffix == ".toml" or kind == "torchtitan":
            import tomllib
            data = tomllib.loads(text)
        elif suffix == ".json" or kind == "deepspeed":
            data = json.loads(text)
        else:
            try:
                import yaml
            except ImportError:
                raise ConfigError(f"--from {kind}: reading YAML needs PyYAML (pip install 'symbolic-ledgers[launch]')"
                                  ) from None
            data = yaml.safe_load(text)
    except ConfigError:
        raise
    except Exception as error:  # a parser's own message: the file is not what its name says
        raise ConfigError(f"--from {kind} {clean(where)!r}: not readable ({clean(str(error).splitlines()[0])})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--from {kind} {clean(where)!r}: expected a mapping of sections at the top")
    return data, where


def _walk(data: dict, prefix: str = ""):
    """Every leaf of a nested mapping as (dotted.key, value)."""
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            yield from _walk(value, name + ".")
        else:
            yield name, value


def _finish(reader: _Reader, data: dict, used: set, ignore: dict[str, str], model: ModelConfig | None,
            what_model: str) -> LaunchReading:
    """Unused keys: ignored with the reason when their section (or key) is in ``ignore``, else refused."""
    for key, value in _walk(data):
        if key in used:
            continue
        section = next((why for prefix, why in ignore.items() if key == prefix or key.startswith(prefix + ".")), None)
        if section is None:
            reader.refuse(key, value, f"not a key this reader knows ({reader.code}); it may change memory or time, "
                          "so it is not dropped — remove it if it changes neither")
        reader.ignore(key, value, section)
    if model is not None:
        reader.model, reader.model_name = model, ""
    elif reader.model is None and not any(note.option == "model" for note in reader.assumed):
        reader.assume("model", "", f"not in the config: give MODEL ({what_model})")
    return reader.reading()
