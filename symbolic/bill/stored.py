"""The bill cache's entries on disk (:mod:`symbolic.bill.cache`): where they live, how one is read
back and checked, how one is written — and nothing that derives. :func:`through` takes the deriving
function from its caller, so :func:`symbolic.bill.derive.derived` (``make_bill``'s) reads the disk
without this module importing sympy's side, and no import comes back to derive.
"""
from __future__ import annotations

import itertools
import json
import os
from functools import lru_cache
from pathlib import Path

from ..core.digest import sha256
from ..layout.layout import Layout
from ..models.config import ModelConfig
from .evaluate import DerivedBill, derivation_key

PACKAGE = Path(__file__).resolve().parent.parent  # the symbolic/ package, not this folder


def _engine_files() -> list[Path]:
    """The package's files the cache is keyed on: code, data and the calculator page, not the claims
    (no ``derivations`` folder), in path order; symbolic links to folders are not followed."""
    found = []
    for where, folders, names in os.walk(PACKAGE):
        folders[:] = [name for name in folders if name not in ("derivations", "__pycache__")]  # the claims are not the engine
        found += [os.path.join(where, name) for name in names if name.endswith((".py", ".json", ".html", ".toml"))]
    root = len(str(PACKAGE)) + 1
    return [Path(path) for path in sorted(found, key=lambda path: path[root:].split(os.sep)) if os.path.isfile(path)]


