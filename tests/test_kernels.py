"""Kernel efficiencies measured by others (symbolic/ledgers/kernels.py), checked against the data
files read directly and against counts made here by hand."""
import json
import math

import pytest

from symbolic.layout.layout import Layout
from symbolic.ledgers import hardware, kernels
from symbolic.models.hf import builtin_models

DATA = kernels.KERNELS_DIR


def _rows(file: str, table: str) -> list:
    return json.loads((DATA / file).read_text())["tables"][table]["rows"]


def test_every_table_names_its_source_repository_path_and_commit():
    for file in ("b200.json", "a100-pcie.json"):
        tables = json.loads((DATA / file).read_text())["tables"]
        for name, table in tables.items():
            assert table["repository"] == "MooreThreads/SimuMax" and len(table["commit"]) == 40, (file, name)
            assert table["path"].startswith("configs/system/")
    assert len(_rows("a100-pcie.json", "gemm")) == 183 and len(_rows("b200.json", "gemm")) == 514
    ceilings = kernels.index()["ceilings"]
    assert ceilings["repository"] == "stas00/ml-engineering" and len(ceilings["commit"]) == 40
    # mamf-finder's table: efficiency = MAMF / theory.
    for row, theory in (("NVIDIA A100 SXM", 312), ("NVIDIA H100 SXM", 989), ("NVIDIA B200 SXM", 2250),
                        ("NVIDIA GB200 SXM", 2500)):
        figures = ceilings["rows"][row]
        assert figures["bf16"] == pytest.approx(figures["bf16_tflops"] / theory, abs=6e-4)


def test_a_measured_shape_gets_its_own_figure_and_another_the_nearest_in_log_space():
    tables = kernels.for_hardware("B200-180GB", 2.25e15)
    assert tables.approximation == "" and tables.scale == 1
    forward = [r for r in _rows("b200.json", "gemm") if r[0] == "forward"]
    _, m, n, k, eff = forward[0]
    assert float(tables.gemm_efficiency("forward", m, n, k)) == pytest.approx(min(eff, tables.ceiling))
    # An unmeasured shape: the row minimising Σ (log ratio)² over (m, n, k), found here by brute force.
    query = (3000, 7000, 5000)
    best = min(forward, key=lambda r: sum(math.log(q / x) ** 2 for q, x in zip(query, r[1:4])))
    assert float(tables.gemm_efficiency("forward", *query)) == pytest.approx(min(best[4], tables.ceiling))
    # Arrays of shapes, as plan passes them, give each its own nearest.
    many = tables.gemm_efficiency("forward", [m, 3000], [n, 7000], [k, 5000])
    assert list(many) == pytest.approx([min(eff, tables.ceiling), min(best[4], tables.ceiling)])


def test_a_kind_without_a_table_borrows_the_nearest_peak_scaled_by_the_mamf_ceilings():
    h100 = kernels.for_hardware("H100-SXM5-80GB", 989e12)
    # 989 TFLOP/s is nearer 2,250 (B200, log ratio 0.82) than 312 (A100 PCIe, 1.15).
    assert h100.measured_on == "B200" and h100.scale == pytest.approx(0.803 / 0.776)
    assert "borrowed from B200" in h100.approximation and "80.3% / 77.6%" in h100.approximation
    a100 = kernels.for_hardware("A100-SXM4-80GB", 312e12)
    assert a100.measured_on == "A100-PCIe-80GB" and a100.scale == pytest.approx(0.869 / 0.811)
    _, m, n, k, eff = next(r for r in _rows("a100-pcie.json", "gemm") if r[0] == "weight_gradient")
    assert float(a100.gemm_efficiency("weight_gradient", m, n, k)) == pytest.approx(min(eff * 0.869 / 0.811, 0.869))
    # FP8: the BF16 shape's figure × the kind's FP8 / BF16 mamf ceiling (H100: 70.9% / 80.3%).
    bf16 = float(h100.gemm_efficiency("forward", 4096, 8192, 8192))
    assert float(h100.gemm_efficiency("forward", 4096, 8192, 8192, "fp8")) == pytest.approx(bf16 * 0.709 / 0.803)
    # A GPU no ceiling row names (a user's file) has no tables: its own step function prices it.
    assert kernels.for_hardware("My-Accelerator", 1e15) is None


