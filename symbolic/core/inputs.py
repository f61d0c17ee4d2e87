"""Reading what a user hands over — files and text — within stated bounds.

Every file the engine reads on a user's behalf (a ``config.json``, a memory
snapshot) goes through :func:`read_regular_file` or :func:`open_regular_file`:
only a regular file (a FIFO, a device such as ``/dev/zero``, a directory or a
socket is refused before it is opened, so nothing blocks or streams forever),
no larger than a stated cap. JSON is parsed by :func:`loads_json` only after
its nesting depth has been counted (Python's parser recurses: a 10,000-deep
file would otherwise end in ``RecursionError``). :func:`clean` makes any text
that came from a file safe to print on a terminal: control characters (ANSI
escape sequences among them) and bidirectional overrides are shown as
``\\x1b``-style escapes, never sent.

Errors are :class:`InputError` (a ``ValueError``: the CLI prints it as one line,
exit 2), each naming the file, what is wrong and what to give instead.
"""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

#: Caps, in bytes and levels; HF ``config.json`` files are a few KiB, 3–4 levels deep.
CONFIG_MAX_BYTES = 16 * 2**20
JSON_MAX_DEPTH = 64


class InputError(ValueError):
    """A file or text the engine refuses to read; the message is one line."""


# Control characters (C0, DEL, C1) and the bidirectional overrides/isolates.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean(text: object, keep_newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``), so
    that what came from a file can never drive the terminal. Newlines and tabs
    become escapes too unless ``keep_newlines``."""
    text = str(text)
    if not keep_newlines:
        text = text.replace("\n", "\\n").replace("\t", "\\t")
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", text)


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def check_regular_file(path: str | Path, what: str = "file") -> os.stat_result:
    """The ``stat`` of ``path`` (symlinks followed) if it is a regular file, else
    :class:`InputError` naming what it is."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{clean(path)}: no such file (a {what} was expected)") from None
    except OSError as error:
        raise InputError(f"{clean(path)}: cannot read it ({error.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{clean(path)}: is {_kind(info.st_mode)}; give a regular {what}")
    return info


def open_regular_file(path: str | Path, max_bytes: int, what: str = "file"):
    """A binary file object of ``path``, after checking it is a regular file of at
    most ``max_bytes`` (re-checked on the open descriptor, against a swap)."""
    info = check_regular_file(path, what)
    if info.st_size > max_bytes:
        raise InputError(f"{clean(path)}: {info.st_size:,} B is more than the {max_bytes:,} B a {what} may have")
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise InputError(f"{clean(path)}: cannot read it ({error.strerror})") from None
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise InputError(f"{clean(path)}: changed while opened; give a regular {what}")
    return handle


def read_regular_file(path: str | Path, max_bytes: int = CONFIG_MAX_BYTES, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (reads at most one byte more)."""
    with open_regular_file(path, max_bytes, what) as handle:
        try:
            # Its size first, then the rest (a file that grew since): a read of max_bytes + 1 at once allocates
            # that much (8 MiB for a cache entry of a few KiB, a fifth of a millisecond each, 165 in a cold plan).
            size = min(os.fstat(handle.fileno()).st_size, max_bytes) + 1
            data = handle.read(size)
            if len(data) == size and size <= max_bytes:
                data += handle.read(max_bytes + 1 - size)
        except OSError as error:
            raise InputError(f"{clean(path)}: cannot read it ({error.strerror})") from None
    if len(data) > max_bytes:
        raise InputError(f"{clean(path)}: more than the {max_bytes:,} B a {what} may have")
    return data


#: A JSON string, written as the "unrolled loop" (runs of plain characters between escapes): the same
#: strings as ``"(?:[^"\\]|\\.)*"`` (an escape is always a backslash and one character, so each string
#: has one end), matched 4× faster on a cache entry whose text is one long escaped string.
_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """The deepest nesting of objects/arrays in JSON ``text`` (strings skipped),
    counted without recursion."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


#: The most digits an integer of a user's JSON may have: beyond every stated range (10^18 B),
#: and far below Python's 4,300-digit conversion limit, whose message names no field.
JSON_MAX_INT_DIGITS = 100


class _Refused:
    """A JSON value parsed into a placeholder so the error can name the field that holds it."""

    def __init__(self, why: str):
        self.why = why


def _refuse_constant(name: str) -> _Refused:
    return _Refused(f"is {name}, not a finite number")


def _refuse_long(text: str):
    digits = len(text.lstrip("-"))
    return _Refused(f"is an integer of {digits:,} digits, beyond any stated range") \
        if digits > JSON_MAX_INT_DIGITS else int(text)


def _refuse_long_float(text: str):
    if len(text) > 1000:
        return _Refused(f"is a number of {len(text):,} characters")
    value = float(text)
    return _Refused(f"is {text[:40]}, beyond a float's range") if value in (float("inf"), float("-inf")) else value


def _first_refused(value, path: str = ""):
    """(path, reason) of the first placeholder in a parsed document, or None."""
    if isinstance(value, _Refused):
        return path or "the document", value.why
    if isinstance(value, dict):
        children = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        children = ((f"{path}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for child, item in children:
        found = _first_refused(item, child)
        if found:
            return found
    return None


def loads_json(text: str | bytes, where: str, max_depth: int = JSON_MAX_DEPTH):
    """Parse JSON ``text`` from ``where``: the depth is counted first (at most
    ``max_depth``), ``NaN``/``Infinity`` are refused, and any parse failure is
    one :class:`InputError` line naming the place."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{clean(where)}: not UTF-8 text (byte {error.start})") from None
    deepest = json_depth(text)
    if deepest > max_depth:
        raise InputError(f"{clean(where)}: JSON nested {deepest:,} levels deep, more than the {max_depth} "
                         "a configuration may have")
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_int=_refuse_long,
                          parse_float=_refuse_long_float)
    except json.JSONDecodeError as error:
        raise InputError(f"{clean(where)}: not valid JSON ({error.msg} at line {error.lineno} "
                         f"column {error.colno})") from None
    except (ValueError, RecursionError) as error:  # an integer past Python's digit limit, NaN, ...
        raise InputError(f"{clean(where)}: not readable JSON ({clean(error)})") from None
    refused = _first_refused(data)
    if refused:  # NaN, Infinity, 1e999, a 5,000-digit integer: one line naming the field
        field, why = refused
        raise InputError(f"{clean(where)}: {clean(field)[:120]} {why}; give a number within its range")
    return data


def read_json_file(path: str | Path, max_bytes: int = CONFIG_MAX_BYTES, max_depth: int = JSON_MAX_DEPTH,
                   what: str = "config.json"):
    """A regular JSON file, size and depth capped before it is parsed."""
    return loads_json(read_regular_file(path, max_bytes, what), str(path), max_depth)