def _content_fingerprint(files: list[Path]) -> str:
    digest = sha256()
    for path in files:
        digest.update(str(path.relative_to(PACKAGE)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=None)
def fingerprint() -> str:
    """A hash of every file of the package: the engine version the cache is for.

    The content hash is remembered under the cache's base folder keyed by every file's (path, size,
    mtime_ns, inode), so a process whose files are as the last one saw them reads it back instead of
    hashing 1.7 MB; any edit, added, removed or replaced file changes that key and the contents are
    hashed afresh. Condition: an edit that keeps a file's size, its modification time to the nanosecond
    and its inode is not seen (editors, git and pip all set the modification time). With the cache off
    (``SYMBOLIC_CACHE=off``) nothing is remembered."""
    files = _engine_files()
    base = _base()
    if base is None:
        return _content_fingerprint(files)
    stats = sha256()
    root = len(str(PACKAGE)) + 1
    for path in files:
        stat = os.stat(path)
        stats.update(f"{str(path)[root:]}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ino}\n".encode())
    memo = base / "fingerprints" / stats.hexdigest()[:32]
    try:
        known = memo.read_text(encoding="ascii")
        if len(known) == 16 and all(c in "0123456789abcdef" for c in known):
            return known
    except (OSError, UnicodeDecodeError):
        pass
    value = _content_fingerprint(files)
    try:  # best effort: a read-only cache folder only means hashing again next time
        memo.parent.mkdir(parents=True, exist_ok=True)
        partial = memo.with_name(f"{memo.name}.{os.getpid()}.tmp")
        partial.write_text(value, encoding="ascii")
        os.replace(partial, memo)
    except OSError:
        pass
    return value


def _base() -> Path | None:
    """The cache's base folder (each engine version's entries lie under it), or None when it is off."""
    if os.environ.get("SYMBOLIC_CACHE", "").lower() in ("0", "off", "no", "false"):
        return None
    base = os.environ.get("SYMBOLIC_CACHE_DIR")
    if not base:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "symbolic"
    return Path(base)


def folder() -> Path | None:
    """Where the cache lives, or None when it is turned off."""
    base = _base()
    return None if base is None else base / fingerprint()


def entry_path(key: str, prefix: str = "") -> Path | None:
    """Where the cache entry of ``key`` lives: ``PREFIX`` + the key's SHA-256 (32 hex digits) + ``.json`` in
    :func:`folder` (None: the cache is off). The bill's derivations have no prefix; the step time's,
    the plan's and the calculator page's entries name theirs."""
    where = folder()
    return where / (prefix + sha256(key.encode()).hexdigest()[:32] + ".json") if where else None


#: Largest cache entry read back (a derivation is a few tens of KiB).
ENTRY_MAX_BYTES = 8 * 2**20


def _content_hash(derived_json: str) -> str:
    return sha256(derived_json.encode("utf-8")).hexdigest()


def _note(path: Path, why: str) -> None:
    """One line on stderr: the entry was not used (the bill is derived afresh, so still right)."""
    import sys

    from ..core.inputs import clean

    print(f"symbolic: note: cache entry {clean(path.name)} discarded ({clean(why)}); derived afresh", file=sys.stderr)


def read_entry(path: Path, key: str, load):
    """The entry at ``path`` if it is whole and true: written by this package (its
    fingerprint), for ``key``, its content matching its hash, and accepted by
    ``load(text)`` (which parses, and checks, the stored text: any exception means
    no entry). Anything else is discarded (one note) and None returned."""
    from ..core.inputs import InputError, read_json_file

    try:
        stored = read_json_file(path, ENTRY_MAX_BYTES, what="cache entry")
        if not isinstance(stored, dict):
            raise ValueError(f"a JSON {type(stored).__name__}, not an entry")
        missing = [k for k in ("key", "package", "sha256", "derived") if k not in stored]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        if stored["key"] != key:
            raise ValueError("written for another derivation")
        if stored["package"] != fingerprint():
            raise ValueError("written by another version of the package")
        if not isinstance(stored["derived"], str) or _content_hash(stored["derived"]) != stored["sha256"]:
            raise ValueError("its content does not match its hash: edited or damaged")
        return load(stored["derived"])
    except (InputError, OSError) as error:
        why = str(error)
    except Exception as error:  # noqa: BLE001 - any failure of a cache entry means: derive again
        why = f"{type(error).__name__}: {error}"
    _note(path, why[:200])
    try:
        path.unlink()
    except OSError:
        pass
    return None


def _read(path: Path, key: str, model: ModelConfig, layout: Layout, params_hand: int | None) -> DerivedBill | None:
    """The bill's entry at ``path`` (:func:`read_entry`), evaluable at this configuration."""
    def load(text: str) -> DerivedBill:
        derived = DerivedBill.from_json(text)
        from .evaluate import evaluate
        evaluate(derived, model, layout, params_hand)  # an entry that cannot be evaluated is no entry
        return derived

    return read_entry(path, key, load)


def write_entry(path: Path, key: str, text: str) -> None:
    """Atomically: a temporary file in the same folder (unique to this process and
    call), then ``os.replace`` — a concurrent reader sees the old entry or the whole
    new one, and two writers of the same entry each replace it whole."""
    _write_text(path, json.dumps({"key": key, "package": fingerprint(), "sha256": _content_hash(text),
                                  "derived": text}))


@lru_cache(maxsize=1 << 14)
def _escaped(fragment: str) -> str:
    """``fragment`` as it stands inside a JSON string (``json.dumps`` without its quotes): JSON escapes
    character by character, so the escaped pieces of a text concatenate to the escaped text."""
    return json.dumps(fragment)[1:-1]


def _entry_text(key: str, fragments: list[str]) -> str:
    """:func:`write_entry`'s JSON of the derivation whose text is ``"".join(fragments)``: the same
    bytes, ``derived``'s escaping joined from its pieces' (a loop's kinds share most pieces)."""
    text = "".join(fragments)
    return (f'{{"key": {json.dumps(key)}, "package": {json.dumps(fingerprint())}, '
            f'"sha256": "{_content_hash(text)}", "derived": "{"".join(map(_escaped, fragments))}"}}')


#: Temporary names of this process's writes (with its pid: unique to the process and the call).
_PARTIALS = itertools.count()


def _write_text(path: Path, entry: str) -> None:
    """``entry`` written to ``path`` atomically (:func:`write_entry`): the temporary file opened with
    ``O_CREAT | O_EXCL`` (mode 0600, as ``tempfile.mkstemp``) under a name of this process and call,
    written with ``os.write``, and ``os.replace``-d into place; a name left by an earlier process of
    the same pid falls back to ``mkstemp``'s random one."""
    data = entry.encode("utf-8")
    folder, name = os.fspath(path.parent), path.stem
    partial = os.path.join(folder, f"{name}.{os.getpid()}.{next(_PARTIALS)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        try:  # the folder exists after a process's first entry: made only when the file cannot be
            handle = os.open(partial, flags, 0o600)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = os.open(partial, flags, 0o600)
        except FileExistsError:
            import tempfile
            handle, partial = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=folder)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(handle, view):]
            finally:
                os.close(handle)
            os.replace(partial, path)
        except BaseException:
            try:
                os.unlink(partial)
            except OSError:
                pass
            raise
    except OSError:
        pass  # a read-only home or a full disk: the bill is still right, only not cached


def _write(path: Path, key: str, derived: DerivedBill) -> None:
    _write_text(path, _entry_text(key, derived.json_fragments()))


def through(model: ModelConfig, layout: Layout, params_hand: int | None, derive, fields=None) -> DerivedBill:
    """The derived bill read from the cache (checked and evaluated at this configuration), or
    ``derive(model, layout, params_hand)`` (sympy) on a miss, written to it. ``fields``: the
    configuration's :func:`derivation_key` when the caller has it already."""
    key = json.dumps(derivation_key(model, layout, params_hand) if fields is None else fields, sort_keys=True)
    path = entry_path(key)
    if path is not None and os.path.lexists(path):  # an entry, or a link to check (one lstat)
        derived = _read(path, key, model, layout, params_hand)
        if derived is not None:
            return derived
    derived = derive(model, layout, params_hand)
    if path is not None:
        _write(path, key, derived)
    return derived
