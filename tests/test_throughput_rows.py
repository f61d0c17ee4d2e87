"""Published-run rows the engine has not seen: every shape of row is priced or refused with a
reason, never a traceback (symbolic.search.throughput), and the fused attention kernel is priced
by the step time, the plan and the bill alike."""
import copy
import math

import pytest

from symbolic.bill.derive import make_bill
from symbolic.bill.timing import step_time
from symbolic.layout.layout import Layout
from symbolic.ledgers.hardware import load as load_hardware
from symbolic.models.builtin import preset
from symbolic.search import throughput
from symbolic.search.plan import plan


def _row(**changes):
    """A small GPT run in the shape of derivations/throughput/public.json."""
    row = {"source": "a source", "model": "GPT test", "dims": {"L": 4, "h": 1024, "a": 16, "kv_heads": None,
                                                              "ffn": None, "V": 32000, "s": 2048},
           "hardware": {"gpu_type": "H100 80GB", "gpus_per_node": 8, "gpus": 16},
           "layout": {"tp": 2, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "vp": None, "mbs": 1, "gbs": 64,
                      "recompute": None, "zero": None, "sp": None, "precision": None},
           "measured": {"tflops_per_gpu": 300.0, "tflops_kind": "model FLOPs"}}
    for path, value in changes.items():
        where = row
        *parents, leaf = path.split(".")
        for key in parents:
            where = where[key]
        where[leaf] = value
    return row


@pytest.mark.parametrize("gpu, kind", [("A100-SXM4-80GB", "A100-SXM4-80GB"), ("A100 40GB", "A100-SXM4-40GB"),
                                       ("H100 80GB", "H100-SXM5-80GB"), ("NVIDIA H200 SXM", "H200-SXM-141GB"),
                                       ("B200", "B200-180GB"), ("GB200 NVL72", "GB200-NVL72"),
                                       ("NVIDIA H800 SXM5", "H800-SXM5-80GB"), ("A800-SXM4-80GB", "A800-SXM4-80GB"),
                                       ("GB300 NVL72", "GB300-NVL72"), ("B300", "B300-288GB"),
                                       ("AMD Instinct MI300X", "MI300X-192GB"), ("MI355X", "MI355X-288GB"),
                                       ("NVIDIA L40S", "L40S-48GB"), ("RTX 4090", "GeForce-RTX-4090-24GB"),
                                       ("RTX 6000 Ada", "RTX-6000-Ada-48GB"), ("RTX A6000", "RTX-A6000-48GB")])
def test_each_gpu_kind_with_a_hardware_file_is_priced_on_it(gpu, kind):
    prediction = throughput.predict(_row(**{"hardware.gpu_type": gpu}))
    assert prediction.gpu == kind
    assert prediction.predicted > 0 and math.isfinite(prediction.error)


@pytest.mark.parametrize("gpu", ["H800 PCIe", "A800 40GB", "H100 PCIe", "H100 NVL", "A10G", "MI250X", ""])
def test_a_gpu_without_a_hardware_file_is_not_priced_and_says_why(gpu):
    prediction = throughput.predict(_row(**{"hardware.gpu_type": gpu}))
    assert math.isnan(prediction.predicted) and "no hardware file" in prediction.binding


def test_grouped_query_attention_and_a_gated_mlp_are_read_as_a_llama_layer():
    row = _row(**{"dims.kv_heads": 4, "dims.ffn": 2816, "dims.activation": "swiglu"})
    model = throughput._model(row)
    assert model.arch == "llama" and model.kv_heads == 4 and model.ffn == 2816 and model.mlp == "swiglu"
    assert throughput.predict(row).predicted > 0


def test_routed_experts_without_top_k_are_refused_not_guessed():
    prediction = throughput.predict(_row(**{"dims.experts": 8, "dims.ffn": 2816, "dims.activation": "swiglu"}))
    assert math.isnan(prediction.predicted) and "dims.topk" in prediction.binding


def test_a_gated_mlp_without_its_width_is_refused_not_guessed():
    prediction = throughput.predict(_row(**{"dims.activation": "swiglu"}))
    assert math.isnan(prediction.predicted) and "dims.ffn" in prediction.binding


