"""Hardware as data, the step-time model, the bill's TIME section and plan's ranking by it."""
import json
import re

import numpy as np
import pytest

from symbolic.bill.timing import step_time
from symbolic.cli import main
from symbolic.layout.layout import Layout
from symbolic.ledgers import hardware
from symbolic.ledgers.time import OVERLAPS, link
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError
from symbolic.search.plan import plan

GB = 10**9
A100 = hardware.load("a100-80gb")


def test_every_builtin_hardware_file_loads_with_a_source_for_each_figure():
    names = hardware.names()
    assert {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "gb200-nvl72"} <= set(names)
    for name in names:
        kind = hardware.load(name)
        for figure in list(hardware.FIGURES) + ["gemm_efficiency", "latency", "peak_fp8_flops"]:
            assert kind.sources.get(figure), (name, figure)
    assert hardware.load("gb200-nvl72").nvlink_domain == 72 and hardware.load("a100").name == "A100-SXM4-80GB"
    assert hardware.load().name == "A100-SXM4-80GB"  # the papers' GPU by default


def test_gemm_efficiency_is_a_step_function_of_the_call_size():
    eff = A100.efficiency(np.array([200e9, 20e9, 2e9, 1e6]))
    table = dict(A100.gemm_efficiency)
    assert list(eff) == [table[128e9], table[16e9], table[1e9], table[0.0]]
    assert eff[0] == pytest.approx(0.859)  # the measured A100 matmul ceiling


