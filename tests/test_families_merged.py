"""The composed families under main's machinery: the reader's hardening, the expert grid,
the verdict, plan and derive (the seams of the families / main merge)."""
from __future__ import annotations

import json

import pytest

from symbolic.bill.derive import make_bill, structure, structure_has_experts, structure_output_norm
from symbolic.cli import main
from symbolic.core.tensors import Group
from symbolic.layout.layout import Layout
from symbolic.models import hf
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.search.plan import plan

from test_hf import _error, _llama


# --- the reader: families' exact handling, main's refusals kept -----------------------------

def test_experts_on_a_dense_family_are_refused():
    message = _error(_llama(num_local_experts=8, num_experts_per_tok=2))
    assert "num_local_experts = 8" in message and "dense family" in message and "mixtral" in message


def test_quantization_and_foreign_mtp_fields_are_stated():
    raw = _llama(quantization_config={"quant_method": "fp8"}, mtp_num_layers=1)
    notes = hf.from_hf_dict(raw, "x").approximations
    assert any(note.startswith("quantization_config (fp8)") for note in notes)
    assert any("1 multi-token-prediction layer(s)" in note for note in notes)


def test_deepseek_v3_mtp_is_stated_once_exactly():
    notes = preset("deepseek-v3").approximations
    assert sum("multi-token" in note for note in notes) == 1
    assert any("11,610,067,968" in note for note in notes)  # families' exact size, not main's generic line


def test_a_hostile_symbolic_block_is_refused(tmp_path):
    """Issue 22: a `_symbolic` that is not an object was ignored; it is refused, naming it."""
    raw = json.loads((hf.DATA / "qwen3-8b.json").read_text())
    raw["_symbolic"] = ["not", "an", "object"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match=r"_symbolic = \[.not., .an., .object.\]: symbolic's own metadata"):
        hf.load_hf_config(path)


# --- the composed MoE on the expert grid ----------------------------------------------------

@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3"])
def test_composed_moe_tags_the_expert_activation_as_main_does(name):
    from symbolic.bill.derive import inventories

    _, saved, _ = inventories(preset(name))
    groups = {term.name: term.group for term in saved}
    assert groups["moe/expert/act_output"] is Group.EXPERT_ACTIVATION
    assert groups["moe/expert/down_input"] is Group.EXPERT_ACTIVATION_OUTPUT
    assert structure_has_experts(structure(preset(name)))


def test_expert_parallel_splits_a_composed_moe_and_fused_swiglu_drops_its_activation():
    model = preset("qwen3-30b-a3b")
    base = Layout(tp=2, sp=True, dp=4, seq=4096)
    dense, split = make_bill(model, base), make_bill(model, Layout(tp=2, sp=True, dp=4, ep=4, seq=4096))
    assert split.totals["model_states_bytes"] < dense.totals["model_states_bytes"]
    assert split.totals["params_per_gpu"] < dense.totals["params_per_gpu"]
    fused = make_bill(model, Layout(tp=2, sp=True, dp=4, seq=4096, fused_swiglu=True))
    assert fused.totals["activation_bytes"] < dense.totals["activation_bytes"]


def test_dense_composed_models_refuse_expert_options():
    with pytest.raises(ConfigError, match="no routed experts"):
        make_bill(preset("gemma-2-9b"), Layout(dp=2, ep=2))


def test_output_norm_follows_the_recipe():
    assert structure_output_norm(structure(preset("gemma-2-9b"))) == "rmsnorm-eager"
    assert structure_output_norm(structure(preset("gpt-7b"))) == "layernorm"


# --- plan and derive ------------------------------------------------------------------------

@pytest.mark.parametrize("name, gpus", [("gemma-2-9b", 8), ("qwen3-30b-a3b", 8)])
def test_plan_of_a_composed_model_is_the_bill(name, gpus):
    """The families' letters (d_h, L_d, ...) are among plan's arguments; the best layout's verdict is the bill's."""
    model = preset(name)
    result = plan(model, gpus, 80 * 10**9, seq=2048, max_micro_batch=2, fixed={"tp": 2, "ep": 1})
    best = result.ranked(1)[0]
    assert best.totals["total_bytes"] == make_bill(model, best.layout).totals["total_bytes"]


def test_derive_states_of_a_composed_moe_is_on_the_expert_grid(capsys):
    assert main(["derive", "states", "--model", "deepseek-v3", "--ep"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("states.experts_per_gpu") and "e*p*t" in out and "L_d" in out
