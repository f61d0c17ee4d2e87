"""Symbolic limits: the largest micro-batch or sequence length, solved exactly and checked by the bill."""
import json

import pytest
from sympy import Rational
from sympy import expand, sqrt

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.core.dims import b, s
from symbolic.layout.layout import Layout
from symbolic.models.config import ConfigError
from symbolic.models.builtin import preset
from symbolic.search.solve import solve_limit

GB = 10**9
SEVEN_B = 7 * 10**9  # seed 001 §1 hand-fills N = 7B


def total(model, layout, params_hand=None):
    return make_bill(model, layout, params_hand=params_hand).totals["total_bytes"]


def test_seed_7b_largest_micro_batch():
    """Seed 001 §1: 7B, TP = 8 (+SP, Eq 5), s = 4096: b = 4 fits 80 GB (66.08 GB by the papers' total), b = 8
    does not (104.15 GB of activations alone). By the papers' total b ≤ (80 − 14) GB / 13.02 GB per sequence
    gives b = 5; the verdict (the step's peak: at the loss, with transformers' eager loss on the whole vocabulary —
    its 10·V·b·s output side and work tensors — and the communication buffers) binds at b = 4 — b = 5 needs
    89.69 GB."""
    model, layout = preset("gpt-7b"), Layout(tp=8, sp=True, seq=4096)
    limit = solve_limit(model, layout, "micro_batch", 80 * GB, params_hand=SEVEN_B)
    assert limit.answer == limit.bound == 4 and limit.instant == "loss"
    assert limit.inequality() == "15124697088*b + 14067108868 <= 80000000000"
    constant = limit.polynomial.subs(b, 0)
    assert limit.root == (80 * GB - constant) / expand(limit.polynomial - constant).coeff(b)
    fits = lambda mb: total(model, Layout(micro_batch=mb, tp=8, sp=True, seq=4096), SEVEN_B) <= 80 * GB
    assert fits(4) and not fits(8)                  # the seed's two statements
    assert fits(limit.answer) and not fits(limit.answer + 1)
    assert limit.answer_fits() and limit.next_value == 5 and limit.next_fits() is False
    paper = make_bill(model, Layout(micro_batch=5, tp=8, sp=True, seq=4096), params_hand=SEVEN_B).totals
    assert paper["paper_total_bytes"] <= 80 * GB < paper["total_bytes"]  # where the two totals part


def test_seed_7b_largest_sequence_without_sp():
    """The s² attention term makes it quadratic; without SP every s is valid, so answer + 1 must not fit."""
    model = preset("gpt-7b")
    limit = solve_limit(model, Layout(micro_batch=4, tp=8), "seq", 80 * GB, params_hand=SEVEN_B)
    assert limit.inequality() == "2560*s**2 + 8929344*s + 14067108868 <= 80000000000"
    assert limit.root == (-139521 + sqrt(184298337271)) / 80
    assert limit.answer == limit.bound == 3622
    at = lambda seq: total(model, Layout(micro_batch=4, tp=8, seq=seq), SEVEN_B)
    assert at(limit.answer) <= 80 * GB < at(limit.answer + 1)
    assert expand(limit.polynomial.subs(s, limit.root)) == 80 * GB  # the root is exact


def test_seed_7b_largest_sequence_with_sp_steps_by_t():
    model = preset("gpt-7b")
    limit = solve_limit(model, Layout(micro_batch=4, tp=8, sp=True), "seq", 80 * GB, params_hand=SEVEN_B)
    assert limit.bound == 4306 and limit.answer == 4304 and limit.answer % 8 == 0
    at = lambda seq: total(model, Layout(micro_batch=4, tp=8, sp=True, seq=seq), SEVEN_B)
    assert at(limit.answer) <= 80 * GB < at(limit.answer + 8)
    for seq in range(limit.answer + 1, limit.answer + 8):  # not valid layouts under SP
        with pytest.raises(ConfigError, match="divisible by tp"):
            Layout(micro_batch=4, tp=8, sp=True, seq=seq).validate(model)
    assert limit.next_value == 4312 and limit.next_fits() is False


