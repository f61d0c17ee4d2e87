"""The Python API (symbolic.api, issue 13): one function per command, whose
result prints the command's summary, renders in Jupyter, and whose to_dict()
is exactly the command's --json; bad arguments raise ConfigError with the
CLI's own message."""
import json

import pytest

import symbolic
from symbolic.cli import main
from symbolic.models.builtin import preset
from symbolic.layout.layout import Layout


def _cli_json(argv, capsys) -> dict:
    assert main(argv + ["--json"]) in (0, 1)
    return json.loads(capsys.readouterr().out)


def _cli_error(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    prefix = f"symbolic {argv[0]}: error: "
    assert err.startswith(prefix) and "\n" not in err
    return err[len(prefix):]


def test_bill_as_the_issue_writes_it(capsys):
    # the bill's own defaults (framework none): t = 8 of an HF config otherwise assumes megatron-core's
    bill = symbolic.bill("llama-2-7b", tp=8, seq=4096, gpu_memory="80GB", framework="none")
    assert isinstance(bill, symbolic.Bill) and bill.fits is True
    assert bill.to_dict() == _cli_json(["bill", "llama-2-7b", "--tp", "8", "--seq", "4096",
                                        "--gpu-memory", "80GB", "--framework", "none"], capsys)
    # llama-2-7b at t = 8, s = 4096: 13.48 GB of states + 10.57 GB of activations per GPU
    assert bill.to_dict()["paper_total_bytes"] == 24_049_623_040  # the papers' total
    assert bill.total_bytes == bill.to_dict()["total_bytes"] > 24_049_623_040  # the verdict: the step's peak
    text = str(bill)
    assert text.splitlines()[0].startswith("llama-2-7b")
    from symbolic.core.units import fmt
    total, head = bill.total_bytes, bill.headroom_bytes
    from fractions import Fraction
    assert (f"VERDICT: FITS in 80.00 GB: {fmt(total, 'GB')} per GPU ({fmt(Fraction(total, 80 * 10**9), '%', 1)}), "
            f"headroom {fmt(head, 'GB')}") in text
    assert max(map(len, text.splitlines())) <= 80
    assert bill.totals["model_states_bytes"] == bill.engine.totals["model_states_bytes"]  # the engine's bill


def test_str_is_the_clis_summary(monkeypatch, capsys):
    argv = ["bill", "gpt-7b", "--micro-batch", "4", "--tp", "8", "--sp", "--params", "7B", "--gpu-memory", "80GB"]
    monkeypatch.setenv("COLUMNS", "80")
    main(argv + ["--brief"])
    brief = capsys.readouterr().out.splitlines()
    bill = symbolic.bill("gpt-7b", micro_batch=4, tp=8, sp=True, params="7B", gpu_memory="80GB")
    summary = str(bill).splitlines()
    assert brief[: len(summary)] == summary
    assert bill.to_dict() == _cli_json(argv, capsys)


def test_notebook_reprs():
    bill = symbolic.bill("gpt-7b", micro_batch=8, tp=8, sp=True, params="7B", gpu_memory="80GB")
    html = bill._repr_html_()
    from symbolic.core.units import fmt
    assert f"DOES NOT FIT in 80.00 GB: {fmt(bill.total_bytes, 'GB')} per GPU" in html and "<details>" in html
    assert "background:#d62728" in html  # the part over the GPU's memory
    latex = bill._repr_latex_()
    assert latex.startswith("$") and latex.endswith("$")
    # the verdict's instant, part by part (the summary's "total = parts"; tests/test_fits_defaults.py)
    parts = [value for value in bill.to_dict()["verdict_parts"].values() if value]
    assert " + ".join(fmt(value, "GB").replace(" GB", r"\,\mathrm{GB}") for value in parts) + \
        r" = 120.18\,\mathrm{GB} > 80.00\,\mathrm{GB}" in latex


def test_plan_solve_timeline_derive_equal_their_json(capsys):
    plan = symbolic.plan("gpt-175b", gpus=64, gpu_memory="80GB", global_batch=64, top=3)
    cli = _cli_json(["plan", "gpt-175b", "--gpus", "64", "--gpu-memory", "80GB", "--global-batch", "64",
                     "--top", "3"], capsys)
    assert plan.to_dict() == cli and plan.best == cli["layouts"][0]
    verdict = next(line for line in str(plan).splitlines() if line.startswith("VERDICT"))  # after the header
    assert verdict.startswith(f"VERDICT: {cli['fitting']:,} of {cli['evaluated']:,} valid layouts fit")

    fixed = symbolic.plan("gpt-175b", gpus=64, gpu_memory="80GB", tp=8, pp=8, sp=True, recompute="selective")
    assert fixed.to_dict() == _cli_json(["plan", "gpt-175b", "--gpus", "64", "--gpu-memory", "80GB", "--tp", "8",
                                         "--pp", "8", "--sp", "--recompute", "selective"], capsys)

    solve = symbolic.solve("gpt-7b", max="micro-batch", tp=8, sp=True, seq=4096, params="7B", gpu_memory="80GB")
    assert solve.answer == 4  # seed 001's 7B at s = 4096: b = 4 by the verdict (the papers' total allows 5; README)
    assert solve.to_dict() == _cli_json(["solve", "gpt-7b", "--max", "micro-batch", "--tp", "8", "--sp", "--seq",
                                         "4096", "--params", "7B", "--gpu-memory", "80GB"], capsys)

    timeline = symbolic.timeline("gpt-7b", seq=2048, tp=8, sp=True, dp=8, zero=1, recompute="full",
                                 optimize=["flash-attention"], gpu_memory="80GB")
    assert timeline.to_dict() == _cli_json(["timeline", "gpt-7b", "--seq", "2048", "--tp", "8", "--sp", "--dp", "8",
                                            "--zero", "1", "--recompute", "full", "--optimize", "flash-attention",
                                            "--gpu-memory", "80GB"], capsys)
    assert "VERDICT: FITS in 80.00 GB" in str(timeline)

    derivation = symbolic.derive("activations", tp=True, sp=True)
    assert derivation.to_dict() == _cli_json(["derive", "activations", "--tp", "--sp"], capsys)
    from sympy import expand

    from symbolic.core.dims import L, a, b, h, s, t  # noqa: F401
    assert expand(derivation.expr - (s * b * h / t) * (34 + 5 * a * s / h)) == 0  # Korthikanti Eq 4
    assert derivation._repr_latex_().startswith("$")
    at_model = symbolic.derive("flops", model="gpt-175b")
    assert at_model.to_dict() == _cli_json(["derive", "flops", "--model", "gpt-175b"], capsys)


@pytest.mark.parametrize("call, argv", [
    (lambda: symbolic.bill("gpt-7b", gpu_memory="80"), ["bill", "gpt-7b", "--gpu-memory", "80"]),
    (lambda: symbolic.bill("gpt-7b", params="seven"), ["bill", "gpt-7b", "--params", "seven"]),
    (lambda: symbolic.bill("gpt-7b", tp=3), ["bill", "gpt-7b", "--tp", "3"]),
    (lambda: symbolic.bill("no-such-model"), ["bill", "no-such-model"]),
    (lambda: symbolic.bill("gpt-7b", pp=3), ["bill", "gpt-7b", "--pp", "3"]),
    (lambda: symbolic.solve("gpt-7b", max="seq", tp=8, gpu_memory="80GB", margin="120%"),
     ["solve", "gpt-7b", "--max", "seq", "--tp", "8", "--gpu-memory", "80GB", "--margin", "120%"]),
    (lambda: symbolic.timeline("gpt-7b", cp=2), ["timeline", "gpt-7b", "--cp", "2"]),
])
def test_bad_arguments_raise_config_error_with_the_clis_message(call, argv, capsys):
    with pytest.raises(symbolic.ConfigError) as caught:
        call()
    assert str(caught.value) == _cli_error(argv, capsys)


@pytest.mark.parametrize("call", [
    lambda: symbolic.bill("gpt-7b", tp="x"),
    lambda: symbolic.bill("gpt-7b", sp="yes"),
    lambda: symbolic.bill("gpt-7b", gpu_memory=80.5),
    lambda: symbolic.bill(42),
    lambda: symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", colour="red"),
    lambda: symbolic.derive("activations", recompute="sometimes"),
    lambda: symbolic.derive("activations", teleport=True),
    lambda: symbolic.solve("gpt-7b", max="heads", gpu_memory="80GB"),
    lambda: symbolic.bill("gpt-7b", tensor_parallel=8),  # Python alone would raise TypeError
    lambda: symbolic.bill("gpt-7b", 8),
    lambda: symbolic.plan("gpt-7b", gpu_memory="80GB"),  # gpus missing
])
def test_wrong_types_and_names_are_config_errors(call):
    with pytest.raises(symbolic.ConfigError) as caught:
        call()
    assert "\n" not in str(caught.value)


def test_make_bill_refuses_text_sizes_with_a_config_error():
    """The issue: make_bill(..., gpu_memory="80GB") raised TypeError deep in the engine."""
    with pytest.raises(symbolic.ConfigError, match="gpu_memory '80GB'.*symbolic.bill"):
        symbolic.make_bill(preset("gpt-7b"), Layout(tp=8), gpu_memory="80GB")


def test_symbolic_bill_is_still_the_package():
    import symbolic.bill.cache  # noqa: F401
    from symbolic.bill.derive import make_bill

    assert symbolic.bill.derive.make_bill is make_bill and callable(symbolic.bill)
