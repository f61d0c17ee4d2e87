"""A plan's formulas cached like the bill's derivations: the same plan from the cache, with no
derivation and no lambdify, and a damaged entry discarded and derived again."""
import hashlib
import json
import shutil

import numpy as np
import pytest

import symbolic.bill.timing as timing
import symbolic.search.plan as P
from symbolic.models.builtin import preset

GB = 10**9


def _forget():
    """A fresh process's memory: every per-process cache of the plan's formulas emptied."""
    for function in (P.group_formulas, P.time_function, P._array_function, P._exact_function,
                     timing.time_derivation, P.params_expr, P.states_expr, P.activations_expr, P.peak_exprs,
                     P.flops_expr, P.model_flops_expr):
        getattr(function, "cache_clear", lambda: None)()  # (one a test replaced is no cache)


def _run():
    result = P.plan(preset("gpt-7b"), 16, 80 * GB, global_batch=32)
    return result, [item.as_dict() for item in result.ranked(5)]


def _refuse(*args, **kwargs):
    raise AssertionError("derived, though the cache holds it")


@pytest.fixture(scope="module")
def derived_once(tmp_path_factory):
    """The plan derived once into a cache folder of its own: (the folder, the plan, its top 5). Each test
    starts from a copy of that folder instead of deriving it all again (most of each test's time before)."""
    folder = tmp_path_factory.mktemp("plan-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SYMBOLIC_CACHE_DIR", str(folder))
        _forget()
        result, top = _run()
        _forget()
    return folder, result, top


def _cache_from(derived_once, tmp_path, monkeypatch):
    folder, result, top = derived_once
    shutil.copytree(folder, tmp_path, dirs_exist_ok=True)
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    _forget()
    return result, top


def test_a_cached_plan_neither_derives_nor_lambdifies(tmp_path, monkeypatch, derived_once):
    first, first_top = _cache_from(derived_once, tmp_path, monkeypatch)  # a first plan's entries
    entries = sorted(path.name.split("-")[0] for path in tmp_path.rglob("*.json"))
    assert "plan" in entries and "time" in entries  # the groups' ledgers and their time derivations
    _forget()
    monkeypatch.setattr(P.Group, "expressions", _refuse)
    monkeypatch.setattr(timing, "time_derivation", _refuse)
    monkeypatch.setattr("sympy.lambdify", _refuse)
    second, second_top = _run()
    assert second_top == first_top
    for name, column in first.table.items():
        assert np.array_equal(column, second.table[name], equal_nan=True), name
    _forget()


def _rehash(stored):
    return dict(stored, sha256=hashlib.sha256(stored["derived"].encode()).hexdigest())


def _edit_params(text):
    def apply(stored):
        derived = json.loads(stored["derived"])
        derived["params"] = text.format(derived["params"])
        return dict(stored, derived=json.dumps(derived))
    return apply


@pytest.mark.parametrize("damage", [
    _edit_params("1000*({})"),                                      # edited: the hash no longer matches
    lambda stored: _rehash(_edit_params("__import__('os').getcwd()")(stored)),  # a call: not arithmetic
    lambda stored: _rehash(_edit_params("zz*({})")(stored)),        # a name that is no letter of the plan
    lambda stored: _rehash(dict(stored, derived=json.dumps({"params": "1"}))),  # fields missing
    lambda stored: _rehash(dict(stored, derived="[1, 2]")),
], ids=["edited", "call-rehashed", "unknown-letter-rehashed", "fields-missing-rehashed", "json-list-rehashed"])
def test_a_damaged_plan_entry_is_discarded_and_derived_again(tmp_path, monkeypatch, capsys, damage, derived_once):
    """One of the plan's 96 group entries damaged: the guarded reader checks each entry alone (hash, then
    the arithmetic-only parse), so one damaged entry exercises the same refusal as all 96 did, and also shows
    that only it is discarded and re-derived, the 95 sound ones still trusted (re-deriving all 96 was ~2.5 s
    a case)."""
    expected, expected_top = _cache_from(derived_once, tmp_path, monkeypatch)
    paths = sorted(tmp_path.rglob("plan-*.json"))
    assert len(paths) > 1
    damaged = paths[0]
    damaged.write_text(json.dumps(damage(json.loads(damaged.read_text()))))
    _forget()
    capsys.readouterr()
    again, again_top = _run()
    err = capsys.readouterr().err
    assert err.count("discarded") == 1 and damaged.name in err and "derived afresh" in err
    assert again_top == expected_top
    assert np.array_equal(again.table["total_bytes"], expected.table["total_bytes"])
    _forget()
    capsys.readouterr()
    _run()
    assert capsys.readouterr().err == ""  # rewritten whole: the next run trusts it
    _forget()


def _cli(args, cache, block_sympy):
    """``python -m symbolic ARGS`` in a fresh process on ``cache``; ``block_sympy``: sympy made
    unimportable first (``sys.modules['sympy'] = None``), so any import of it fails the command."""
    import os
    import subprocess
    import sys

    guard = "import sys; sys.modules['sympy'] = None; " if block_sympy else ""
    code = guard + f"import sys; sys.argv = ['symbolic'] + {list(args)!r}; from symbolic.cli import main; sys.exit(main())"
    env = dict(os.environ, SYMBOLIC_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("args", [
    ["plan", "gpt-7b", "--gpus", "16", "--gpu-memory", "80GB", "--global-batch", "32", "--top", "3"],
    ["plan", "gpt-7b", "--gpus", "16", "--gpu-memory", "80GB", "--global-batch", "32", "--json"],
    ["bill", "gpt-7b"],
], ids=["plan-text", "plan-json", "bill"])
def test_a_cold_cached_plan_and_bill_never_import_sympy(tmp_path, args):
    """Issue 24's cold path: once the cache holds a command's formulas, a fresh process answers it
    with sympy unimportable — the same output, byte for byte, as the process that derived them
    (but the plan's measured "evaluated in N ms")."""
    import re

    first = _cli(args, tmp_path, block_sympy=False)
    assert first.returncode == 0, first.stderr
    second = _cli(args, tmp_path, block_sympy=True)
    assert second.returncode == 0, second.stderr
    timing_free = lambda text: re.sub(r"evaluated in [0-9,]+ ms", "evaluated in N ms", text)  # noqa: E731
    assert timing_free(second.stdout) == timing_free(first.stdout) and len(first.stdout) > 200