def test_routed_experts_are_read_as_a_mixture_of_experts_and_priced_with_expert_parallelism():
    row = _row(**{"dims.experts": 8, "dims.topk": 2, "dims.ffn": 2816, "dims.activation": "swiglu",
                  "layout.ep": 2})
    model = throughput._model(row)
    assert model.experts == 8 and model.experts_per_token == 2 and model.expert_ffn == 2816
    prediction = throughput.predict(row)
    assert prediction.predicted > 0


@pytest.mark.parametrize("kind, convention", [
    ("Eq. 3 of the paper: 96*B*s*l*h^2*(1+s/6h+V/16lh) / time (includes recompute)", "eq3"),
    ("as Table 1", "eq3"), ("Megatron-Core logged model TFLOP/s", "model"), ("MFU, 6ND", "6n"),
    ("6N·D with causal attention halved", "6n-causal"), ("model FLOPs, causal attention halved", "model-causal"),
    ("hardware FLOPs (HFU)", "hardware"), (None, "model")])
def test_the_flop_convention_is_read_from_the_row(kind, convention):
    assert throughput._convention(_row(**{"measured.tflops_kind": kind})) == convention


def test_each_convention_counts_what_it_says():
    """model ≥ model-causal (the core halved); 6N below model (no attention); hardware ≥ model."""
    got = {}
    for kind in ("model FLOPs", "model FLOPs causal", "6N", "hardware FLOPs"):
        got[kind] = throughput.predict(_row(**{"measured.tflops_kind": kind, "layout.recompute": "full"})).predicted
    assert got["model FLOPs causal"] < got["model FLOPs"] < got["hardware FLOPs"]
    assert got["6N"] < got["model FLOPs"]


def test_a_row_with_only_mfu_is_compared_at_mfu_times_the_peak():
    row = _row(**{"measured": {"mfu": 40, "tflops_kind": "model FLOPs"}})
    assert throughput.predict(row).measured == pytest.approx(0.40 * 989)


@pytest.mark.parametrize("text, stage", [("FSDP", 3), ("full_shard", 3), ("ZeRO-2", 2), ("shard_grad_op", 2),
                                         ("distributed optimizer", 1), ("none", 0), (3, 3), (None, None)])
def test_zero_stages_as_sources_name_them(text, stage):
    assert throughput._zero_stage(text) == stage


def test_the_attention_kernel_follows_what_the_source_could_have_run():
    """FlashAttention (arXiv 2205.14135) postdates Narayanan 2021 (2104.04473): unfused there, fused
    for a later source unless the row says otherwise."""
    assert not throughput._flash(_row(source="arXiv 2104.04473 (Narayanan et al. 2021) Table 1"))
    assert throughput._flash(_row(source="arXiv 2406.12345 a later run"))
    assert throughput._flash(_row())
    assert not throughput._flash(_row(notes="unfused attention (no flash)"))


def test_every_stored_row_is_priced_or_says_why():
    for row in throughput.rows():
        prediction = throughput.predict(copy.deepcopy(row))
        assert prediction.predicted > 0 or prediction.binding


def test_the_fused_attention_kernel_is_priced_by_the_step_time():
    """--flash-attention drops the s×s tensors from the element-wise traffic and the attention core's
    HBM bytes, and adds the backward's recomputed Q·Kᵀ to the FLOPs: the step time sees it."""
    model, hardware = preset("gpt-7b"), load_hardware("h100")
    plain = step_time(model, Layout(micro_batch=1), hardware)
    fused = step_time(model, Layout(micro_batch=1, flash_attention=True), hardware)
    assert fused.breakdown["elementwise"] < plain.breakdown["elementwise"]
    assert fused.step_seconds < plain.step_seconds
    core = [line for line in fused.compute_lines if "scores" in line["name"] or "context" in line["name"]]
    assert core and all(line["hbm_bytes"] == 0 for line in core if "fused" not in line["name"])


def test_plan_with_the_fused_kernel_gives_the_bills_totals():
    model = preset("gpt-7b")
    result = plan(model, 8, 80 * 10**9, global_batch=16, flash_attention=True)
    best = result.ranked(3)
    assert best and all(item.layout.flash_attention for item in best)
    for item in best:
        bill = make_bill(model, item.layout)
        assert item.totals["total_bytes"] == bill.totals["total_bytes"]
        assert item.totals["flops_per_iteration"] == bill.totals["flops_per_iteration"]
    plain = plan(model, 8, 80 * 10**9, global_batch=16)
    assert result.ranked(1)[0].step_seconds < plain.ranked(1)[0].step_seconds