def test_memory_bound_kernels_read_simumax_bandwidth_as_a_fraction_of_the_datasheet():
    b200 = kernels.for_hardware("B200-180GB", 2.25e15)
    assert b200.memory_efficiency == pytest.approx(8000 * 2**30 * 0.666 / 8e12)
    assert b200.loss_memory_efficiency == pytest.approx(8000 * 2**30 * 0.3246108444537549 / 8e12)
    assert b200.kernel_latency == pytest.approx(30e-6)


def _time(model, layout, hw, **kw):
    from symbolic.bill.timing import step_time

    return step_time(model, layout, hw, **kw)


def test_fused_attention_is_its_own_kernel_dense_count_over_peak_times_the_table_figure():
    """Llama-3-8B (32 heads of 128, s = 4096, b = 1) on one B200: each layer's attention kernel runs
    forward 4·b·s²·h FLOPs (QKᵀ and ·V, dense count) and backward 10·b·s²·h (2.5×, the scores recomputed);
    the table's causal kernel at (seq 4096, 32 heads, dim 128) prices each as dense count / (peak × figure),
    i.e. the half it executes at half the figure."""
    model = builtin_models()["llama-3-8b"]
    hw = hardware.load("b200")
    layout = Layout(seq=4096, micro_batch=1, global_batch=1, recompute="none")
    step = _time(model, layout, hw)
    lines = {x["name"]: x for x in step.compute_lines}
    attention = [x for x in step.compute_lines if x["kernel"].startswith("attention")]
    assert {x["name"] for x in attention} >= {"layer/attention/scores", "layer/attention/context"}
    rows = [r for r in _rows("b200.json", "attention_forward") if r[1:3] == [4096, 32] and r[4] == 128]
    back = [r for r in _rows("b200.json", "attention_backward") if r[1:3] == [4096, 32] and r[4] == 128]
    e_f, e_b = rows[0][7], back[0][7]      # the first of the tied rows (kv 4 before kv 8), not contiguous
    assert not rows[0][6]
    b, s, h, L = 1, 4096, 4096, 32
    expected = L * (4 * b * s**2 * h / (2.25e15 * e_f) + 10 * b * s**2 * h / (2.25e15 * e_b))
    assert sum(float(x["seconds"]) for x in attention) == pytest.approx(expected, rel=1e-9)
    # The GEMM table is not used for it: the projection lines are GEMMs.
    assert lines["layer/attention/query"]["kernel"] == "gemm"


def test_a_weight_gemm_takes_each_pass_at_its_own_shape():
    """Llama-3-8B's query projection on one B200 (b·s = 4096 tokens, h = 4096): forward (4096, 4096, 4096),
    input gradient (m = tokens, n = K, k = N), weight gradient (m = N, n = K, k = tokens); each pass one
    third of the line's FLOPs at its own efficiency."""
    model = builtin_models()["llama-3-8b"]
    hw = hardware.load("b200")
    step = _time(model, Layout(seq=4096, micro_batch=1, global_batch=1, recompute="none"), hw)
    line = next(x for x in step.compute_lines if x["name"] == "layer/attention/query")
    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    e = [float(tables.gemm_efficiency(stage, 4096, 4096, 4096)) for stage in kernels.PASSES]
    flops = 3 * 2 * 4096 * 4096 * 4096 * 32
    assert float(line["flops_on_pacing_stage"]) == pytest.approx(flops)
    assert float(line["seconds"]) == pytest.approx(sum(flops / 3 / (2.25e15 * x) for x in e), rel=1e-9)
    assert "measured on B200" in step.factors["kernels"]


def test_without_tables_the_hardware_files_step_function_prices_as_before():
    model = builtin_models()["llama-3-8b"]
    hw = hardware.load("b200")
    layout = Layout(seq=4096, micro_batch=1, global_batch=1, recompute="none")
    from symbolic.bill.timing import letters, stored
    from symbolic.core.expressions import evaluate_formula
    from symbolic.ledgers.time import price

    text = stored(model, layout)
    values = letters(model, layout, params_count=8_000_000_000)
    numbers = [float(evaluate_formula(f, values)) for f in text.formulas]
    old = price(text.shell(), numbers, values, hw, detail=True, kernel_tables=False)
    line = next(x for x in old.compute_lines if x["name"] == "layer/attention/query")
    assert float(line["efficiency"]) == pytest.approx(float(hw.efficiency(line["gemm_flops_per_call"])))
    assert "step function" in old.factors["kernels"]


