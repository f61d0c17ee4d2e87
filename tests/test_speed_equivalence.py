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


def test_evaluate_with_templates_is_the_bill_of_fresh_lines():
    """evaluate's lines from per-derivation templates: equal to Line(...) built field by field, and the
    ledgers' totals their sums (ints where whole), on dense, MoE, pipelined and LoRA layouts."""
    from fractions import Fraction

    from symbolic.bill.derive import make_bill
    from symbolic.bill.evaluate import Line
    from symbolic.layout.layout import Layout
    from symbolic.models.builtin import preset

    cases = [(preset("gpt-175b"), Layout(tp=8, pp=8, dp=2, sp=True, recompute="selective", global_batch=64)),
             (preset("llama-3-8b"), Layout(tp=2, dp=4, zero=3, micro_batch=2)),
             (preset("mixtral-8x7b"), Layout(tp=2, ep=4, dp=4, sp=True, zero=1, global_batch=32)),
             (preset("llama-3-8b"), Layout(lora=16, base_dtype="nf4", dp=2))]
    for model, layout in cases:
        bill = make_bill(model, layout)
        for line in bill.lines:
            rebuilt = Line(line.ledger, line.name, line.formula, line.value, line.source, line.condition,
                           line.per_micro_batch, line.micro_batches)
            assert rebuilt == line and hash(rebuilt) == hash(line) and repr(rebuilt) == repr(line)
        for ledger, key in (("model_states", "model_states_bytes"), ("activations", "activation_bytes")):
            expected = sum((Fraction(line.value) for line in bill.ledger(ledger)), Fraction(0))
            assert bill.totals[key] == expected
            assert type(bill.totals[key]) is (int if expected.denominator == 1 else Fraction)