def test_fp8_training_runs_the_weight_gemms_at_the_fp8_peak():
    """Transformer Engine's FP8 recipe: the layers' weight GEMMs at the FP8 peak, the attention core and the
    output layer (no TE module in Megatron-Core; DeepSeek-V3 §3.3's output head) in BF16; a GPU without FP8
    Tensor Cores prices BF16 and says so."""
    model, h100 = preset("llama-3-8b"), load_hardware("h100")
    plain = step_time(model, Layout(dp=8, global_batch=64), h100)
    fp8 = step_time(model, Layout(dp=8, global_batch=64, fp8_activations=True), h100)
    assert fp8.factors["gemm_dtype"] == "fp8" and plain.factors["gemm_dtype"] == "bf16"
    by_name = {line["name"]: line["seconds"] for line in plain.compute_lines}
    core = [line for line in fp8.compute_lines if "attention/scores" in line["name"]
            or "attention/context" in line["name"] or line["name"].startswith("output/")]
    weights = [line for line in fp8.compute_lines if line not in core]
    assert any(line["name"].startswith("output/") for line in core)
    assert core and weights
    assert all(line["seconds"] == pytest.approx(by_name[line["name"]]) for line in core)
    assert all(line["seconds"] < by_name[line["name"]] for line in weights)
    assert fp8.step_seconds < plain.step_seconds
    a100 = step_time(model, Layout(dp=8, global_batch=64, fp8_activations=True), load_hardware("a100"))
    assert "no FP8" in a100.factors["gemm_dtype"]
    assert Layout(optimizer="fp8-adam").gemm_dtype == "fp8" and Layout().gemm_dtype == "bf16"


def test_an_fp8_row_is_priced_in_fp8():
    bf16 = throughput.predict(_row(**{"layout.precision": "bf16"}))
    fp8 = throughput.predict(_row(**{"layout.precision": "FP8 (Transformer Engine)"}))
    assert "fp8" in fp8.chosen and "fp8" not in bf16.chosen
    assert fp8.step_seconds < bf16.step_seconds


def test_a_file_of_runs_is_read_as_a_list_or_under_runs(tmp_path):
    """benchmarks/throughput.py --data FILE: the runs as a JSON list, or an object holding them under ``runs``."""
    import json

    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"runs": [_row(), _row(**{"hardware.gpu_type": "MI250X"})]}))
    predictions = throughput.predict_all(path)
    assert len(predictions) == 2 and predictions[0].predicted > 0 and math.isnan(predictions[1].predicted)


def test_h800_and_a800_price_the_same_compute_over_a_narrower_nvlink():
    """The export-restricted parts keep their die's compute and memory and cut NVLink to 400 GB/s
    bidirectional: a TP-heavy run is slower on them, a run on one GPU (no collective) is not."""
    tp_heavy = {"layout.tp": 8, "layout.dp": 2, "layout.sp": False, "layout.recompute": "none", "layout.zero": 0}
    for fast, slow in (("H100 80GB", "H800 80GB"), ("A100-SXM4-80GB", "A800 80GB")):
        faster = throughput.predict(_row(**{"hardware.gpu_type": fast}, **tp_heavy))
        slower = throughput.predict(_row(**{"hardware.gpu_type": slow}, **tp_heavy))
        assert slower.step_seconds > faster.step_seconds
        alone = {"layout.tp": 1, "layout.dp": 1, "layout.gbs": 8, "hardware.gpus": 1}
        assert throughput.predict(_row(**{"hardware.gpu_type": slow}, **alone)).step_seconds == pytest.approx(
            throughput.predict(_row(**{"hardware.gpu_type": fast}, **alone)).step_seconds, rel=1e-12)
    for name, die in (("h800", "h100-sxm"), ("a800", "a100-80gb")):
        part, full = load_hardware(name), load_hardware(die)
        assert part.nvlink_bandwidth == 200e9 and part.peak_bf16_flops == full.peak_bf16_flops
        assert part.hbm_bandwidth == full.hbm_bandwidth and part.gemm_efficiency == full.gemm_efficiency


def test_a_run_with_one_data_parallel_rank_and_no_zero_printed_is_priced():
    """The unprinted ZeRO stage is chosen among DDP and the distributed optimizer; with d·c = 1 only
    DDP is a layout, and the row is priced on it rather than refused for the other."""
    prediction = throughput.predict(_row(**{"layout.tp": 8, "layout.dp": 1, "layout.gbs": 8, "hardware.gpus": 8}))
    assert prediction.predicted > 0 and "ZeRO-0" in prediction.chosen