def test_the_shipped_error_bands_are_current_and_printed_beside_the_step(capsys):
    """symbolic/data/validation/error_bands.json is what benchmarks/error_bands.py computes from the shipped runs
    now (regenerate it after changing the model); the bill prints its GPU kind's band."""
    import runpy
    import sys

    from symbolic.bill import bands
    from symbolic.cli import main

    argv = sys.argv
    sys.argv = ["error_bands.py", "--check"]
    try:
        with pytest.raises(SystemExit) as done:
            runpy.run_path(str(bands.BANDS.parents[3] / "benchmarks" / "error_bands.py"), run_name="__main__")
    finally:
        sys.argv = argv
    assert done.value.code == 0, capsys.readouterr().out
    shipped = json.loads(bands.BANDS.read_text())
    h100 = next(b for b in shipped["bands"] if b["gpu"] == "H100-SXM5-80GB" and b["framework"] is None)
    assert main(["bill", "gpt-7b", "--hardware", "h100"]) == 0
    out = capsys.readouterr().out
    assert f"±{h100['mean_abs_error']:.0%} mean |error|" in out and f"on {h100['runs']} published" in out
    assert bands.describe("My-Accelerator") == "no published My-Accelerator run: not validated"
    pooled = bands.band("H100-SXM5-80GB", ("Megatron-Core", "NeMo"))
    rows = [b for b in shipped["bands"] if b["gpu"] == "H100-SXM5-80GB" and b["framework"] in ("Megatron-Core", "NeMo")]
    assert pooled["runs"] == sum(b["runs"] for b in rows)


