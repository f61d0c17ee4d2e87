"""The command line: bill, derive, check, and one clear line for bad input."""
import json
import subprocess
import sys

import pytest
from sympy import parse_expr

from symbolic.cli import main
from symbolic.core.dims import SYMBOLS
from symbolic.claims.quantities import evaluate


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_bill_json_7b_example(capsys):
    code, out, _ = run(capsys, "bill", "gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B",
                       "--gpu-memory", "80GB", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["activation_bytes"] == 52_076_478_464
    assert data["model_states_bytes"] == 14_000_000_000
    assert data["paper_total_bytes"] == 66_076_478_464  # seed 001 §1's 66.08 GB: states + activations
    # A papers' model runs Megatron's vocab-parallel cross-entropy by default: at the loss, the output
    # side (0.45 GB: the fp32 softmax 4Vbs/t, the bool target mask bs, the int64 masked targets 8bs)
    # and its work tensors (one bf16 Vbs/t tensor, the logits then their gradient, 0.21 GB, and three
    # fp32 statistics per row 12bs) — 0.42 GB less than transformers' eager loss, whose fp32 gradient
    # of the logits (4Vbs/t) is gone — so the step's peak moves to the last layer's attention backward.
    vbs_t, bs = 51200 * 4 * 4096 // 8, 4 * 4096
    # eager: the peak at the loss, with the fp32 gradient and nll's scalar 4 B — on the whole vocabulary on
    # every TP rank (transformers gathers the logits): (4 + 2 + 4)·Vbs·(1 − 1/t) above a vocabulary shard's
    sharded_eager = 67_225_865_220
    eager_total = sharded_eager + 10 * vbs_t * 7
    at_loss = sharded_eager - 4 * vbs_t + 12 * bs + bs - 4
    assert data["verdict_phase"] == "backward, last layer (attention half)"
    assert at_loss < data["total_bytes"] == 67_125_054_464 < eager_total
    assert data["headroom_bytes"] == 80_000_000_000 - 67_125_054_464
    assert data["layout"]["loss"] == "vocab-parallel"
    _, out, _ = run(capsys, "bill", "gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B",
                    "--gpu-memory", "80GB", "--json", "--loss", "eager")
    assert json.loads(out)["total_bytes"] == eager_total
    assert data["params"] == 6_670_655_488 and data["params_hand"] == 7_000_000_000
    for key in ("params_eq2", "flops_per_iteration", "model_flops_per_iteration", "lines"):
        assert key in data


def test_bill_counts_the_output_side_in_the_verdict_not_in_the_papers_total(capsys):
    code, out, _ = run(capsys, "bill", "gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--json",
                       "--loss", "eager")
    data = json.loads(out)
    # final LayerNorm input and logits input 2·(2bsh/t), fp32 mean/rstd 2·(4bs/t),
    # fp32 log-softmax 4Vbs (the whole vocabulary: transformers gathers the logits), int64 targets 8bs, one fp32 scalar
    assert data["output_side_bytes"] == 33_554_432 + 16_384 + 8 * 419_430_400 + 131_072 + 4
    assert data["paper_total_bytes"] == data["model_states_bytes"] + data["activation_bytes"]
    assert data["verdict_phase"] == "loss"
    assert data["total_bytes"] >= data["paper_total_bytes"] + data["output_side_bytes"]
    assert {line["name"] for line in data["lines"] if line["ledger"] == "output_side"} >= {
        "output/log_softmax", "output/targets"}


def test_bill_175b_interleaved_matches_seed_table(capsys):
    # the interleaved schedule's factor 1 + (p−1)/(pv) needs m > p micro-batches per iteration: 16 here
    code, out, _ = run(capsys, "bill", "gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--interleave", "3",
                       "--params", "175B", "--global-batch", "16", "--json")
    data = json.loads(out)
    assert (data["model_states_bytes"], data["activation_bytes"]) == (43_750_000_000, 44_468_011_008)


def test_bill_text_names_formula_source_and_unit(capsys):
    code, out, _ = run(capsys, "bill", "gpt-22b", "--tp", "8", "--sp", "--recompute", "selective")
    assert code == 0
    assert "attention/qkv_input" in out and "Korthikanti et al. 2022 §4.1" in out and " GB" in out
    assert "attention/softmax_output" not in out  # selective recompute drops it


def test_derive_json_parses_back(capsys):
    code, out, _ = run(capsys, "derive", "activations", "--tp", "--sp", "--json")
    data = json.loads(out)
    expr = parse_expr(data["expr"], local_dict=SYMBOLS)
    assert expr == evaluate("activations.per_layer", tensor_parallel=True, sequence_parallel=True)


def _derived(capsys, *argv):
    code, out, _ = run(capsys, "derive", *argv, "--json")
    assert code == 0
    return parse_expr(json.loads(out)["expr"], local_dict=SYMBOLS)


LLAMA2_7B = {"L": 32, "h": 4096, "a": 32, "g": 32, "V": 32000, "f": 11008}
MIXTRAL = {"L": 32, "h": 4096, "a": 32, "g": 8, "V": 32000, "E": 8, "k": 2, "E_s": 0, "f_e": 14336}


def test_derive_params_keeps_each_archs_defaults(capsys):
    """--arch llama/moe: untied, RoPE unless --tied/--learned is given; GPT: tied, learned."""
    at = lambda expr, values: expr.subs({SYMBOLS[k]: v for k, v in values.items()})
    llama = _derived(capsys, "params", "--arch", "llama")
    assert at(llama, LLAMA2_7B) == 6_738_415_616
    assert at(llama - _derived(capsys, "params", "--arch", "llama", "--tied"), LLAMA2_7B) == 32000 * 4096
    assert at(_derived(capsys, "params", "--arch", "moe"), MIXTRAL) == 46_702_792_704
    assert _derived(capsys, "params") == evaluate("params", tied=True, positions="learned")
    assert _derived(capsys, "params", "--untied", "--rope") == evaluate("params", tied=False, positions="rope")
    code, _, err = run(capsys, "derive", "params", "--arch", "llama", "--learned")
    assert code == 2 and err.count("\n") == 1 and "rotary positions" in err


def test_check_passes(capsys):
    code, out, _ = run(capsys, "check")
    assert code == 0 and "0 failed" in out


@pytest.mark.parametrize("argv, field", [
    (["bill", "gpt-9b"], "unknown model"),
    (["bill", "gpt-175b", "--tp", "7"], "heads (96) must be divisible by tp (7)"),
    (["bill", "gpt-175b", "--pp", "5"], "layers (96) must be divisible"),
    (["bill", "gpt-175b", "--tp", "0"], "--tp"),
    (["bill", "gpt-175b", "--tp", "2.5"], "--tp"),
    (["bill", "gpt-175b", "--gpu-memory", "80"], "--gpu-memory"),
    (["bill", "gpt-175b", "--params", "lots"], "--params"),
    (["bill", "gpt-175b", "--optimizer", "lion"], "--optimizer"),
    (["bill", "gpt-175b", "--interleave", "3"], "interleave needs a pipeline"),
    (["derive", "memory"], "unknown quantity"),
])
def test_bad_input_is_one_line_and_nonzero(argv, field):
    done = subprocess.run([sys.executable, "-m", "symbolic", *argv], capture_output=True, text=True)
    assert done.returncode == 2
    assert field in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_derive_with_a_model_picks_its_inventory_and_substitutes_its_dimensions(capsys):
    code, out, _ = run(capsys, "derive", "params", "--model", "tests/fixtures/hf/Llama-2-7b-hf/config.json", "--json")
    data = json.loads(out)
    assert code == 0 and data["options"]["arch"] == "llama"
    assert data["at_model"] == "6738415616"  # Llama-2-7B's published count
    code, out, _ = run(capsys, "derive", "activations", "--tp", "--sp", "--model", "gpt-7b", "--json")
    at = parse_expr(json.loads(out)["at_model"], local_dict=SYMBOLS)
    assert at.subs({SYMBOLS["b"]: 4, SYMBOLS["t"]: 8}) * 32 == 52_076_478_464  # seed 001's 7B: 52.08 GB


def test_derive_refuses_an_arch_that_contradicts_the_model():
    done = subprocess.run([sys.executable, "-m", "symbolic", "derive", "activations", "--model", "gpt-175b",
                           "--arch", "llama"], capture_output=True, text=True)
    assert done.returncode == 2 and "contradicts --model gpt-175b" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_an_output_is_probed_before_the_work_and_left_as_it_was(tmp_path):
    """``check_output`` opens the named file before a command's work (the calculator page takes seconds):
    a new name is created and removed again, an existing file is not changed, and a place the filesystem
    refuses even to root (sysfs) is one ConfigError naming the field, not a failure after the work."""
    import os

    from symbolic.commands._options import check_output
    from symbolic.models.config import ConfigError

    new = tmp_path / "page.html"
    assert check_output(str(new)) == new and not new.exists()
    old = tmp_path / "old.html"
    old.write_text("kept")
    before = os.stat(old).st_mtime_ns
    check_output(str(old))
    assert old.read_text() == "kept" and os.stat(old).st_mtime_ns == before
    if os.path.isdir("/sys/kernel"):
        with pytest.raises(ConfigError, match=r"--output '/sys/kernel/symbolic-test\.html'"):
            check_output("/sys/kernel/symbolic-test.html")


def test_an_option_prefix_is_not_read_as_the_option_it_starts(capsys):
    """argparse's default took `bill --gpus 8` as `--gpus-per-node 8` and billed one GPU with exit 0;
    prefixes are refused, and plan's --gpus typed to bill gets the fix in its line."""
    assert main(["bill", "gpt-7b", "--gpus", "8"]) == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --gpus 8" in err and "give --dp" in err and err.count("\n") == 1
    assert main(["bill", "gpt-7b", "--micro", "2"]) == 2
    assert "unrecognized arguments: --micro 2" in capsys.readouterr().err