@pytest.mark.parametrize("field, scale", [("step_time_s", "seconds"), ("tokens_per_second_per_gpu", "per_gpu"),
                                          ("tokens_per_second", "total")])
def test_a_row_with_a_step_time_or_tokens_per_second_is_compared_on_that_time(field, scale):
    """No TFLOP/s printed: the measured step (or B·s over the tokens/s) against the predicted step,
    in the same counted FLOPs — a row measured at exactly the predicted step has zero error."""
    base = throughput.predict(_row())
    tokens = 64 * 2048
    value = {"seconds": base.step_seconds, "per_gpu": tokens / 16 / base.step_seconds,
             "total": tokens / base.step_seconds}[scale]
    row = _row(**{"measured": {field: value * 1.25 if scale == "seconds" else value / 1.25}})
    prediction = throughput.predict(row)
    assert prediction.error == pytest.approx(0.25, rel=1e-9)
    assert math.isnan(throughput.predict(_row(**{"measured": {"note": "nothing numeric"}})).error)


@pytest.mark.parametrize("change, reason", [
    ({"layout": True}, "row.layout must be an object"),
    ({"hardware": -1}, "row.hardware must be an object"),
    ({"measured": "fast"}, "row.measured must be an object"),
    ({"dims": None}, "row.dims must be an object"),
    ({"layout.tp": "abc"}, "layout.tp must be a positive integer"),
    ({"layout.dp": 1.5}, "layout.dp must be a positive integer"),
    ({"layout.gbs": -64}, "layout.gbs must be a positive integer"),
    ({"hardware.gpus_per_node": "eight"}, "hardware.gpus_per_node must be a positive integer"),
    ({"dims.L": "four"}, "dims.L must be a positive integer"),
    ({"dims.V": [32000]}, "dims.V must be a positive integer"),
    ({"dims.kv_heads": "some"}, "kv_heads must be a positive number"),
    ({"measured.tflops_per_gpu": "n/a"}, "tflops_per_gpu must be a positive number"),
])
def test_a_row_with_a_field_of_the_wrong_kind_is_refused_with_the_field_named(change, reason):
    """Hostile rows (found by mutating the published ones at random): one reason naming the field,
    never a traceback, never a field of the wrong kind read as absent (a silent default)."""
    row = _row(**{k: v for k, v in change.items() if "." in k})
    row.update({k: v for k, v in change.items() if "." not in k})
    prediction = throughput.predict(row)
    assert math.isnan(prediction.predicted) and reason in prediction.binding, prediction.binding
    assert math.isnan(throughput.predict([row]).predicted)  # not even an object


def test_numeric_text_in_a_row_reads_as_its_number():
    as_text = throughput.predict(_row(**{"layout.tp": "2", "dims.L": "4", "hardware.gpus": 16.0}))
    assert as_text.predicted == pytest.approx(throughput.predict(_row()).predicted)


def test_a_runs_file_that_is_no_list_is_one_line_and_its_entries_are_judged_one_by_one(tmp_path):
    from symbolic.models.config import ConfigError

    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(ConfigError, match="not JSON"):
        throughput.rows(bad)
    bad.write_text('{"runs": 3}')
    with pytest.raises(ConfigError, match="JSON list of rows"):
        throughput.rows(bad)
    mixed = tmp_path / "mixed.json"
    row = _row(**{"measured": {"tflops_per_gpu": 300.0, "mfu": float("nan")}})
    import json
    mixed.write_text(json.dumps([1, row]))  # NaN: an empty cell, read as not given
    first, second = throughput.predict_all(mixed)
    assert "not int" in first.binding and second.predicted > 0 and second.measured == 300.0


def test_a_recompute_policy_that_does_not_fit_says_whether_full_recompute_would():
    """A row's "selective" is read as Megatron's (core_attn); where that does not fit but full
    recompute does, the refusal says so — another framework's selective policy may keep less."""
    row = _row(**{"layout.recompute": "selective", "dims.s": 8192, "layout.gbs": 16})
    # 3.5 GB: over the selective layouts' peak, under full recompute's (both hold the eager loss's whole
    # vocabulary, 10·s·V = 2.62 GB, at the loss)
    refused = throughput.predict(row, gpu_memory=35 * 10**8)
    assert math.isnan(refused.predicted)
    assert "with selective recompute as this engine reads it" in refused.binding
    assert "with full recompute the fastest layout fits" in refused.binding
    assert throughput.predict(dict(row, layout=dict(row["layout"], recompute="full")),
                              gpu_memory=35 * 10**8).predicted > 0