def test_config_count_makes_the_states_depend_on_seq():
    """Without --params the states use the config count, whose learned position table grows with s."""
    model = preset("gpt-22b")
    layout = Layout(micro_batch=1, tp=8, sp=True, recompute="selective", pp=1)
    limit = solve_limit(model, layout, "seq", 80 * GB)
    hand = solve_limit(model, layout, "seq", 80 * GB, params_hand=22 * 10**9)
    # Selective recompute drops the s² term from the layers held; at the peak only the layer being
    # back-propagated has one: its recomputed softmax output (2 B), dropout mask (1 B) and dropout output
    # (2 B) with the backward's dP and dS (2 B + 2 B), a·b·s²/t each: 9·64/8 = 72.
    # The position table adds h params per token, 16 B each, split t ways.
    assert limit.polynomial.coeff(s, 2) == 9 * 64 // 8
    assert limit.polynomial.coeff(s, 1) - hand.polynomial.coeff(s, 1) == 16 * 6144 // 8
    at = lambda seq: total(model, Layout(micro_batch=1, tp=8, sp=True, recompute="selective", seq=seq))
    assert at(limit.answer) <= 80 * GB < at(limit.next_value)
    assert limit.next_value == limit.answer + 8


def test_global_batch_restricts_the_micro_batch():
    model = preset("gpt-7b")
    layout = Layout(tp=8, sp=True, dp=2, global_batch=64)
    limit = solve_limit(model, layout, "micro_batch", 80 * 2**30, params_hand=SEVEN_B)
    assert limit.bound == 4 and limit.answer == 4 and limit.next_value == 8
    assert limit.answer_fits() and limit.next_fits() is False


def test_margin_is_subtracted():
    model = preset("gpt-7b")
    limit = solve_limit(model, Layout(tp=8, sp=True), "micro_batch", 80 * GB, margin=8 * GB, params_hand=SEVEN_B)
    assert limit.usable == 72 * GB and limit.answer == 3  # (72 - 14.07) / 15.12 = 3.83


def test_nothing_fits():
    limit = solve_limit(preset("gpt-175b"), Layout(), "micro_batch", 80 * GB)
    assert limit.answer is None and limit.bound is None and not limit.answer_fits()
    # The polynomial shown is the instant most over the memory at b = 1: the verdict's own total there.
    shown = limit.polynomial.xreplace({limit.symbol: 1})
    assert shown == Rational(limit.total_at_answer)


def test_bad_layout_names_the_field():
    with pytest.raises(ConfigError, match="divisible by tp"):
        solve_limit(preset("gpt-175b"), Layout(tp=7), "seq", 80 * GB)
    with pytest.raises(ConfigError, match="--max"):
        solve_limit(preset("gpt-7b"), Layout(), "layers", 80 * GB)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_carries_the_answer_and_inequality(capsys):
    # transformers' eager loss, as the library's Layout() above (a papers' model's CLI default is Megatron's)
    # and no margin (the CLI's default keeps the bill's 0.50 GB not-counted estimate)
    code, out, _ = run(capsys, "solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--sp", "--seq", "4096",
                       "--params", "7B", "--gpu-memory", "80GB", "--json", "--loss", "eager", "--margin", "0")
    data = json.loads(out)
    assert code == 0 and data["micro_batch"] == 4 and data["target"] == "micro_batch"
    assert data["margin_bytes"] == 0
    assert data["inequality"] == "15124697088*b + 14067108868 <= 80000000000"
    # transformers' eager loss on the whole vocabulary: 10·s·b·V·(1 − 1/t) above a vocabulary shard's
    assert data["check"] == {"value": 4, "total_bytes": 74_565_897_220, "fits": True, "next_value": 5,
                             "next_total_bytes": 89_690_594_308, "next_fits": False}
    code, out, _ = run(capsys, "solve", "gpt-7b", "--max", "seq", "--tp", "8", "--sp", "--micro-batch", "4",
                       "--params", "7B", "--gpu-memory", "80GB", "--json", "--loss", "eager", "--margin", "0")
    data = json.loads(out)
    assert code == 0 and data["seq"] == 4304 and "s**2" in data["inequality"]


