"""The shared reader of every launch kind: what a reading is (:class:`LaunchReading`, its
:class:`ReadNote` lines), the accumulator each kind fills (:class:`_Reader`: take, ignore, assume,
refuse in one line), the value checks, and the file loading (a path, a command line or a mapping; TOML,
JSON, YAML) with the walk that lists every key a kind did not take as ignored (with the reason) or
refuses it."""
from __future__ import annotations

import json
import re
from contextvars import ContextVar
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

    def with_typed(self, typed: dict) -> "LaunchReading":
        """This reading with the Layout fields ``typed`` beside it (the API's typed keywords, as the CLI's
        typed flags): each value wins over the config's and is listed among the options taken."""
        if not typed:
            return self
        read = self.fields
        notes = tuple(ReadNote(f"{name}= (typed)", str(value), f"{name} = {value}" + (
            f", over the config's {read[name]}" if name in read and read[name] != value else
            "" if name in read else " (the config sets none)")) for name, value in typed.items())
        return replace(self, layout_fields=tuple({**read, **typed}.items()), taken=self.taken + notes)

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
        preset = f"framework preset {self.framework}" if self.framework else "no framework preset (HF Trainer)"
        out = [f"read from {self.kind} ({self.source}), {preset}: "
               f"{len(self.taken)} options taken, {len(self.ignored)} ignored, {len(self.assumed)} defaults assumed"]
        out += ["  taken: " + "; ".join(n.line() for n in self.taken)] if self.taken else []
        out += ["  assumed: " + "; ".join(n.line() for n in self.assumed)] if self.assumed else []
        by_reason: dict[str, list[str]] = {}
        for note in self.ignored:  # grouped by the reason: "--lr, --min-lr (learning-rate schedule)"
            by_reason.setdefault(note.what, []).append(note.option)
        out += ["  ignored: " + "; ".join(f"{', '.join(options)} ({why})" for why, options in by_reason.items())
                ] if self.ignored else []
        return out


