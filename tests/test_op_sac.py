"""torchtitan's per-op selective activation checkpointing (``--recompute op-sac``, symbolic/layout/op_sac.py):
the saved bytes and recompute FLOPs follow from the policy applied to the layer's op list, the launch reader
takes torchtitan's default train config with it, and one rank of transformers' llama run under torchtitan's
own policy function (``torch.utils.checkpoint.create_selective_checkpoint_contexts``) saves what the bill says."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from sympy import expand

from symbolic.cli import main
from symbolic.core.dims import L, a, b, f, g, h, s, t
from symbolic.layout import op_sac
from symbolic.layout.launch import read_launch
from symbolic.layout.layout import Layout
from symbolic.layout.strategies import Strategy
from symbolic.ledgers import activations, communication, flops
from symbolic.models.architectures import llama
from symbolic.models.config import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "launch"


def per_layer(sp: bool):
    strategy = Strategy(tensor_parallel=True, sequence_parallel=sp, recompute="op-sac",
                        layer_matmuls=llama.matmuls(), sp_inputs="gathered")
    return activations.per_layer(strategy, llama.saved_tensors())


def test_the_llama_layer_keeps_its_input_the_odd_matmuls_and_the_attention_kernels_outputs():
    # input 2sbh (whole without SP) + wq 2sbh/t + wv 2sbgh/(at) + w1 2sbf/t + w2 2sbh (row-parallel: the partial
    # sum, whole) + SDPA's output 2sbh/t and log-sum-exp 4abs/t
    expected = (2 * s * b * h + 2 * s * b * h / t + 2 * s * b * g * h / (a * t) + 2 * s * b * f / t + 2 * s * b * h
                + 2 * s * b * h / t + 4 * a * b * s / t)
    assert expand(per_layer(False) - expected) == 0


def test_under_sequence_parallelism_the_input_is_sharded_and_both_reduce_scatters_are_kept():
    expected = (2 * s * b * h / t + 2 * s * b * h / t + 2 * s * b * g * h / (a * t) + 2 * s * b * f / t + 2 * s * b * h
                + 2 * s * b * h / t + 4 * a * b * s / t + 2 * (2 * s * b * h / t))
    assert expand(per_layer(True) - expected) == 0


def test_every_second_weight_matmul_is_recomputed_and_costs_one_forward_more():
    mms = llama.matmuls()
    assert op_sac.recomputed(mms) == {"layer/attention/key", "layer/attention/output", "layer/mlp/up"}
    extra = L * (2 * b * s * h * g * h / a + 2 * b * s * h * h + 2 * b * s * h * f)
    assert expand(flops.recompute_extra("op-sac", mms) - extra) == 0
    # a matmul taken alone reads its mark (the bill's and the time model's lines)
    marked = op_sac.mark(mms)
    alone = [flops.recompute_extra("op-sac", type(mms)((mm,))) for mm in marked]
    assert expand(sum(alone) - extra) == 0


@pytest.mark.parametrize("sp, again, not_again", [
    (True, "tp/attention/recompute_all_gather", "tp/attention/recompute_reduce_scatter"),
    (False, "tp/attention/recompute_all_reduce", None),
])
def test_the_collectives_outside_the_save_list_run_again(sp, again, not_again):
    names = [x.name for x in communication.terms(llama.parameters(), llama.saved_tensors(), llama.matmuls(),
                                                 sequence_parallel=sp, recompute="op-sac")]
    assert again in names and (not_again is None or not_again not in names)


def test_the_bill_prints_the_policy_and_its_lines(capsys):
    assert main(["bill", "llama-3-8b", "--recompute", "op-sac", "--tp", "2", "--sp", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = {line["name"] for line in data["lines"] if line["ledger"] == "activations"}
    assert {"attention/query_mm_output", "attention/value_mm_output", "mlp/gate_mm_output", "mlp/down_mm_output",
            "attention/sdpa_output", "attention/logsumexp", "attention/reduce_scatter_output",
            "mlp/reduce_scatter_output"} <= names
    assert "attention/key_mm_output" not in names and data["layout"]["recompute"] == "op-sac"


@pytest.mark.parametrize("argv, words", [
    (["bill", "gpt-7b", "--recompute", "op-sac"], "biased linear layers"),
    (["bill", "mixtral-8x7b", "--recompute", "op-sac"], "routes to experts"),
    (["bill", "gemma-2-9b", "--recompute", "op-sac"], "not the LLaMA-style"),
    (["bill", "llama-3-8b", "--recompute", "op-sac", "--lora", "8"], "adapter matmuls"),
    (["bill", "llama-3-8b", "--recompute", "op-sac", "--cp", "2"], "context parallelism"),
    (["plan", "llama-3-8b", "--gpus", "8", "--gpu", "h100", "--recompute", "op-sac"], "one layout at a time"),
    (["calculator", "--model", "llama-3-8b", "--recompute", "op-sac"], "symbolic timeline"),
])
def test_what_the_policy_is_not_modelled_on_is_refused_in_one_line(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err


def test_timeline_walks_the_policy(capsys):
    assert main(["timeline", "llama-3-8b", "--recompute", "op-sac", "--seq", "8192", "--brief"]) == 0
    assert "op-sac recompute" in capsys.readouterr().out


def test_torchtitans_llama3_8b_toml_is_read_with_its_per_op_policy():
    reading = read_launch("torchtitan", str(FIXTURES / "torchtitan_llama3_8b.toml"))
    assert reading.model_name == "llama-3-8b"
    assert reading.layout() == Layout(dp=1, zero=3, micro_batch=1, seq=8192, recompute="op-sac", dtype="bf16",
                                      optimizer="fp32-adam", optimizer_impl="fused", flash_attention=True)


def toml(option: str, mode: str = "selective") -> dict:
    return {"activation_checkpoint": {"mode": mode, "selective_ac_option": option}}


@pytest.mark.parametrize("option", ["0", "1"])
def test_every_block_checkpointed_by_the_layer_option_is_full_recompute(option):
    assert read_launch("torchtitan", toml(option)).layout().recompute == "full"


@pytest.mark.parametrize("option, words", [("3", "one block in 3"), ("ops", "'op' or a non-negative whole"),
                                           (2, "'op' or a non-negative whole")])
def test_the_other_selective_options_are_refused(option, words):
    with pytest.raises(ConfigError) as error:
        read_launch("torchtitan", toml(option))
    assert words in str(error.value)


def test_the_option_is_ignored_outside_selective_mode():
    reading = read_launch("torchtitan", toml("op", mode="full"))
    assert reading.layout().recompute == "full"
    assert "activation_checkpoint.selective_ac_option" in {row.option for row in reading.ignored}


def test_a_typed_recompute_wins_over_the_per_op_policy(capsys):
    assert main(["bill", "--from", "torchtitan", str(FIXTURES / "torchtitan_llama3_8b.toml"), "--recompute", "full",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layout"]["recompute"] == "full"


# Reality judges: one rank of transformers' llama under torchtitan's own policy function.
def _require_torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


@pytest.mark.parametrize("family, dims, tp, sp", [
    ("llama", "first", 1, False), ("llama", "second", 1, False), ("llama", "first", 2, False),
    ("llama", "first", 2, True), ("qwen3", "first", 2, True),
])
def test_one_rank_under_torchtitans_policy_saves_what_the_bill_says(family, dims, tp, sp):
    _require_torch()
    from symbolic import per_rank
    combination = per_rank.Combination(family, dims, tp, sp, "op-sac", rank=1 if tp > 1 else 0)
    measured, billed = per_rank.measure(combination), per_rank.billed(combination)
    assert measured.layer == billed.layer
    # the policy is what is measured: the same layer fully checkpointed keeps less, unchecked keeps more
    full = per_rank.billed(per_rank.Combination(family, dims, tp, sp, "full", rank=1 if tp > 1 else 0))
    none = per_rank.billed(per_rank.Combination(family, dims, tp, sp, "none", rank=1 if tp > 1 else 0))
    assert full.layer < measured.layer < none.layer


def test_the_recompute_window_is_the_block_re_run_but_for_the_cached_outputs():
    from symbolic.ledgers import peak
    strategy = Strategy(tensor_parallel=True, recompute="op-sac", layer_matmuls=llama.matmuls())
    window = peak.step_terms(strategy, llama.saved_tensors()).window_mlp.names()
    # the cached outputs (SDPA's log-sum-exp; w1's output, SiLU's input; wv's, V) are handed back, not re-created
    assert not {"attention/logsumexp", "mlp/gate_output", "attention/value", "attention/norm_input_fp32"} & set(window)
    assert {"attention/key", "attention/query", "mlp/up_output", "mlp/silu_output", "mlp/down_input"} <= set(window)


def test_the_api_takes_the_policy_through_the_option_schema():
    import symbolic
    bill = symbolic.bill("llama-3-8b", recompute="op-sac", seq=2048)
    full = symbolic.bill("llama-3-8b", recompute="full", seq=2048)
    assert bill.totals["activation_bytes"] > full.totals["activation_bytes"]
    with pytest.raises(ConfigError):
        symbolic.bill("mixtral-8x7b", recompute="op-sac")


@pytest.mark.parametrize("dims, tp, sp", [("first", 1, False), ("second", 2, True)])
def test_the_recompute_flops_counted_in_backward_are_the_bills(dims, tp, sp):
    _require_torch()
    from symbolic import per_rank
    from symbolic.bill.derive import make_bill
    from symbolic.models import hf

    combination = per_rank.Combination("llama", dims, tp, sp, "op-sac", rank=1 if tp > 1 else 0)
    s_, b_ = per_rank.TOKENS[dims]
    model = hf.from_hf_dict(per_rank.config("llama", dims), "per-rank llama")

    def flops_of(recompute):
        layout = Layout(micro_batch=b_, seq=s_, tp=tp, sp=sp, recompute=recompute, sp_inputs="gathered")
        return make_bill(model, layout).totals["flops_per_iteration"]
    billed = (flops_of("op-sac") - flops_of("none")) // per_rank.LAYERS
    # wk, wo and w3 run again, the cached wq, wv, w1, w2 and the attention kernel do not
    assert per_rank.recompute_flops(combination) == billed