def test_device_check_writes_a_table_the_reader_reads(tmp_path):
    """benchmarks/device_check.py's kernel table, from stand-in timings (one GEMM at 60 % of the peak,
    attention at 40 % of its dense count), read back by kernels.from_file with the same figures."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("device_check", kernels.KERNELS_DIR.parents[2] / "benchmarks" /
                                                  "device_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    peak = 989e12
    table = check.kernel_table("stand-in GPU", peak, 4.8e12, lambda m, n, k: 2 * m * n * k / (0.6 * peak),
                               lambda b, s, h, d: (2 * b * s * s * h * 2 * d / (0.4 * peak),
                                                   5 * b * s * s * h * 2 * d / (0.4 * peak)),
                               4000.0, 5e-6, "0" * 40)
    path = tmp_path / "kernels-h200.json"
    path.write_text(json.dumps(table))
    read = kernels.from_file(path, "H200-SXM-141GB", 0.803)
    assert read.measured_on == "stand-in GPU" and read.approximation == ""
    assert float(read.gemm_efficiency("weight_gradient", 4096, 4096, 8192)) == pytest.approx(0.6)
    assert float(read.attention_efficiency("backward", 4096, 32, 128)) == pytest.approx(0.4)
    assert read.memory_efficiency == pytest.approx(4000 * 2**30 / 4.8e12) and read.kernel_latency == pytest.approx(5e-6)


# --- NCCL collectives inside one node (SimuMax's B200 network figures) and NICs shared by rings -----------

#: MooreThreads/SimuMax configs/system/b200_bf16_ceperm.json @4dcaae51, networks.high_intra_node: the link
#: 900 GiB/s; all_gather efficient_factor 0.6735, latency_us 9.1828, fixed_latency_us 23.1049; all2all
#: 0.5968, 7.3039, fixed_latency_us_by_comm_num {2: 51.0578, 4: 19.2102, 8: 0}.
B200_LINK = 900 * 2**30


def test_a_collective_within_a_b200_node_takes_simumax_measured_bus_bandwidth_and_latency():
    """A TP all-gather of 8 ranks on one B200 node, counted by hand with SimuMax's compute_net_op_time:
    7 ring steps × 9.1828 µs + 23.1049 µs fixed, bytes × 7/8 at 900 GiB/s × 0.6735."""
    from symbolic.ledgers.time import link, stride

    hw = hardware.load("b200")
    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    lat, bus, cross = link("t", "all-gather", 8, stride("t", 8, 1, 1), 8, hw, tables.collectives)
    assert not bool(cross)
    assert float(lat) == pytest.approx((7 * 9.1828 + 23.1049) * 1e-6, rel=1e-12)
    assert float(bus) == pytest.approx(B200_LINK * 0.6735, rel=1e-12)
    message = 64 * 2**20                         # 64 MiB gathered: one call's alpha-beta time
    assert float(lat) + 7 / 8 * message / float(bus) == pytest.approx(87.3845e-6 + 7 / 8 * message / 650.8486e9,
                                                                       rel=1e-6)
    # all-to-all: the fixed latency SimuMax gives for 4 ranks; 3 ranks (none given) its fixed_latency_us, 0
    lat4, bus4, _ = link("ep", "all-to-all", 4, stride("ep", 1, 1, 1), 8, hw, tables.collectives)
    lat3, _, _ = link("ep", "all-to-all", 3, stride("ep", 1, 1, 1), 8, hw, tables.collectives)
    assert float(lat4) == pytest.approx((3 * 7.3039 + 19.2102) * 1e-6)
    assert float(lat3) == pytest.approx(2 * 7.3039e-6)
    assert float(bus4) == pytest.approx(B200_LINK * 0.5968)
    # without the table: the NCCL ring model of the hardware file (base + steps × NVLink step)
    lat_ring, bus_ring, _ = link("t", "all-gather", 8, 1.0, 8, hw)
    assert float(lat_ring) == pytest.approx(hw.latency["base"] + 7 * hw.latency["nvlink_step"])
    assert float(bus_ring) == pytest.approx(hw.nvlink_bandwidth * hw.nvlink_efficiency)


def test_rings_across_nodes_and_borrowing_kinds_keep_the_nccl_ring_model():
    from symbolic.ledgers.time import link

    hw = hardware.load("b200")
    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    lat, bus, cross = link("d", "all-reduce", 16, 1.0, 8, hw, tables.collectives)   # 2 nodes of 8
    assert bool(cross)
    # 2·15 ring steps, 2 of them between the nodes (out and back)
    assert float(lat) == pytest.approx(hw.latency["base"] + 28 * hw.latency["nvlink_step"]
                                       + 2 * hw.latency["network_step"])
    assert float(bus) == pytest.approx(min(hw.nvlink_bandwidth * hw.nvlink_efficiency,
                                           8 * hw.internode_bandwidth * hw.internode_efficiency))
    # the H100 borrows B200's kernel tables (nearest dense peak) but not its NVLink measurements
    h100 = hardware.load("h100-sxm")
    borrowed = kernels.for_hardware(h100.name, h100.peak_bf16_flops)
    assert borrowed.measured_on == "B200" and borrowed.approximation and borrowed.collectives == {}
    assert not any("networks." in source for source in borrowed.sources)
    assert any("networks." in source for source in tables.sources)
    assert "all-gather 651 GB/s" in tables.describe() and "NCCL" not in borrowed.describe()


def test_a_bill_on_b200_prices_its_tp_collectives_from_the_measured_table():
    """Llama-3-8B at t = 8 on one B200 node: every TP line's latency per call is SimuMax's for its
    collective at 8 ranks (2·7 steps for an all-reduce, 7 otherwise) and its bus bandwidth 900 GiB/s × efficiency."""
    model = builtin_models()["llama-3-8b"]
    hw = hardware.load("b200")
    step = _time(model, Layout(tp=8, sp=True, seq=4096, micro_batch=1, global_batch=1, recompute="none"), hw)
    figures = {"all-reduce": (0.7424, 5.5183, 22.2316, 14), "all-gather": (0.6735, 9.1828, 23.1049, 7),
               "reduce-scatter": (0.6731, 8.0325, 25.5604, 7)}
    tp_lines = [x for x in step.comm_lines if x["group"] == "t"]
    assert tp_lines
    for line in tp_lines:
        efficiency, per_step, fixed, steps = figures[line["collective"]]
        assert float(line["latency_per_call"]) == pytest.approx((steps * per_step + fixed) * 1e-6, rel=1e-9)
        assert float(line["bus_bandwidth"]) == pytest.approx(B200_LINK * efficiency, rel=1e-9)


def test_data_parallel_rings_that_share_a_node_split_its_nics():
    """32 GPUs on 8-GPU nodes, t = 2, d = 16 (Megatron's order: t innermost, so tp rank 0's DP ring is
    ranks 0, 2, 4, …, 30). Counted by hand: that ring has ranks 0, 2, 4, 6 on node 0 (4 of its 16), so it
    spans 4 nodes and moves its bytes through those 4 GPUs' NICs; the other ring (tp rank 1: 1, 3, 5, 7)
    takes the node's other 4 — together the node's 8 NICs, each once."""
    from symbolic.ledgers.time import link, stride

    hw = hardware.load("a100-80gb")
    ring = [r for r in range(32) if r % 2 == 0]
    on_node0 = [r for r in ring if r < 8]
    assert on_node0 == [0, 2, 4, 6]
    nic = hw.internode_bandwidth * hw.internode_efficiency
    lat, bus, cross = link("d", "all-reduce", 16, stride("d", 2, 1, 16), 8, hw)
    assert bool(cross) and float(bus) == pytest.approx(min(hw.nvlink_bandwidth * hw.nvlink_efficiency,
                                                           len(on_node0) * nic))
    rings_on_a_node = 2                       # one per tp rank
    assert rings_on_a_node * float(bus) == pytest.approx(8 * nic)
    # t = 8: each DP ring has one rank a node and one NIC; the 8 rings take the 8 NICs
    _, bus8, _ = link("d", "all-reduce", 4, stride("d", 8, 1, 4), 8, hw)
    assert float(bus8) == pytest.approx(nic) and 8 * float(bus8) == pytest.approx(8 * nic)


@pytest.mark.parametrize("grid_limit", [kernels.GRID_LIMIT, 0])
def test_arrays_of_shapes_get_what_each_shape_gets_alone_by_grid_or_by_the_combinations_that_occur(
        monkeypatch, grid_limit):
    """The array path (a plan's) finds per dimension the distinct values and prices their grid, or the
    combinations that occur when the grid is large; each element must equal its shape priced alone
    (the bill's Python path), the second call (from the table's memo) the first."""
    import numpy as np
    monkeypatch.setattr(kernels, "GRID_LIMIT", grid_limit)
    rng = np.random.default_rng(24)
    tables = kernels.for_hardware("B200-180GB", 2.25e15)
    for table in (tables.gemm["forward"], tables.grouped["forward"]):
        table._grids.clear()
        d = len(table.shapes[0])
        # a plan's pattern: few values per dimension, broadcast against each other; measured shapes included
        dims = [rng.choice([float(row[j]) for row in table.shapes[:5]] + [1.0, 3000.0, 7e4], size=(40, 1) if j % 2
                           else (1, 30)) for j in range(d)]
        got = table.nearest(*dims)
        assert got.shape == (40, 30)
        alone = np.vectorize(lambda *shape: float(table.nearest(*shape)))(*dims)
        assert np.array_equal(got, alone)
        assert np.array_equal(table.nearest(*dims), got)


def test_fp8_grouped_gemms_forward_on_h800_is_deepgemms_published_figure():
    """Issue 42 item 2: the routed experts' FP8 forward GEMM on an H800 (and the H100, the same die) is
    DeepGEMM's measured contiguous-layout figure (deepseek-ai/DeepGEMM 55ab91f README: 4 groups of 8192 × 4096 ×
    7168 at 1,346 TFLOPS, against the 1,979 TFLOPS dense FP8 peak); BF16 and the gradient passes keep their tables,
    a GPU without the table (the A100, the B200) is priced as before, and the kernels line names the source."""
    from symbolic.ledgers import kernels
    from symbolic.ledgers.hardware import load

    for gpu in ("h800", "h100"):
        hw = load(gpu)
        tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
        assert tables.grouped_efficiency("forward", 4, 8192, 4096, 7168, "fp8") == pytest.approx(1346 / 1979, abs=1e-12)
        assert tables.grouped_efficiency("forward", 8, 4096, 7168, 2048, "fp8") == pytest.approx(1214 / 1979, abs=1e-12)
        bf16 = tables.grouped.get("input_gradient")
        expected = tables._scaled(bf16.nearest(4, 8192, 4096, 7168), "fp8")
        assert tables.grouped_efficiency("input_gradient", 4, 8192, 4096, 7168, "fp8") == expected
        assert tables.grouped_efficiency("forward", 4, 8192, 4096, 7168, "bf16") == \
            tables._scaled(tables.grouped["forward"].nearest(4, 8192, 4096, 7168), "bf16")
        assert "DeepGEMM's H800 table" in tables.approximation
        assert any(source.startswith("deepseek-ai/DeepGEMM README.md @55ab91f7") for source in tables.sources)
    for gpu in ("a100-80gb", "b200"):
        hw = load(gpu)
        assert not kernels.for_hardware(hw.name, hw.peak_bf16_flops).grouped_fp8
