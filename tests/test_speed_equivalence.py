"""Speed changes of issue 24 that must not change an answer: each fast path against the plain one."""
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from symbolic.core import inputs

#: The string pattern json_depth used before the unrolled form.
PLAIN_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='"\\[]{}a\n', max_size=60))
def test_json_strings_unrolled_pattern_strips_what_the_plain_one_does(text):
    assert inputs._STRINGS.sub("", text) == PLAIN_STRINGS.sub("", text)


def test_json_depth_skips_brackets_inside_strings():
    assert inputs.json_depth('{"a": "[[[{{", "b": [1, {"c": "\\"]]"}]}') == 3
    assert inputs.json_depth('"\\\\" [ "\\\\\\"[" ]') == 1


def test_make_bill_from_the_disk_cache_is_the_derived_bill(tmp_path, monkeypatch):
    """make_bill reads a kind an earlier process derived (the CLI's cache): the same lines and totals."""
    from symbolic.bill import derive as D
    from symbolic.layout.layout import Layout
    from symbolic.models.builtin import preset

    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    cases = [(preset("gpt-175b"), Layout(tp=8, pp=8, dp=2, sp=True, recompute="selective", global_batch=64)),
             (preset("llama-3-8b"), Layout(tp=2, dp=4, zero=3, micro_batch=2)),
             (preset("mixtral-8x7b"), Layout(tp=2, ep=4, dp=4, sp=True, zero=1, global_batch=32))]
    monkeypatch.setattr(D, "_DERIVED", {})
    fresh = [D.make_bill(model, layout) for model, layout in cases]  # derived with sympy, written
    assert len(list(tmp_path.rglob("*.json"))) >= len(cases)
    monkeypatch.setattr(D, "_DERIVED", {})  # a new process: only the disk holds the kinds
    monkeypatch.setattr(D, "derive", None)  # no sympy derivation now: every kind read from the disk
    read = [D.make_bill(model, layout) for model, layout in cases]
    for a, b in zip(fresh, read):
        assert a.lines == b.lines and a.totals == b.totals and a.not_counted == b.not_counted
        assert [type(v) for v in a.totals.values()] == [type(v) for v in b.totals.values()]