#: The Layout fields the user typed beside ``--from`` (set by :func:`~symbolic.layout.launch.read_launch`
#: for one reading): a field a reader cannot take is then listed as given by the typed flag, not refused.
TYPED: ContextVar[frozenset] = ContextVar("typed_layout_fields", default=frozenset())


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

        self.origin: dict = {}  # Layout field -> the option that set it (named when the schema refuses it)
        self.typed = TYPED.get()

    def take(self, option, value, what, **layout) -> None:
        self.fields.update(layout)
        self.origin.update(dict.fromkeys(layout, option))
        self.taken.append(ReadNote(option, _shown(value), what))

    def ignore(self, option, value, why) -> None:
        self.ignored.append(ReadNote(option, _shown(value), why))

    def assume(self, option, value, what, **layout) -> None:
        self.fields.update(layout)
        self.origin.update(dict.fromkeys(layout, option))
        self.assumed.append(ReadNote(option, _shown(value), what))

    def refuse(self, option, value, why):
        shown = "" if value is True or value is None or value == "" else f" {_shown(value)}"
        raise ConfigError(f"--from {self.kind}: {option}{shown}: {why}")

    def unless_typed(self, field: str, option, value, why) -> None:
        """Refuse ``option`` (one line) unless the user typed the Layout ``field`` it would set: then the
        option is listed as ignored — the typed flag gives the field (the README's "a typed flag wins")."""
        if field not in self.typed:
            self.refuse(option, value, why)
        flag = "--" + ("moe_capacity_factor" if field == "moe_capacity" else field).replace("_", "-")
        self.ignore(option, value, f"not read ({why}); the typed {flag} gives it")

    def flag(self, option, value, reads: str) -> bool:
        """A boolean as the framework reads it, else one line. ``reads``: ``accelerate`` (``accelerate
        launch`` passes ``str(value).lower()`` through the environment to ``str_to_bool``:
        accelerate 1.16.0 ``utils/launch.py`` and ``utils/environment.py`` — ``"false"``, ``"no"``,
        ``"0"`` are False); ``omegaconf`` (a NeMo / Megatron-Bridge dataclass field: OmegaConf's
        ``BooleanNode.validate_and_convert``, ``omegaconf/nodes.py`` at omry/omegaconf 01445ab, takes an
        int — or text of one — as ``!= 0`` and yes/y/on/true, no/n/off/false in any case); ``strict`` (a
        TOML or JSON boolean field: true or false only)."""
        if isinstance(value, bool):
            return value
        if reads == "accelerate" and isinstance(value, (int, str)):
            text = str(value).lower()
            if text in ("y", "yes", "t", "true", "on", "1"):
                return True
            if text in ("n", "no", "f", "false", "off", "0"):
                return False
        if reads == "omegaconf" and isinstance(value, (int, str)):
            text = str(value).strip()
            if re.fullmatch(r"[+-]?[0-9]{1,20}", text):
                return int(text) != 0
            if text.lower() in ("yes", "y", "on", "true"):
                return True
            if text.lower() in ("no", "n", "off", "false"):
                return False
        self.refuse(option, repr(value), "give true or false (the framework refuses anything else)")

    def choice(self, option, value, choices: tuple, where: str):
        """``value`` if it is one of ``choices`` (as the framework spells them), else one line: an invalid
        choice is the framework's error, never its default."""
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value not in choices:
            self.refuse(option, repr(value), f"give one of {', '.join(map(str, choices))} ({where})")
        return value

    def _checked(self) -> None:
        """Every Layout field read passes the schema the CLI and the API read (``layout/options.py``):
        its stated range and choices — a value from a file is no less bounded than one typed."""
        from ..options import LIMITS, OPTIONS

        for name, value in self.fields.items():
            option = OPTIONS.get("moe_capacity_factor" if name == "moe_capacity" else name)
            if option is None or value is None:
                continue
            try:
                option.read(",".join(value) if name == "recompute_modules" else value)
            except ConfigError as error:
                fix = str(error).split(": ", 1)[-1].rsplit(" (", 1)[0]
                self.refuse(self.origin.get(name, name), value, f"{fix} (what {option.flag} takes)")
        if self.gpus > LIMITS["gpus"]:
            self.refuse("the world size", self.gpus, f"outside the stated range 1..{LIMITS['gpus']:,} (what --gpus "
                        "takes)")

    def reading(self) -> LaunchReading:
        self._checked()
        return LaunchReading(self.kind, clean(self.source), tuple(self.fields.items()), self.model, self.model_name,
                             self.framework, tuple(self.time.items()), self.gpus, tuple(self.taken),
                             tuple(self.ignored), tuple(self.assumed), tuple(self.notes.items()))


def _shown(value) -> str:
    """A value for a note or a refusal: control characters escaped, at most 80 characters (a section
    given where a number belongs is named, not printed whole)."""
    text = clean(str(value))
    return text if len(text) <= 80 else text[:77] + "..."


def _int(reader: _Reader, option: str, value, low: int = 1, field: str | None = None) -> int:
    """A whole number of at least ``low`` from a config value (text or int), else one line; with
    ``field`` (a Layout field: tp, micro_batch, seq, ...) also within the stated range the CLI's flag
    has (``layout/options.py`` LIMITS), checked here before the number sizes anything."""
    if isinstance(value, bool) or not (isinstance(value, int) or re.fullmatch(r"\s*[+-]?[0-9]{1,12}\s*", str(value))):
        reader.refuse(option, value, f"give a whole number (at least {low}, at most 12 digits)")
    number = int(value)
    if number < low:
        reader.refuse(option, value, f"must be at least {low}")
    if field is not None:
        from ..options import LIMITS, OPTIONS
        high = LIMITS.get(field, LIMITS["count"])
        if number > high:
            flag = OPTIONS[field].flag if field in OPTIONS else "--" + field
            reader.refuse(option, value, f"outside the stated range {low:,}..{high:,} (what {flag} takes)")
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


#: Caps on what a launch reader takes: launch configs are a few KiB (the largest public recipe dump
#: read, a Megatron-Bridge ConfigContainer, is 30 KiB); a bigger file or command line is refused before
#: it is split or parsed (shlex splits in Python, a character at a time).
LAUNCH_MAX_BYTES = 2**20
#: A command line or launch script is split by :mod:`shlex`, a character at a time in Python (about
#: 50 µs a character here): its cap is 64 KiB (public Megatron launch scripts are under 16 KiB).
SHELL_MAX_BYTES = 64 * 2**10
#: YAML aliases (``*name``) a file may use: each shares a node, so a few nested ones stand for an
#: exponential tree ("billion laughs"); real launch YAML uses none or a handful.
YAML_MAX_ALIASES = 64
#: Nesting and size of a mapping read (a file's or an API caller's dict, self-references refused).
TREE_MAX_DEPTH = 32
TREE_MAX_NODES = 100_000


