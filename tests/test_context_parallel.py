"""Context parallelism (c) as a layout dimension: the strategy, the bill, the plan, and bad input."""
import json
import random

import pytest
from sympy import Integer, Rational, cancel, expand

from symbolic.step import optimizations
from symbolic.layout import strategies
from symbolic.models.architectures import gpt
from symbolic.bill.derive import inventories, make_bill
from symbolic.claims.claims import check, load_all
from symbolic.cli import main
from symbolic.core.dims import a, b, c, h, s, t
from symbolic.layout.layout import Layout
from symbolic.ledgers import activations
from symbolic.models.config import ConfigError
from symbolic.models.builtin import preset
from symbolic.search.plan import exact_totals, plan
from symbolic.search.solve import solve_limit
from symbolic.layout.strategies import Strategy

GB = 10**9
TOTALS = ("params", "model_states_bytes", "activation_bytes", "total_bytes", "flops_per_iteration",
          "model_flops_per_iteration", "flops_per_gpu_per_iteration")
TP_SP_CP = Strategy(tensor_parallel=True, sequence_parallel=True, context_parallel=True)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- the strategy --------------------------------------------------------------

def test_tp_sp_cp_per_layer_is_korthikanti_eq4_over_c():
    """Each of the 34 sbh/t terms holds s/c tokens; the (b, a, s, s) scores keep all s keys, so the
    5as/h term shrinks once too: sbh/(t c) (34 + 5as/h)."""
    engine = activations.per_layer(TP_SP_CP)
    assert expand(engine - s * b * h / (t * c) * (34 + 5 * a * s / h)) == 0


@pytest.mark.parametrize("name", ["gpt-7b", "llama-2-7b", "mixtral-8x7b"])
def test_every_saved_tensor_shrinks_exactly_c_fold(name):
    """The shape rewrite divides each term once — tokens s, the tokens routed to an expert (∝ s),
    the query axis of a score matrix — whatever TP/SP did, for every inventory the bill uses."""
    saved = inventories(preset(name))[1]
    without = Strategy(tensor_parallel=True, sequence_parallel=True).apply(saved)
    with_cp = TP_SP_CP.apply(saved)
    assert with_cp.names() == without.names()
    for before, after in zip(without, with_cp):
        assert cancel(after.bytes / before.bytes) == 1 / c, before.name


def test_full_recompute_keeps_the_layer_input_as_it_arrives_divided_by_c():
    full = Strategy(tensor_parallel=True, sequence_parallel=True, recompute="full", context_parallel=True)
    assert activations.per_layer(full) == 2 * s * b * h / (c * t)  # SP: the rank's s/(c·t) tokens
    whole = Strategy(tensor_parallel=True, recompute="full", context_parallel=True)
    assert activations.per_layer(whole) == 2 * s * b * h / c  # TP alone: whole over t, divided by c
    selective = Strategy(tensor_parallel=True, sequence_parallel=True, recompute="selective", context_parallel=True)
    assert expand(activations.per_layer(selective) - 34 * s * b * h / (t * c)) == 0


def test_the_timeline_transform_is_the_strategy_and_seed_004_claims_still_hold():
    assert optimizations.context_parallel is strategies.context_parallel
    inventory = gpt.saved_tensors()
    assert (activations.total_bytes(optimizations.context_parallel(inventory, Integer(4)))
            == activations.total_bytes(inventory).xreplace({c: 4}) / 4
            == activations.per_layer(Strategy(context_parallel=True)).xreplace({c: 4}))
    results = {r.claim.id: r for r in map(check, load_all()) if r.claim.id.startswith("004/cp/")}
    assert set(results) == {"004/cp/cancellation", "004/cp/accumulation"}
    assert all(r.status == "reproduced" for r in results.values())


# --- the layout and the bill ------------------------------------------------------