def test_cli_text_and_exit_codes(capsys):
    code, out, _ = run(capsys, "solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--sp", "--params", "7B",
                       "--gpu-memory", "80 GiB")
    assert code == 0 and "largest micro-batch: b = 5" in out and "check (bill)" in out and "does not fit" in out
    code, out, _ = run(capsys, "solve", "gpt-175b", "--max", "seq", "--gpu-memory", "80GB")
    assert code == 1 and "NOTHING FITS" in out


@pytest.mark.parametrize("argv, message", [
    (["--max", "seq", "--gpu-memory", "80"], "give a number with a unit"),
    (["--max", "seq", "--gpu-memory", "8e10"], "give a number with a unit"),
    (["--max", "seq", "--gpu-memory", "80GB", "--tp", "7"], "divisible by tp"),
    (["--max", "seq", "--gpu-memory", "80GB", "--margin", "90GB"], "--margin"),
])
def test_cli_bad_input_is_one_line(capsys, argv, message):
    code, out, err = run(capsys, "solve", "gpt-7b", *argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_llama_sequence_limit_is_linear_with_the_fused_kernel():
    """Llama 2 7B keeps no s×s tensor (fused attention: the log-sum-exp per row), so the memory is
    linear in s; RoPE leaves the parameter count free of s. Checked by make_bill on both sides."""
    model, layout = preset("llama-2-7b"), Layout(micro_batch=1, tp=8, sp=True)
    limit = solve_limit(model, layout, "seq", 80 * GB)
    assert expand(limit.polynomial).as_poly(s).degree() == 1
    assert limit.answer % 8 == 0 and limit.answer_fits() and limit.next_value == limit.answer + 8
    assert total(model, Layout(micro_batch=1, tp=8, sp=True, seq=limit.answer)) <= 80 * GB
    assert total(model, Layout(micro_batch=1, tp=8, sp=True, seq=limit.next_value)) > 80 * GB


def test_mixtral_micro_batch_limit():
    model, layout = preset("mixtral-8x7b"), Layout(tp=8, pp=4, sp=True, seq=4096)
    limit = solve_limit(model, layout, "micro_batch", 80 * GB)
    assert limit.answer and limit.answer_fits() and limit.next_fits() is False
    assert total(model, Layout(micro_batch=limit.answer, tp=8, pp=4, sp=True, seq=4096)) <= 80 * GB


def test_the_default_margin_is_the_bills_not_counted_estimate(capsys):
    from symbolic.bill.evaluate import CUDA_CONTEXT_BYTES, default_margin
    assert default_margin() == CUDA_CONTEXT_BYTES == 500_000_000
    code, out, _ = run(capsys, "solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--sp",
                       "--params", "7B", "--gpu-memory", "80GB", "--json")
    data = json.loads(out)
    assert data["margin_bytes"] == 500_000_000 and data["usable_bytes"] == 79_500_000_000
    code, out, _ = run(capsys, "solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--sp",
                       "--params", "7B", "--gpu-memory", "80GB")
    assert out.splitlines()[0].endswith("fits in 79.50 GB per GPU (margin 0.50 GB)")
    code, out, _ = run(capsys, "solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--sp",
                       "--params", "7B", "--gpu-memory", "80GB", "--seq", "4096")
    assert "the bill's not-counted CUDA context and workspaces; --margin 0 drops it" in " ".join(out.split())
    code, out, _ = run(capsys, "plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB", "--json")
    assert json.loads(out)["margin_bytes"] == 500_000_000
    code, out, _ = run(capsys, "plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB", "--margin", "0", "--json")
    assert json.loads(out)["margin_bytes"] == 0


def test_a_rounded_memory_is_solved_exactly_not_an_internal_error(capsys):
    """Issue 39: torchtune's chunked loss makes the loss instant 1064460·s + 513024·ceiling(s/8) + const
    (one chunk's fp32 upcast, ceiling(s/8) rows), which sympy's solve refuses ("multiple generators");
    solve exited 3. The command as reported: bf16-adam's foreach step alone (20 B/param) is over an
    H200, so nothing fits — said with exit 1, and the bill agrees at s = 1."""
    argv = ["solve", "llama-3-8b", "--max", "seq", "--gpu", "h200", "--loss", "chunked", "--recompute", "full"]
    assert main([*argv, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    model = preset("llama-3-8b")
    assert data["seq"] is None and data["binding_instant"] == "optimizer step"
    usable = data["usable_bytes"]
    assert total(model, Layout(seq=1, loss="chunked", recompute="full")) > usable
    # with the fused optimizer step the rounded loss instant binds: bracketed with the ceiling relaxed
    # both ways, bisected on the exact expression; the bill fits at the answer and not at the next s
    assert main([*argv, "--optimizer-impl", "fused", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    answer = data["seq"]
    assert answer == 10646 and data["binding_instant"] == "loss"
    assert data["inequality"] == "1064460*s + 513024*ceiling(s/8) + 128484180000 <= 140500000000"
    lo, hi = data["bracket"]
    assert lo <= answer < hi + 1 and data["root"] is None
    fits = lambda seq: total(model, Layout(seq=seq, loss="chunked", recompute="full",
                                           optimizer_impl="fused")) <= usable
    assert fits(answer) and not fits(answer + 1)
    assert data["check"] == {"value": answer, "total_bytes": data["check"]["total_bytes"], "fits": True,
                             "next_value": answer + 1, "next_total_bytes": data["check"]["next_total_bytes"],
                             "next_fits": False}
    # the exact boundary by hand: the last s whose expression is within the usable bytes
    expr = lambda seq: 1064460 * seq + 513024 * -(-seq // 8) + 128484180000
    assert expr(answer) <= usable < expr(answer + 1)


def test_the_rounded_bisection_finds_the_exact_boundary_of_forms_sympy_cannot_solve():
    from sympy import Max, Symbol, ceiling

    from symbolic.search.solve import _largest_integer

    x = Symbol("x", positive=True, integer=True)
    # a rounding in a denominator turns the relaxed bounds around: the guesses are checked and widened
    expr = 1000 * x + 7 * ceiling(x / 3) + 50 * ceiling(x / ceiling(x / 5 + 1))
    bound, root, bracket = _largest_integer(expr, x, 10**6)
    assert root is None and bracket is not None
    assert expr.subs(x, bound) <= 10**6 < expr.subs(x, bound + 1)
    assert bound == max(n for n in range(2000) if expr.subs(x, n) <= 10**6)
    expr = 3 * x + Max(x, 10)  # sympy's solve raises NotImplementedError on Max: bisected the same way
    bound, _, _ = _largest_integer(expr, x, 1000)
    assert bound == 250 and expr.subs(x, 250) <= 1000 < expr.subs(x, 251)


@pytest.mark.parametrize("argv, flags, answer", [
    # issue 39: QLoRA 70B with Liger on two 40 GB cards: the frozen NF4 base alone is over; ZeRO-3 shards it
    (["llama-3.1-70b", "--max", "seq", "--lora", "16", "--base-dtype", "nf4", "--gpu-memory", "40GB",
      "--recompute", "full", "--loss", "liger", "--dp", "2"], "--zero 3", 9320),
    # the chunked-loss command of issue 39: bf16-adam's foreach step is over an H200; a fused step is not
    (["llama-3-8b", "--max", "seq", "--gpu", "h200", "--loss", "chunked", "--recompute", "full"],
     "--optimizer-impl fused", 10646),
])
def test_when_nothing_fits_solve_names_the_lever_that_makes_it_reachable(argv, flags, answer, capsys):
    assert main(["solve", *argv, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["seq"] is None and data["lever"]["flags"] == flags and data["lever"]["seq"] == answer
    assert main(["solve", *argv, "--brief"]) == 1
    assert f"nothing fits; `{flags}` would make s = {answer} reachable" in capsys.readouterr().out
    # applied as written: solve reaches that s, the bill fits there and not at the next s
    assert main(["solve", *argv, *flags.split(), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["seq"] == answer and again["lever"] is None
    assert again["check"]["fits"] and again["check"]["next_fits"] is False


def test_when_no_lever_makes_even_the_smallest_value_fit_solve_says_so(capsys):
    argv = ["solve", "llama-3.1-405b", "--max", "seq", "--gpu-memory", "2GB", "--lora", "16", "--base-dtype", "nf4"]
    assert main([*argv, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["lever"] is None
    assert main([*argv, "--brief"]) == 1
    assert "none of the bill's levers makes even that fit" in capsys.readouterr().out