def _too_big(kind: str, where: str, size: int, cap: int = LAUNCH_MAX_BYTES):
    raise ConfigError(f"--from {kind} {_shown(where)!r}: {size:,} B is more than the {cap:,} B a launch config "
                      "may have; give the config file itself")


def _source_text(source, kind: str):
    """(text or word list, where) from a path, a command line or a word list, within
    :data:`LAUNCH_MAX_BYTES` and free of NUL bytes (a binary file is not a launch config)."""
    from ...core.inputs import InputError, read_regular_file

    if isinstance(source, (list, tuple)):
        words = [str(word) for word in source]
        if sum(len(word) + 1 for word in words) > LAUNCH_MAX_BYTES:
            _too_big(kind, "command line", sum(len(word) + 1 for word in words))
        return words, "command line"
    text = str(source)
    if len(text) > LAUNCH_MAX_BYTES:
        _too_big(kind, "command line", len(text))
    if kind == "megatron" and ("\n" in text or re.search(r"(^|\s)--[a-z]", text)):
        if len(text.encode("utf-8", "replace")) > SHELL_MAX_BYTES:
            _too_big(kind, "command line", len(text.encode("utf-8", "replace")), SHELL_MAX_BYTES)
        if "\0" in text:
            raise ConfigError(f"--from {kind}: the command line has NUL bytes; give the launch script's text")
        return text, "command line"
    if "\0" in text:
        raise ConfigError(f"--from {kind}: a path with a NUL byte; give the config file's path")
    path = Path(text).expanduser()
    if not path.exists():
        raise ConfigError(f"--from {kind} {_shown(text)!r}: no such file"
                          + (" (or give the command line, its options starting with --)" if kind == "megatron" else ""))
    if not path.is_file():  # a folder, a FIFO, a device: reading it could block or mean nothing
        raise ConfigError(f"--from {kind} {_shown(text)!r}: not a regular file; give the config file's path")
    try:
        data = read_regular_file(path, LAUNCH_MAX_BYTES, what="launch config")
        text = data.decode("utf-8")
    except InputError as error:
        raise ConfigError(f"--from {kind}: {error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"--from {kind} {_shown(str(path))!r}: not UTF-8 text ({error.reason} at byte "
                          f"{error.start:,}); give the config file") from None
    if kind == "megatron" and len(data) > SHELL_MAX_BYTES:
        _too_big(kind, str(path), len(data), SHELL_MAX_BYTES)
    if "\0" in text:
        raise ConfigError(f"--from {kind} {_shown(str(path))!r}: has NUL bytes (a binary file); give the config file")
    return text, str(path)


# ----------------------------------------------------------------------------------------------
# Structured configs: TOML (torchtitan), JSON (DeepSpeed), YAML (accelerate, NeMo / Megatron-Bridge,
# axolotl, LLaMA-Factory)
# ----------------------------------------------------------------------------------------------

def _check_tree(data, kind: str, where: str) -> None:
    """``data`` is a finite tree: at most :data:`TREE_MAX_DEPTH` deep and :data:`TREE_MAX_NODES`
    nodes counted with every shared node once per use, no mapping or list inside itself (a dict built
    in Python may refer to itself). Counted without recursion."""
    stack, nodes = [(data, 0, ())], 0
    while stack:
        node, depth, path = stack.pop()
        nodes += 1
        if nodes > TREE_MAX_NODES:
            raise ConfigError(f"--from {kind} {_shown(where)!r}: more than {TREE_MAX_NODES:,} values (shared "
                              "sections counted at each use); a launch config has a few hundred")
        if depth > TREE_MAX_DEPTH:
            raise ConfigError(f"--from {kind} {_shown(where)!r}: nested more than {TREE_MAX_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node if isinstance(node, (list, tuple)) else ()
        nodes += len(children)
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                if id(child) in path or child is node:
                    raise ConfigError(f"--from {kind} {_shown(where)!r}: a section that contains itself; give a "
                                      "tree of plain values")
                stack.append((child, depth + 1, path + (id(node),)))


def _yaml_loader(kind: str, where: str, duplicates: bool):
    """PyYAML's SafeLoader (no object construction from tags) that refuses more than
    :data:`YAML_MAX_ALIASES` aliases and, where the framework refuses them (``duplicates`` False:
    OmegaConf's loader raises "found duplicate key": ``omegaconf/_utils.py get_yaml_loader`` at
    omry/omegaconf 0019bca), a key given twice in one mapping."""
    import yaml

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > YAML_MAX_ALIASES:
                    raise ConfigError(f"--from {kind} {_shown(where)!r}: more than {YAML_MAX_ALIASES} YAML aliases "
                                      "(*name); write the values out")
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            if not duplicates and isinstance(node, yaml.MappingNode):
                seen = set()
                for key_node, _ in node.value:
                    key = getattr(key_node, "value", None)
                    if isinstance(key, str) and key in seen:
                        raise ConfigError(f"--from {kind} {_shown(where)!r}: key {_shown(key)!r} given twice in one "
                                          f"section (line {key_node.start_mark.line + 1}); the framework refuses it")
                    seen.add(key)
            return super().construct_mapping(node, deep)

    return Loader


def _no_duplicates(kind: str, where: str):
    """A ``json`` ``object_pairs_hook`` refusing a key given twice: DeepSpeed loads a config file with
    ``json.load(..., object_pairs_hook=dict_raise_error_on_duplicate_keys)`` (``deepspeed/runtime/config.py``
    and ``config_utils.py`` at :data:`DEEPSPEED_COMMIT`)."""
    def hook(pairs):
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f"--from {kind} {_shown(where)!r}: key {_shown(key)!r} given twice in one object "
                                  "(DeepSpeed refuses it: dict_raise_error_on_duplicate_keys)")
            out[key] = value
        return out
    return hook


#: The kinds whose framework loads YAML with OmegaConf (a duplicate key refused); accelerate, axolotl
#: and LLaMA-Factory load it with ``yaml.safe_load`` (the last one taken).
_OMEGACONF_KINDS = ("nemo", "megatron-bridge", "llamafactory")


def _load_mapping(source, kind: str) -> tuple[dict, str]:
    if isinstance(source, dict):
        _check_tree(source, kind, "a mapping")
        return source, "a mapping"
    text, where = _source_text(source, kind)
    if isinstance(text, list):
        raise ConfigError(f"--from {kind}: give the config file's path (a list of words is a Megatron command line)")
    suffix = Path(where).suffix.lower()
    try:
        if suffix == ".toml" or kind == "torchtitan":
            import tomllib
            data = tomllib.loads(text)  # TOML refuses a key given twice itself
        elif suffix == ".json" or kind == "deepspeed":
            from ...core.inputs import JSON_MAX_DEPTH, json_depth
            if json_depth(text) > JSON_MAX_DEPTH:
                raise ConfigError(f"--from {kind} {_shown(where)!r}: nested more than {JSON_MAX_DEPTH} levels deep")
            data = json.loads(text, object_pairs_hook=_no_duplicates(kind, where))
        else:
            try:
                import yaml
            except ImportError:
                raise ConfigError(f"--from {kind}: reading YAML needs PyYAML (pip install 'symbolic-ledgers[launch]')"
                                  ) from None
            data = yaml.load(text, Loader=_yaml_loader(kind, where, kind not in _OMEGACONF_KINDS))  # noqa: S506
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(f"--from {kind} {_shown(where)!r}: nested too deep to read") from None
    except Exception as error:  # a parser's own message: the file is not what its name says
        raise ConfigError(f"--from {kind} {_shown(where)!r}: not readable ({_shown(str(error).splitlines()[0])})"
                          ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"--from {kind} {_shown(where)!r}: expected a mapping of sections at the top")
    _check_tree(data, kind, where)
    return data, where


def _walk(data: dict, prefix: str = ""):
    """Every leaf of a nested mapping as (dotted.key, value) (a tree :func:`_check_tree` bounded)."""
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