def test_bill_gpt_7b_at_32k_tp8_sp_cp4_matches_hand_computed_bytes(capsys):
    # transformers' eager loss, whose bytes are hand-computed below (a papers' model's default is Megatron's)
    code, out, _ = run(capsys, "bill", "gpt-7b", "--seq", "32768", "--tp", "8", "--sp", "--cp", "4", "--json",
                       "--loss", "eager")
    data = json.loads(out)
    assert code == 0 and data["layout"]["cp"] == 4 and data["values"]["c"] == 4
    # per layer s b h/(t c) (34 + 5 a s/h) = 32768·4096/32 · (34 + 5·32·32768/4096) = 4,194,304 · 1,314; 32 layers
    assert data["activation_bytes"] == 32 * 4_194_304 * 1_314 == 176_362_094_592
    # 16 bytes per parameter, t = 8; the c ranks replicate the weights (no ZeRO)
    assert data["params"] == 6_788_096_000
    assert data["model_states_bytes"] == 16 * 6_788_096_000 // 8 == 13_576_192_000
    assert data["paper_total_bytes"] == 176_362_094_592 + 13_576_192_000
    assert data["total_bytes"] >= data["paper_total_bytes"] + data["output_side_bytes"]
    # the whole model's FLOPs do not change; per GPU they are spread over t·p·d·c = 32
    plain = make_bill(preset("gpt-7b"), Layout(seq=32768, tp=8, sp=True)).totals
    assert data["flops_per_iteration"] == plain["flops_per_iteration"]
    assert data["gpus"] == 32 and data["flops_per_gpu_per_iteration"] == plain["flops_per_iteration"] // 32
    assert data["tokens_per_iteration"] == 32768
    # output side: final-norm and logits inputs 2·2sbh/(tc), fp32 mean/rstd 2·4sb/(tc),
    # fp32 log-softmax 4Vsb/c (the eager loss on the gathered, whole vocabulary), int64 targets 8sb/c, one fp32 scalar
    assert data["output_side_bytes"] == (2 * 2 * 32768 * 4096 + 2 * 4 * 32768) // 32 \
        + (4 * 51200 * 32768 + 8 * 32768) // 4 + 4


def test_zero_shards_over_d_times_c_and_cp_1_is_unchanged():
    model = preset("gpt-7b")
    bill = make_bill(model, Layout(seq=8192, tp=2, dp=2, cp=4, zero=1))
    psi = bill.totals["params_for_states"]
    states = {line.name: line.value for line in bill.ledger("model_states")}
    assert states["Adam m (fp32)"] == Rational(4 * psi, 2 * 2 * 4)  # t·d·c
    assert states["bf16 parameters"] == Rational(2 * psi, 2)         # replicated over d and c
    # cp = 1: no c in any formula, the same numbers as a layout that never heard of cp
    one = make_bill(model, Layout(seq=8192, tp=2, dp=2, zero=1, cp=1))
    assert all(c not in line.expr.free_symbols for line in one.lines)
    assert one.totals == make_bill(model, Layout(seq=8192, tp=2, dp=2, zero=1)).totals


def test_derivation_key_names_context_parallelism():
    from symbolic.bill.evaluate import derivation_key
    model = preset("gpt-7b")
    assert derivation_key(model, Layout(cp=2))["context_parallel"] is True
    assert derivation_key(model, Layout())["context_parallel"] is False


