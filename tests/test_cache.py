"""The bill's derivation cache: the same numbers as make_bill, and no sympy on a hit."""
import json
import os
import subprocess
import sys

import pytest

from symbolic.bill import cache
from symbolic.bill.derive import derive, make_bill
from symbolic.bill.evaluate import DerivedBill, evaluate
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.render.terminal import render_json

CASES = [
    ("gpt-7b", Layout(micro_batch=4, tp=8, sp=True), 7 * 10**9),
    ("gpt-175b", Layout(tp=8, pp=8, sp=True, recompute="selective", interleave=3, global_batch=16), None),
    ("gpt-22b", Layout(tp=4, dp=2, zero=3, recompute="full", dtype="fp32", global_batch=8), None),
    ("llama-2-7b", Layout(tp=8, sp=True, micro_batch=2), None),
    ("mixtral-8x7b", Layout(tp=8, sp=True, zero=1, dp=2, optimizer="bf16-sgd-momentum"), None),
]


@pytest.mark.parametrize("name, layout, hand", CASES)
def test_cached_derivation_gives_the_bill_exactly(tmp_path, monkeypatch, name, layout, hand):
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    model = preset(name)
    first = cache.derivation(model, layout, hand)  # a miss: derived and written
    assert len(list(tmp_path.rglob("*.json"))) == 1
    second = cache.derivation(model, layout, hand)  # a hit: read back
    assert second == first == derive(model, layout, hand)
    expected = render_json(make_bill(model, layout, params_hand=hand, gpu_memory=80 * 10**9))
    assert render_json(evaluate(second, model, layout, hand, 80 * 10**9)) == expected


def test_derived_bill_round_trips_through_json():
    derived = derive(preset("gpt-175b"), Layout(tp=8, pp=8, sp=True))
    assert DerivedBill.from_json(derived.to_json()) == derived
    # the text names every field of a line, in order, as dataclasses.asdict would (a new field cannot be dropped)
    from dataclasses import asdict
    assert derived.to_json() == json.dumps({"lines": [asdict(line) for line in derived.lines],
                                            "formulas": derived.formulas, "strategy": derived.strategy})


@pytest.mark.parametrize("name, layout, hand", CASES)
def test_a_bill_builds_its_lines_when_read_the_same_lines(name, layout, hand):
    import copy
    import pickle

    from symbolic.bill.evaluate import Line
    model = preset(name)
    bill = make_bill(model, layout, params_hand=hand)
    assert "_lines" in vars(bill) and type(vars(bill)["_lines"]) is not list  # not built until read
    twin = pickle.loads(pickle.dumps(make_bill(model, layout, params_hand=hand)))  # a pickle builds them
    lines = bill.lines
    assert type(lines) is list and bill.lines is lines and all(type(line) is Line for line in lines)
    assert twin.lines == lines and twin == bill and copy.deepcopy(bill) == bill
    # each line as Line(...) builds it; the ledgers sum to the totals; the verdict's lines last, summing to it
    assert lines == [Line(line.ledger, line.name, line.formula, line.value, line.source, line.condition,
                          line.per_micro_batch, line.micro_batches) for line in lines]
    assert sum(line.value for line in bill.ledger("model_states")) == bill.totals["model_states_bytes"]
    assert [line.ledger for line in lines[-5:]] == ["verdict"] * 5
    assert sum(line.value for line in lines[-5:]) == bill.totals["total_bytes"]
    bill.lines = lines[:3]  # a field still: set, then read back
    assert bill.lines == lines[:3]


def test_a_corrupt_entry_is_derived_again(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    model, layout = preset("gpt-22b"), Layout(tp=8)
    cache.derivation(model, layout)
    (entry,) = tmp_path.rglob("*.json")
    entry.write_text("{not json")
    assert cache.derivation(model, layout) == derive(model, layout)
    assert json.loads(entry.read_text())["derived"]  # rewritten whole


def test_cache_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SYMBOLIC_CACHE", "off")
    cache.derivation(preset("gpt-22b"), Layout(tp=8))
    assert list(tmp_path.rglob("*")) == []


def test_a_cached_bill_runs_without_sympy(tmp_path):
    env = dict(os.environ, SYMBOLIC_CACHE_DIR=str(tmp_path))
    argv = ["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--gpu-memory", "80GB"]
    probe = ("import sys, contextlib, io\nfrom symbolic.cli import main\n"
             f"with contextlib.redirect_stdout(io.StringIO()): code = main({argv!r})\n"
             "print(code, 'sympy' in sys.modules)")
    run = lambda: subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)  # noqa: E731
    assert run().stdout.split() == ["0", "True"]  # first: derived with sympy
    assert run().stdout.split() == ["0", "False"]  # then: evaluated from the cache alone