# --- Megatron-Core's account_for_embedding/loss_in_pipeline_split -------------------------------------

def test_the_embedding_and_loss_counted_as_layers_give_megatrons_chunks():
    """Counted by hand from get_num_layers_to_build (Megatron-LM d98e8a6): Llama-3.1-405B's 126 layers
    + embedding + loss = 128 over p = 16 × v = 4 chunks = 2 each; the first chunk (virtual stage 0)
    builds 2 − 1 = 1 beside the embedding, the last (virtual stage 63) 1 beside the loss. Qwen3-235B's
    94 + 2 = 96 over p = 8 without interleaving: 12 a stage, the first and last 11."""
    from symbolic.layout.stages import account_for_split_layout, chunk_ranges, stage_layers
    from symbolic.models.config import ConfigError

    text = account_for_split_layout(126, 16, 4, embedding=True, loss=True)
    chunks = text.split("|")
    assert len(chunks) == 64 and chunks[0] == "Et" and chunks[-1] == "tL"
    assert all(c == "tt" for c in chunks[1:-1])
    assert stage_layers(126, 16, 4, layout=text) == (7,) + (8,) * 14 + (7,)
    assert [len(r) for r in chunk_ranges(126, 16, 4, layout=text)[0]] == [1, 2, 2, 2]
    assert stage_layers(94, 8, 1, layout=account_for_split_layout(94, 8, 1, True, True)) == (11,) + (12,) * 6 + (11,)
    assert account_for_split_layout(95, 8, 1, embedding=True).split("|")[0] == "E" + "t" * 11
    with pytest.raises(ConfigError, match="must be divisible by pp"):
        account_for_split_layout(94, 5, 1, True, True)        # 94 + 2 = 96 over 5 stages
    with pytest.raises(ConfigError, match="divisible by the interleave"):
        account_for_split_layout(126, 16, 3, True, True)      # 8 a stage over 3 chunks


def test_a_bridge_recipe_that_counts_the_embedding_and_loss_is_priced_or_refused_with_the_rule():
    lay = {"tp": 1, "pp": 4, "dp": 2, "cp": 1, "mbs": 1, "gbs": 16, "recompute": "full", "zero": "1"}
    row = _row(source="NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md", model="LLAMA3.1_405B",
               layout=lay, **{"hardware.gpus": 8})
    row["dims"]["L"] = 6                         # 6 + 2 = 8 over p = 4: 2 a stage, the first and last 1
    assert throughput.pipeline_split_recipe(row).startswith("NVIDIA-NeMo/Megatron-Bridge")
    priced = throughput.predict(row)
    assert not math.isnan(priced.predicted), priced.binding
    plain = throughput.predict(dict(row, source="a source"))   # no such recipe: 6 layers do not divide over 4 —
    assert not math.isnan(plain.predicted)                     # priced at the split plan searches, named
    assert "(the source names no split)" in plain.chosen, plain.chosen
    interleaved = _row(source="NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md", model="LLAMA3.1_405B",
                       layout=dict(lay, pp=2, dp=4, vp=2), **{"hardware.gpus": 8})
    interleaved["dims"]["L"] = 6                 # 8 over 2 × 2 chunks: 2 each, the first and last 1
    refused = throughput.predict(interleaved)
    assert math.isnan(refused.predicted)
    assert "--pipeline-layout 'Et|tt|tt|tL'" in refused.binding and "account_for_embedding" in refused.binding
    assert throughput.pipeline_split_recipe(_row()) is None


@pytest.mark.parametrize("gpu", ["l40s", "rtx-4090", "gb300", "h800", "a800-80gb"])
def test_a_ceiling_read_off_another_gpus_row_is_named(gpu):
    """The mamf-finder table has no row for these cards: the kernel tables' approximation says whose
    measured ceiling prices them, not only its figure."""
    from symbolic.ledgers import hardware, kernels

    hw = hardware.load(gpu)
    tables = kernels.for_hardware(hw.name, hw.peak_bf16_flops)
    assert "has no" in tables.approximation and "ceiling assumed" in tables.approximation