@pytest.mark.parametrize("layout, message", [
    (Layout(cp=3), "seq (4096) must be divisible by cp (3)"),
    (Layout(seq=4096, tp=8, sp=True, cp=1024), "seq (4096) must be divisible by tp×cp (8×1024)"),
    (Layout(cp=0), "cp"),
])
def test_bad_cp_is_one_config_error(layout, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        layout.validate(preset("gpt-7b"))
    assert Layout(seq=4096, tp=8, sp=True, cp=512).is_valid(preset("gpt-7b"))


@pytest.mark.parametrize("argv, words", [
    (("bill", "gpt-7b", "--cp", "3"), "seq (4096) must be divisible by cp (3)"),
    (("timeline", "gpt-7b", "--cp", "2"), "the timeline does not model context parallelism"),
    (("plan", "gpt-7b", "--gpus", "64", "--gpu-memory", "80GB", "--cp", "3"), "no valid layout"),
    (("plan", "gpt-7b", "--gpus", "63", "--gpu-memory", "80GB", "--cp", "2"), "no valid layout"),
])
def test_bad_cp_on_the_command_line_is_one_line(capsys, argv, words):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_calculator_refuses_cp(capsys, tmp_path):
    code, _, err = run(capsys, "calculator", "--cp", "2", "--output", str(tmp_path / "page.html"))
    assert code == 2 and "no context-parallel input" in err and len(err.strip().splitlines()) == 1


# --- the plan and solve -----------------------------------------------------------

def test_plan_175b_at_32k_on_64_gpus_fits_only_with_context_parallelism():
    """GPT-3 175B at s = 32768 on 64 × 80 GB: no cp = 1 layout fits; the listed ones (all cp > 1)
    agree exactly with make_bill."""
    model = preset("gpt-175b")
    result = plan(model, 64, 80 * GB, seq=32768)
    listed = result.ranked(0)
    assert listed and all(item.layout.cp > 1 for item in listed)
    assert any(result.layout_at(i).cp == 1 for i in range(result.evaluated))  # swept, just not fitting
    for item in listed[:8]:
        bill = make_bill(model, item.layout, gpu_memory=80 * GB)
        for key in TOTALS:
            assert item.totals[key] == bill.totals[key], (item.layout, key)
        assert item.headroom_bytes == bill.totals["headroom_bytes"] >= 0


def test_plan_7b_long_sequence_lists_cp_layouts_that_agree_with_the_bill():
    model = preset("gpt-7b")
    result = plan(model, 64, 80 * GB, seq=32768, global_batch=64)
    listed = result.ranked(0)
    with_cp = [item for item in listed if item.layout.cp > 1]
    assert with_cp and {item.layout.cp for item in with_cp} >= {2, 4, 8}
    for item in random.Random(3).sample(with_cp, 12):
        lay = item.layout
        assert lay.tp * lay.pp * lay.dp * lay.cp == 64
        bill = make_bill(model, lay)
        for key in TOTALS:
            assert item.totals[key] == bill.totals[key], (lay, key)
    # the vectorised floats agree too, on layouts with and without cp
    for i in random.Random(4).sample(range(result.evaluated), 30):
        bill = make_bill(model, result.layout_at(i))
        assert result.table["total_bytes"][i] == pytest.approx(float(bill.totals["total_bytes"]), rel=1e-12)
    fixed = plan(model, 64, 80 * GB, seq=32768, global_batch=64, fixed={"cp": 4})
    assert {fixed.layout_at(i).cp for i in range(fixed.evaluated)} == {4}


@pytest.mark.parametrize("name", ["llama-2-7b", "mixtral-8x7b"])
def test_native_inventories_under_cp_agree_with_the_bill(name):
    model = preset(name)
    for layout in (Layout(seq=32768, tp=8, sp=True, cp=4, recompute="selective"),
                   Layout(seq=32768, tp=2, pp=2, dp=2, cp=2, zero=1, recompute="full", global_batch=8)):
        bill = make_bill(model, layout).totals
        exact = exact_totals(model, layout)
        for key in TOTALS:
            assert exact[key] == bill[key], (name, layout, key)


def test_cli_plan_json_carries_cp(capsys):
    code, out, _ = run(capsys, "plan", "gpt-175b", "--gpus", "64", "--gpu-memory", "80GB", "--seq", "32768",
                       "--top", "3", "--json")
    data = json.loads(out)
    assert code == 0 and all(item["cp"] > 1 for item in data["layouts"])
    assert "t·p·d·c = 64" in data["rules"]


def test_solve_seq_under_cp_steps_by_t_times_c():
    model = preset("gpt-7b")
    limit = solve_limit(model, Layout(tp=8, sp=True, cp=4, recompute="selective"), "seq", 80 * GB)
    assert limit.answer % 32 == 0 and limit.answer_fits() and limit.next_fits() is False
    assert c in limit.symbolic.free_symbols
    plain = solve_limit(model, Layout(tp=8, sp=True, recompute="selective"), "seq", 80 * GB)
    assert limit.answer > plain.answer


def test_cli_derive_cp(capsys):
    code, out, _ = run(capsys, "derive", "activations", "--tp", "--sp", "--cp", "--json")
    data = json.loads(out)
    assert code == 0 and data["options"]["context_parallel"] is True
    from symbolic.core.expressions import parse_formula
    from symbolic.core.dims import SYMBOLS
    assert expand(parse_formula(data["expr"], SYMBOLS) - s * b * h / (t * c) * (34 + 5 * a * s / h)) == 0
    code, out, _ = run(capsys, "derive", "activations", "--tp", "--sp", "--json")
    assert "context_parallel" not in json.loads(out)["options"]