def test_every_billed_architecture_has_an_inventory():
    from symbolic.models.architectures import ARCHITECTURES, composed
    from symbolic.models.config import BILLED_ARCHITECTURES

    # "composed" layers are built from each model's recipe (symbolic.models.architectures.composed)
    assert set(BILLED_ARCHITECTURES) - {"composed"} <= set(ARCHITECTURES)
    assert callable(composed.inventories)


def _entry(tmp_path):
    (path,) = tmp_path.rglob("*.json")
    return path, json.loads(path.read_text())


def _times_1000(stored):
    derived = json.loads(stored["derived"])
    derived["lines"][0]["formula"] = f"1000*({derived['lines'][0]['formula']})"
    return dict(stored, derived=json.dumps(derived))


def _no_lines(stored):
    derived = json.loads(stored["derived"])
    derived["lines"] = []
    return dict(stored, derived=json.dumps(derived))


def _rehashed(edit):
    """An edit that also rewrites the hash: caught by evaluation (1/0) or not at all (documented)."""
    import hashlib

    def apply(stored):
        changed = edit(stored)
        return dict(changed, sha256=hashlib.sha256(changed["derived"].encode()).hexdigest())
    return apply


def _divide_by_zero(stored):
    derived = json.loads(stored["derived"])
    derived["formulas"]["params"] = "1/0"
    return dict(stored, derived=json.dumps(derived))


def _power_tower(stored):
    derived = json.loads(stored["derived"])
    derived["formulas"]["params"] = "10**10**10"  # would compute for hours if evaluated
    return dict(stored, derived=json.dumps(derived))


@pytest.mark.parametrize("damage", [
    _times_1000, _no_lines, lambda stored: [1, 2, 3], lambda stored: {"key": stored["key"]},
    lambda stored: dict(stored, package="0" * 16), lambda stored: dict(stored, derived=None),
    _rehashed(_divide_by_zero), lambda stored: "just a string", _rehashed(_power_tower),
], ids=["formula-x1000", "lines-removed", "json-list", "missing-keys", "other-package", "derived-null",
        "formula-1/0-rehashed", "json-string", "power-tower-rehashed"])
def test_a_damaged_entry_is_discarded_with_one_note_and_derived_again(tmp_path, monkeypatch, capsys, damage):
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    model, layout = preset("gpt-7b"), Layout(tp=8, sp=True)
    expected = render_json(make_bill(model, layout))
    cache.derivation(model, layout)
    path, stored = _entry(tmp_path)
    path.write_text(json.dumps(damage(stored)))
    capsys.readouterr()
    assert render_json(evaluate(cache.derivation(model, layout), model, layout)) == expected
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "discarded" in err and "derived afresh" in err
    _, rewritten = _entry(tmp_path)
    assert rewritten == stored  # rewritten whole, by this package
    assert render_json(evaluate(cache.derivation(model, layout), model, layout)) == expected
    assert capsys.readouterr().err == ""  # and the next run trusts it


def test_concurrent_processes_share_the_cache_safely(tmp_path):
    """Eight processes derive the same bill at once: every one prints the same JSON, and the
    folder ends with one whole entry and no temporary files."""
    env = dict(os.environ, SYMBOLIC_CACHE_DIR=str(tmp_path))
    argv = [sys.executable, "-m", "symbolic", "bill", "gpt-22b", "--tp", "8", "--json"]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    outs = [p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs) and len({out for out, _ in outs}) == 1
    assert all(err == "" for _, err in outs)
    memos = list((tmp_path / "fingerprints").iterdir())  # the package hash remembered, whole, no temporary file
    assert len(memos) == 1 and len(memos[0].read_text()) == 16
    files = [f for f in tmp_path.rglob("*") if "fingerprints" not in f.relative_to(tmp_path).parts]
    # one whole entry of the bill's derivation and one of its step-time derivation, no temporary file
    assert sorted(f.name.startswith("time-") for f in files if f.is_file()) == [False, True]
    assert {f.suffix for f in files if f.is_file()} == {".json"}


@pytest.mark.parametrize("name, layout, hand", CASES[:3])
def test_make_bill_in_a_new_process_reads_the_kinds_an_earlier_run_derived(tmp_path, monkeypatch, name, layout, hand):
    """make_bill's in-process memo misses in a new process; the disk cache (bill/stored.py, which
    derives nothing itself) answers, checked: the bill is the derived one to the byte, sympy not asked."""
    from symbolic.bill import derive as derive_module

    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    model = preset(name)
    monkeypatch.setattr(derive_module, "_DERIVED", {})
    first = render_json(make_bill(model, layout, params_hand=hand))          # derived, written
    assert len(list(tmp_path.rglob("*.json"))) == 1

    def refuse(*_):
        raise AssertionError("derived again: the disk cache was not read")

    monkeypatch.setattr(derive_module, "_DERIVED", {})                      # a new process's memo
    monkeypatch.setattr(derive_module, "derive", refuse)
    assert render_json(make_bill(model, layout, params_hand=hand)) == first