@pytest.mark.parametrize("edit, message", [
    ({"peak_bf16_flops": -1}, "peak_bf16_flops -1 is outside the plausible range 1e\\+12..1e\\+17 FLOP/s"),
    ({"peak_bf16_flops": 1e-300}, "peak_bf16_flops 1e-300 is outside the plausible range"),
    ({"peak_fp8_flops": 1e-300}, "peak_fp8_flops 1e-300 is outside the plausible range"),
    ({"internode_bandwidth": 1e-300}, "internode_bandwidth 1e-300 is outside the plausible range"),
    ({"nvlink_domain": 10**30}, "nvlink_domain an integer of 31 digits is outside the plausible range 1..100000"),
    ({"hbm_bytes": 1e-30}, "hbm_bytes 1e-30 is outside the plausible range 1e\\+09..1e\\+13 B"),
    ({"hbm_bandwidth": 10**400}, "hbm_bandwidth is an integer of 401 digits, beyond any stated range"),
    ({"nvlink_bandwidth": "300GB/s"}, "nvlink_bandwidth must be a number"),
    ({"gemm_efficiency": [[1e300, 0.9], [0, 0.5]]}, r"gemm_efficiency\[0\]\[0\] 1e\+300 is outside"),
    ({"name": "x" * 201}, "name is 201 characters"),
    ({"nvlink_domain": 7.5}, "nvlink_domain must be a whole number"),
    ({"hbm_efficiency": 1.5}, "hbm_efficiency 1.5 is outside the plausible range 0.01..1"),
    ({"gemm_efficiency": [[0, 0.5], [10, 0.9]]}, "thresholds must descend"),
    ({"latency": {"base": 1e-5}}, "latency.nvlink_step"),
    ({"name": ""}, "name must be a non-empty string"),
    ({"processor_usage": {"nvlink": 1.2}}, "processor_usage.nvlink 1.2 is outside the plausible range"),
    ({"processor_usage": {"pcie": 0.1}}, "processor_usage must be an object with nvlink, network"),
])
def test_a_bad_hardware_file_is_one_line_naming_the_field(tmp_path, capsys, edit, message):
    data = json.loads((hardware.HARDWARE_DIR / "a100-80gb.json").read_text())
    data.update(edit)
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=message):
        hardware.load(str(path))
    code = main(["bill", "gpt-7b", "--hardware", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and re.search(message, err) and len(err.strip().splitlines()) == 1


def test_a_hardware_name_is_escaped_like_a_config_name(tmp_path, capsys):
    """The issue: a name holding ANSI escapes reached the terminal raw in the TIME section."""
    data = json.loads((hardware.HARDWARE_DIR / "a100-80gb.json").read_text())
    data.update(name="evil\x1b]0;owned\x07\x1b[2J", note="\x1b[31mred")
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(data))
    assert hardware.load(str(path)).name == "evil\\x1b]0;owned\\x07\\x1b[2J"
    assert main(["bill", "gpt-7b", "--hardware", str(path)]) == 0
    out = capsys.readouterr().out
    assert "evil\\x1b]0;owned" in out and "\x1b" not in out and "\x07" not in out


def test_unknown_hardware_names_the_builtin_ones(capsys):
    assert main(["bill", "gpt-7b", "--hardware", "tpu-v9"]) == 2
    assert "a100-80gb" in capsys.readouterr().err


def test_placement_follows_megatron_rank_order():
    # t = 8 inside an 8-GPU node: NVLink at the NVLink bus bandwidth.
    _, bus, cross = link("t", "all-reduce", 8.0, 1.0, 8, A100)
    assert not cross and bus == pytest.approx(A100.nvlink_bandwidth * A100.nvlink_efficiency)
    # d = 32 with t = 8: one member per node, one NIC per GPU.
    _, bus, cross = link("d", "all-reduce", 32.0, 8.0, 8, A100)
    assert cross and bus == pytest.approx(A100.internode_bandwidth * A100.internode_efficiency)
    # d = 32 with t = 1: eight members per node share the node's eight NICs.
    _, bus, _ = link("d", "all-reduce", 32.0, 1.0, 8, A100)
    assert bus == pytest.approx(8 * A100.internode_bandwidth * A100.internode_efficiency)
    # NCCL's ring latency: base + intra-node steps × NVLink step + inter-node steps × network step.
    lat, _, _ = link("d", "all-gather", 32.0, 1.0, 8, A100)
    steps, inter = 31, 3
    assert lat == pytest.approx(A100.latency["base"] + (steps - inter) * A100.latency["nvlink_step"]
                                + inter * A100.latency["network_step"])
    # A 72-GPU NVLink domain keeps t·d = 72 on NVLink.
    _, _, cross = link("d", "all-reduce", 9.0, 8.0, 72, hardware.load("gb200-nvl72"))
    assert not cross


def _bill_step(layout, model="gpt-175b", **kw):
    return step_time(preset(model), layout, kw.pop("hw", A100), **kw)


def test_step_is_the_sum_of_its_parts_and_the_figures_follow():
    layout = Layout(micro_batch=1, tp=8, pp=8, dp=2, sp=True, recompute="selective", global_batch=128)
    step = _bill_step(layout)
    total = float(step.step_seconds)
    assert total == pytest.approx(sum(float(x) for x in step.breakdown.values()), rel=1e-12)
    assert float(step.tokens_per_second) == pytest.approx(128 * 2048 / total)
    assert float(step.mfu) == pytest.approx(float(step.model_tflops_per_gpu) * 1e12 / 312e12)
    assert float(step.hfu) > float(step.mfu)  # selective recompute adds hardware FLOPs
    bubble = float(step.breakdown["bubble"])
    assert bubble > 0 and float(step.factors["bubble_fraction"]) == pytest.approx(7 / 64)


def test_zero3_throughput_falls_as_d_grows_at_a_fixed_batch_and_ptdp_holds():
    """Narayanan et al. 2021 Table 2's direction: ZeRO-3 on 175B loses throughput as d grows at a fixed
    global batch (the ring's latency grows with d, the compute per micro-batch shrinks); PTD-P holds."""
    zero3 = [float(_bill_step(Layout(micro_batch=b, dp=d, zero=3, recompute="full", global_batch=1536))
                   .model_tflops_per_gpu) for b, d in ((4, 384), (2, 768), (1, 1536))]
    assert zero3[0] > zero3[1] > zero3[2]
    ptdp = [float(_bill_step(Layout(tp=8, pp=8, dp=d, recompute="full", global_batch=1536))
                  .model_tflops_per_gpu) for d in (6, 12, 24)]
    assert max(ptdp) / min(ptdp) < 1.1


def test_overlap_strategies_order_the_step():
    layout = Layout(micro_batch=1, tp=8, pp=1, dp=16, sp=True, recompute="selective", zero=1, global_batch=64)
    times = {name: float(_bill_step(layout, overlap=OVERLAPS[name]).step_seconds) for name in ("none", "default", "all")}
    assert times["none"] > times["default"] > times["all"]


def test_a_larger_nvlink_domain_moves_d_off_the_network():
    layout = Layout(micro_batch=1, tp=8, pp=1, dp=9, zero=1, recompute="full", global_batch=72)
    gb200 = hardware.load("gb200-nvl72")
    on_8 = _bill_step(layout, hw=gb200, gpus_per_node=8)
    on_72 = _bill_step(layout, hw=gb200, gpus_per_node=72)
    assert float(on_72.breakdown["dp_exposed"]) < float(on_8.breakdown["dp_exposed"])


def test_cli_bill_json_has_the_time_keys(capsys):
    code = main(["bill", "gpt-175b", "--tp", "8", "--pp", "8", "--sp", "--recompute", "selective",
                 "--global-batch", "64", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("step_seconds", "tokens_per_second", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu",
                "time_breakdown"):
        assert key in data
    assert data["step_seconds"] == pytest.approx(sum(data["time_breakdown"].values()), rel=1e-12)
    assert data["time_model"]["hardware"] == "A100-SXM4-80GB"
    assert data["paper_total_bytes"] == data["model_states_bytes"] + data["activation_bytes"]  # the memory keys stay


def test_cli_bill_text_prints_the_time_section(capsys):
    assert main(["bill", "gpt-7b", "--tp", "8", "--dp", "2", "--hardware", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "TIME (one iteration) on H100-SXM5-80GB" in out and "MFU" in out and "tp/forward" in out


def test_plan_step_equals_the_bill_step_for_the_same_layout():
    model = preset("gpt-175b")
    result = plan(model, 64, 80 * GB, global_batch=64)
    for item in result.ranked(5):
        assert item.step_seconds == pytest.approx(float(_bill_step(item.layout).step_seconds), rel=1e-9)


def test_plan_on_a_72_gpu_nvlink_domain_prefers_fewer_pipeline_stages():
    """Seed 004 §09: with NVLink domains of 72 GPUs the pipeline's bubble is no longer worth paying —
    once TP runs inside the domain with its communication overlapped (Megatron's --tp-comm-overlap,
    the seed's "TP/EP 整块放进同一个高带宽 NVLink 域"). With TP exposed (the default) both pick p = 4."""
    model = preset("gpt-175b")
    # GPT-3 as Megatron-LM trains it: the vocabulary-parallel loss (the CLI's default for the papers' models)
    common = dict(global_batch=1152, fixed={"zero": 1, "cp": 1}, overlap=OVERLAPS["all"], loss="vocab-parallel")
    b200 = plan(model, 576, 180 * GB, hardware=hardware.load("b200"), **common).ranked(1)[0]
    nvl72 = plan(model, 576, 180 * GB, hardware=hardware.load("gb200-nvl72"), gpus_per_node=72, **common).ranked(1)[0]
    # With the measured B200 GEMM efficiencies (ledgers.kernels: SimuMax's table, ~0.5 of peak at these
    # shapes) the compute window grows and the 8-GPU B200 node also pays no bubble: never more stages on NVL72.
    assert nvl72.layout.pp <= b200.layout.pp and nvl72.layout.pp == 1 and nvl72.layout.tp == 8


def test_derive_comm_volume_prints_the_terms_in_letters(capsys):
    assert main(["derive", "comm-volume", "--sp", "--pipeline", "--zero", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("communication.traffic [B] = ")
    for name in ("tp/attention/forward_all_gather", "tp/mlp/backward_input_regather", "pp/forward_send",
                 "dp/gradient_reduce_scatter", "dp/parameter_all_gather"):
        assert name in out
    assert "bytes/call 2*b*h*s" in out and "calls/iteration B*L/(b*d*p)" in out


def test_published_runs_are_priced_in_the_sources_flop_convention():
    """Narayanan's rows are compared in their Eq 3 (the full-recompute hardware FLOPs), the
    Megatron-Core rows in model FLOPs; what a source does not print the model chooses."""
    from symbolic.bill.derive import make_bill
    from symbolic.search import throughput

    rows = throughput.rows()
    assert len(rows) == 94
    first = throughput.predict(rows[0])            # Narayanan Table 1, GPT-1.7B on 32 A100s
    assert first.convention == "eq3" and "full recompute" in first.chosen and "overlap none" in first.chosen
    h100 = throughput.predict(next(r for r in rows if r["hardware"]["gpu_type"] == "H100 80GB"))
    assert h100.convention == "model" and "overlap all" in h100.chosen
    # The predicted figure is the convention's FLOPs per GPU over the modelled step.
    model = throughput._model(rows[0])
    b = int(first.chosen.split()[0][2:])
    layout = Layout(micro_batch=b, dp=32, recompute="full", global_batch=512)
    eq3 = make_bill(model, layout).totals["flops_per_gpu_per_iteration"]
    assert first.predicted == pytest.approx(float(eq3) / first.step_seconds / 1e12)


def test_the_one_liner_is_six_n_tokens_over_half_the_dense_peak():
    """The baseline every estimate must beat, counted independently: 6 × parameters × B·s per GPU
    at half the dense BF16 peak, in the source's own FLOPs."""
    from symbolic.search import throughput

    row = throughput.rows()[0]                      # Narayanan Table 1: GPT-1.7B, 32 A100s, B = 512, s = 2048
    first = throughput.predict(row)
    model = throughput._model(row)
    from symbolic.bill.derive import make_bill

    n = float(make_bill(model, Layout(dp=32, global_batch=512)).totals["params"])
    seconds = 6 * n * 512 * 2048 / 32 / (312e12 * 0.5)
    assert throughput.one_liner_seconds(6 * n * 512 * 2048 / 32, 312e12) == pytest.approx(seconds)
    counted = first.predicted * first.step_seconds * 1e12
    assert first.baseline == pytest.approx(counted / seconds / 1e12)


def test_published_rows_are_grouped_by_source_framework_and_kind():
    from symbolic.search import throughput

    rows = throughput.rows()
    assert throughput.source_of(rows[0]) == ("Narayanan 2021", "Megatron-LM 2021")
    zero3 = next(r for r in rows if "Table 2" in r["source"] and r["layout"]["zero"] == 3)
    assert throughput.source_of(zero3)[1] == "DeepSpeed ZeRO-3"
    kinds = {throughput.kind_of(r) for r in rows}
    assert kinds == {"dense", "MoE", "long context"}
    assert throughput.kind_of({"dims": {"s": 65536}}) == "long context"
    assert throughput.kind_of({"dims": {"s": 4096, "experts": 128}}) == "MoE"
    assert {throughput.source_of(r)[0] for r in rows} == {name for _, name, _ in throughput.SOURCES}


def test_what_the_time_model_leaves_out_is_printed(capsys):
    """An expert-parallel layout's all-to-all and uneven stages are not priced: the bill says so."""
    import json

    from symbolic.cli import main

    assert main(["bill", "mixtral-8x7b", "--ep", "8", "--dp", "8", "--json"]) == 0
    assert any("all-to-all" in item for item in json.loads(capsys.readouterr().out)["time_model"]["not_priced"])
    assert main(["bill", "gpt-7b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["time_model"]["not_priced"] == []
    assert main(["bill", "mixtral-8x7b", "--ep", "8", "--dp", "8"]) == 0
    assert "not priced: the expert-parallel all-to-all" in capsys.readouterr().out


def test_collectives_sharing_a_window_are_hidden_together_not_one_by_one():
    """ZeRO-3's backward gathers and gradient scatters run on one link behind one backward: their sum,
    not each class alone, is set against the window (each alone fits; together they do not)."""
    step = _bill_step(Layout(dp=1536, zero=3, recompute="full", micro_batch=1, global_batch=1536))
    zero3 = [line for line in step.comm_lines if line["class"].startswith("zero3")]
    total = sum(float(line["seconds"]) for line in zero3)
    compute = float(step.breakdown["compute"] + step.breakdown["elementwise"])
    assert all(float(line["seconds"]) < compute for line in zero3)
    exposed = float(step.breakdown["zero3_exposed"])
    assert exposed >= total - compute - 1e-9
    assert sum(float(line["exposed"]) for line in zero3) == pytest.approx(exposed)


def test_uneven_stages_are_paced_by_the_slowest_stage():
    """32 layers on 4 stages with 4 on the first and 4 on the last: the middle stages hold 12, 1.5×
    the L/p = 8 priced for even stages — their layers' compute paces the pipeline; plan agrees."""
    even = _bill_step(Layout(pp=4, global_batch=64), model="gpt-7b")
    uneven = _bill_step(Layout(pp=4, global_batch=64, first_stage_layers=4, last_stage_layers=4), model="gpt-7b")
    assert str(np.asarray(uneven.factors["pacing_stage"]).reshape(-1)[0]) == "middle"
    layers = float(even.breakdown["compute"] + even.breakdown["elementwise"])
    output = sum(float(x["seconds"]) for x in even.compute_lines if x["name"].startswith("output/")) + float(
        even.factors["output_elementwise_seconds"])  # the logits GEMM and the loss kernels: the last stage's own
    assert float(uneven.breakdown["compute"] + uneven.breakdown["elementwise"]) == pytest.approx(
        (layers - output) * 1.5)
    # the middle stages hold 3 micro-batches of 12 layers: 159.23 GB on stage 2 (the verdict checks every stage)
    result = plan(preset("gpt-7b"), 4, 200 * GB, global_batch=64, first_stage_layers=4, last_stage_layers=4,
                  fixed={"pp": 4, "micro_batch": 1, "interleave": 1, "recompute": "none", "sp": False, "zero": 0})
    best = result.ranked(1)[0]
    assert best.step_seconds == pytest.approx(float(uneven.step_seconds), rel=1e-9)


def test_a_hidden_collective_slows_the_compute_it_overlaps_by_its_share_of_the_sms():
    """Calculon's processor_usage: with TP comm overlapped, the step holds usage × the hidden TP time
    (NVLink, 0.15); a hardware file with usage 0 prices the same layout that much faster."""
    import dataclasses

    layout = Layout(micro_batch=1, tp=8, dp=2, sp=True, recompute="selective", zero=1, global_batch=16)
    step = _bill_step(layout, overlap=OVERLAPS["all"])
    tp = [line for line in step.comm_lines if line["class"].startswith("tp")]
    hidden_tp = sum(float(line["seconds"]) - float(line["exposed"]) for line in tp)
    assert hidden_tp > 0 and A100.processor_usage == {"nvlink": 0.15, "network": 0.02}
    dp = [line for line in step.comm_lines if line["class"].startswith("dp")]
    hidden_dp = sum(float(line["seconds"]) - float(line["exposed"]) for line in dp)
    assert float(step.breakdown["overlap_slowdown"]) == pytest.approx(0.15 * hidden_tp + 0.02 * hidden_dp)
    free = dataclasses.replace(A100, processor_usage={"nvlink": 0.0, "network": 0.0})
    unslowed = _bill_step(layout, overlap=OVERLAPS["all"], hw=free)
    assert float(unslowed.breakdown["overlap_slowdown"]) == 0
    assert float(step.step_seconds) - float(unslowed.step_seconds) == pytest.approx(
        float(step.breakdown["overlap_slowdown"]), rel=1e-9)


def test_the_loss_kernels_are_priced_on_the_last_stage_from_the_output_side_bytes():
    """The output side (fp32 log-softmax over s·b·V/t, final norm, targets) moves its bill bytes
    ELEMENTWISE_PASSES times per micro-batch at HBM speed, on the last stage only: with p = 2 and
    4 micro-batches per pipeline, 4 × 5 × the bill's output-side bytes / effective HBM bandwidth."""
    from symbolic.bill.derive import make_bill
    from symbolic.ledgers.time import ELEMENTWISE_PASSES

    layout = Layout(tp=2, pp=2, dp=1, sp=True, global_batch=4)
    model = preset("llama-3-8b")
    step = step_time(model, layout, A100)
    output_bytes = make_bill(model, layout).totals["output_side_bytes"]
    # The loss kernel at its own measured bandwidth: SimuMax's A100 'ce' kernel, 1600 GiB/s × 0.808 of the
    # A100 PCIe 80GB's 1,935 GB/s, as a fraction of this A100's HBM (ledgers.kernels; A100 SXM borrows it).
    hbm = A100.hbm_bandwidth * 1600 * 2**30 * 0.808 / 1.935e12
    assert float(step.factors["output_elementwise_seconds"]) == pytest.approx(
        4 * ELEMENTWISE_PASSES * output_bytes / hbm, rel=1e-12)
    assert float(step.breakdown["elementwise"]) > float(step.factors["output_elementwise_seconds"]) > 0
