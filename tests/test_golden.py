"""The derived results in derivations/golden/ are what the engine derives now."""
import json

from symbolic.claims.golden import GOLDEN, derive_all


def test_golden_results_are_current():
    stored = json.loads(GOLDEN.read_text())
    fresh = derive_all()
    changed = sorted(k for k in fresh if stored.get(k) != fresh[k])
    assert changed == [], f"derived results changed: {changed}; review, then run `python -m symbolic.claims.golden`"
    assert sorted(stored) == sorted(fresh)


def test_golden_holds_the_paper_forms():
    stored = json.loads(GOLDEN.read_text())
    assert stored["activations/per_layer/tp_sp"]["paper_form"] == "(b*h*s/t)*(5*a*s/h + 34)"
    assert stored["states/bf16-adam/zero0"]["expr"] == "16*Psi/(p*t)"