def test_fingerprint_is_remembered_and_an_edit_changes_it(tmp_path, monkeypatch):
    """The package hash is read back while every file's stat is unchanged; an edit (new size or
    mtime) hashes the contents afresh, so a changed engine never reads the old entries."""
    import os
    import shutil

    from symbolic.bill import stored

    package = tmp_path / "symbolic"
    shutil.copytree(stored.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__", "derivations"))
    monkeypatch.setattr(stored, "PACKAGE", package)
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SYMBOLIC_CACHE", raising=False)
    stored.fingerprint.cache_clear()
    try:
        first = stored.fingerprint()
        assert first == stored._content_fingerprint(stored._engine_files())
        memo, = (tmp_path / "cache" / "fingerprints").iterdir()
        assert memo.read_text() == first
        memo.write_text("0123456789abcdef")  # read back, not recomputed, while the stats are the same
        stored.fingerprint.cache_clear()
        assert stored.fingerprint() == "0123456789abcdef"
        edited = package / "ledgers" / "time.py"
        stat = edited.stat()
        edited.write_text(edited.read_text() + "\n# edited\n")
        os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
        stored.fingerprint.cache_clear()
        second = stored.fingerprint()
        assert second != first and second == stored._content_fingerprint(stored._engine_files())
    finally:
        stored.fingerprint.cache_clear()


def test_an_entry_written_from_pieces_is_the_entry_write_entry_writes(tmp_path, monkeypatch):
    """The bill's write (its JSON and escaping joined from memoised pieces) gives write_entry's bytes, for
    kinds that share pieces and for a derivation whose fields are not of the memoised types."""
    from dataclasses import replace

    from symbolic.bill import stored
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    key = json.dumps({"kind": "a \"quoted\" key · with a non-ASCII letter"})
    derived = [derive(preset(name), layout, hand) for name, layout, hand in CASES]
    derived.append(derive(preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True, zero=1, dp=2)))  # shares pieces
    odd = replace(derived[0], lines=(replace(derived[0].lines[0], micro_batches=True),) + derived[0].lines[1:])
    for i, one in enumerate(derived + [odd]):
        assert "".join(one.json_fragments()) == one.to_json() == json.dumps(
            {"lines": [{"ledger": x.ledger, "name": x.name, "formula": x.formula, "source": x.source,
                        "condition": x.condition, "per_micro_batch": x.per_micro_batch,
                        "micro_batches": x.micro_batches} for x in one.lines],
             "formulas": one.formulas, "strategy": one.strategy})
        stored._write(tmp_path / "pieces" / f"{i}.json", key, one)  # the folder made on the first write
        stored.write_entry(tmp_path / "whole" / f"{i}.json", key, one.to_json())
        written = (tmp_path / "pieces" / f"{i}.json").read_bytes()
        assert written == (tmp_path / "whole" / f"{i}.json").read_bytes()
        assert json.loads(written)["derived"] == one.to_json()
        assert oct((tmp_path / "pieces" / f"{i}.json").stat().st_mode & 0o777) == "0o600"
    assert '"micro_batches": true' in odd.to_json()  # a bool stays a bool, not a memoised 1
    assert sorted(path.name for path in (tmp_path / "pieces").iterdir()) == [f"{i}.json" for i in range(7)]


def test_a_write_whose_temporary_name_is_taken_still_replaces_the_entry(tmp_path, monkeypatch):
    """A temporary left under this process's next name (an earlier process of the same pid) is not
    overwritten: the entry is written through a random name instead, and nothing else is left."""
    import itertools

    from symbolic.bill import stored
    monkeypatch.setattr(stored, "_PARTIALS", itertools.count(7))
    stale = tmp_path / f"entry.{os.getpid()}.7.tmp"
    stale.write_text("an earlier process's")
    stored._write_text(tmp_path / "entry.json", '{"whole": true}')
    assert (tmp_path / "entry.json").read_text() == '{"whole": true}'
    assert stale.read_text() == "an earlier process's"
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["entry.json", stale.name])


def test_the_cache_keys_digest_is_sha256():
    """core/digest.py's SHA-256 (CPython's own module, not hashlib's OpenSSL) is hashlib's, so a cache
    written by either names its entries alike."""
    import hashlib

    from symbolic.core.digest import sha256

    for data in (b"", b"abc", "gpt-175b|t=8|p=8".encode(), bytes(range(256)) * 300):
        assert sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
        incremental = sha256()
        for start in range(0, len(data), 1000):
            incremental.update(data[start:start + 1000])
        assert incremental.hexdigest() == hashlib.sha256(data).hexdigest()
