"""One contract for every way in (issue 22): the Python API, hardware files, output paths and
config fields keep the CLI's promises — a result, or one ConfigError naming the field, the
value and the fix; never another exception, a hang, NaN, or a silently wrong number."""
import ast
import inspect
import json
import math
import os
import pickle
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symbolic
from symbolic import api
from symbolic.cli import build_parser, main
from symbolic.layout.options import OPTIONS
from symbolic.ledgers import hardware

# --- the schema: both ways in are made from it ----------------------------------------------

API_FUNCTIONS = (api.bill, api.plan, api.solve, api.timeline)


def test_api_does_not_import_the_clis_option_module():
    tree = ast.parse(Path(api.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not any(name.endswith("_options") for name in imported), imported


def test_api_renders_with_the_render_folder_not_the_commands():
    """The results' text and JSON come from ``symbolic/render`` (the commands print with the same functions);
    the input readers the CLI shares with the API live below both (a GPU: ``ledgers.gpus``, a margin:
    ``bill.evaluate.margin_bytes``, issue 45); derive's request is ``claims.derivation``'s, not the CLI's parser."""
    tree = ast.parse(Path(api.__file__).read_text())
    from_commands = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and node.module and node.module.startswith("commands") for alias in node.names}
    assert from_commands == set()
    from symbolic.bill.evaluate import margin_bytes
    from symbolic.commands import _gpu
    from symbolic.commands.plan import parse_margin
    from symbolic.ledgers import gpus
    assert _gpu.resolve is gpus.resolve and _gpu.GpuChoice is gpus.GpuChoice
    assert parse_margin("10%", 80 * 10**9) == margin_bytes("10%", 80 * 10**9) == 8 * 10**9
    assert parse_margin(None, 80 * 10**9) == margin_bytes(None, 80 * 10**9) > 0
    from symbolic.commands import derive, plan, solve, timeline
    from symbolic.render import derive as derive_render, plan as plan_render, solve as solve_render
    from symbolic.render import timeline as timeline_render
    assert (plan.render_text, plan.render_json, solve.render_text, solve.render_json, timeline.render_text,
            timeline.report, derive.render_text, derive.json_data) == (
        plan_render.render_text, plan_render.render_json, solve_render.render_text, solve_render.render_json,
        timeline_render.render_text, timeline_render.report, derive_render.render_text, derive_render.json_data)


def test_results_print_what_the_commands_print(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    main(["plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB", "--global-batch", "16"])
    cli = capsys.readouterr().out
    text = symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", global_batch=16).text(100)
    timing = re.compile(r"evaluated in [0-9]+ ms")  # the one line that differs: the sweep's own time
    assert timing.sub("", text) + "\n" == timing.sub("", cli)
    main(["solve", "gpt-7b", "--max", "micro-batch", "--gpu-memory", "80GB", "--tp", "8"])
    assert symbolic.solve("gpt-7b", max="micro-batch", gpu_memory="80GB", tp=8).text(100) + "\n" == capsys.readouterr().out
    main(["timeline", "gpt-7b", "--tp", "8"])
    assert symbolic.timeline("gpt-7b", tp=8).text(100) + "\n" == capsys.readouterr().out


@pytest.mark.parametrize("function", API_FUNCTIONS, ids=lambda f: f.__name__)
def test_every_api_keyword_is_a_schema_option(function):
    """A keyword the schema does not know would be taken unchecked: each has an entry."""
    keywords = [name for name, p in inspect.signature(function).parameters.items()
                if p.kind is p.KEYWORD_ONLY]
    assert keywords and [name for name in keywords if name not in OPTIONS] == []


def _cli_actions():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for command, cparser in sub.choices.items():
        for action in cparser._actions:
            yield command, action


def test_every_cli_flag_of_a_schema_option_has_the_schemas_type_and_choices():
    checked = 0
    for command, action in _cli_actions():
        option = OPTIONS.get(action.dest)
        if option is None or option.flag not in action.option_strings or action.nargs == 0:
            continue
        if option.kind == "int":  # the same range object everywhere (a choice's reader may differ)
            assert action.type is option.type, (command, option.flag)
        if option.kind == "choice":
            assert tuple(action.choices) == tuple(option.choices), (command, option.flag)
        checked += 1
    assert checked > 60  # bill, plan, solve, timeline, derive, calculator, snapshot share them


# --- the API: the corpus, table-driven ----------------------------------------------

REFUSED = [
    (lambda: symbolic.bill("llama-2-7b", tp=True), r"^tp=True: a bool is not a count"),
    (lambda: symbolic.bill("gpt-7b", zero=True), r"^zero=True: a bool is not a choice; choose one of 0, 1, 2, 3"),
    (lambda: symbolic.bill("gpt-7b", fused_swiglu="no"), r"^fused_swiglu='no': a flag is True or False"),
    (lambda: symbolic.bill("gpt-7b", flash_attention="no"), r"^flash_attention='no': a flag is True or False"),
    (lambda: symbolic.bill("mixtral-8x7b", moe_pad_to_capacity="no"), r"^moe_pad_to_capacity='no'"),
    (lambda: symbolic.bill("llama-3-8b", gpu_memory=80), r"^gpu_memory=80: a bare number has no unit.*h100"),
    (lambda: symbolic.bill("gpt-7b", gpu_memory=10**40), r"^gpu_memory=1000.*: a bare number has no unit"),
    (lambda: symbolic.bill("gpt-7b", recompute_modules=5), r"^recompute_modules=5: give a name"),
    (lambda: symbolic.bill("gpt-7b", hardware=5), r"^hardware=5: give text"),
    (lambda: symbolic.bill("gpt-7b", gpus_per_node=0), r"^gpus_per_node=0: outside the stated range 1\.\."),
    (lambda: symbolic.bill("gpt-7b", gpus_per_node=True), r"^gpus_per_node=True: a bool is not a count"),
    (lambda: symbolic.bill("gpt-7b", seq=10**30), r"^seq=1000.*: outside the stated range 1\.\.100,000,000"),
    (lambda: symbolic.bill("gpt-7b", micro_batch=10**30), r"^micro_batch=.*outside the stated range"),
    (lambda: symbolic.bill("gpt-7b", dp=10**30), r"^dp=.*outside the stated range"),
    (lambda: symbolic.bill("gpt-7b", global_batch=10**30), r"^global_batch=.*outside the stated range"),
    (lambda: symbolic.bill("gpt-7b", params=10**30), r"^--params .*more than 10,000,000,000,000,000"),
    (lambda: symbolic.bill("gpt-7b", lora=10**9), r"^lora=1000000000: outside the stated range"),
    (lambda: symbolic.bill("gpt-7b", lora=100_000), r"lora rank 100000 exceeds the hidden size h = 4096"),
    (lambda: symbolic.bill("gpt-7b", tp=-8), r"^tp=-8: outside the stated range"),
    (lambda: symbolic.bill("gpt-7b", tp=8.0), r"^tp=8\.0: a float is not an integer"),
    (lambda: symbolic.bill("gpt-7b", dtype="int3"), r"^dtype='int3': choose one of bf16, fp16, fp32, fp8"),
    (lambda: symbolic.bill("mixtral-8x7b", moe_capacity_factor=0.5), r"must be at least 1"),
    (lambda: symbolic.bill("mixtral-8x7b", moe_capacity_factor=float("nan")), r"^moe_capacity_factor=nan"),
    (lambda: symbolic.bill("mixtral-8x7b", moe_capacity_factor=5), r"outside 1\.\.E/k = 8/2"),
    (lambda: symbolic.plan("gpt-7b", gpus=10**30, gpu_memory="80GB"), r"^gpus=.*outside the stated range"),
    (lambda: symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", max_micro_batch=10**30), r"^max_micro_batch="),
    (lambda: symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", global_batch=10**30), r"^global_batch="),
    (lambda: symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", tp=True), r"^tp=True: a bool is not a count"),
    (lambda: symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", margin=4), r"^margin=4: give a size"),
    (lambda: symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", top=-1), r"^top=-1: outside"),
    (lambda: symbolic.plan("gpt-7b", gpus=8), r"--gpu-memory is required: give a GPU \(gpu='h100'\)"),
    (lambda: symbolic.solve("gpt-7b", max="seq"), r"--gpu-memory is required: give a GPU \(gpu='h100'\)"),
    (lambda: symbolic.solve("gpt-7b", max="heads", gpu_memory="80GB"), r"^max='heads': choose one of"),
    (lambda: symbolic.solve("gpt-7b", max="seq", gpu_memory="80GB", sp="yes"), r"^sp='yes': a flag"),
    (lambda: symbolic.timeline("gpt-7b", optimize=5), r"^optimize=5: give a name"),
    (lambda: symbolic.timeline("gpt-7b", optimize={"zero": 1}), r"^optimize=\{'zero': 1\}: give a name"),
    (lambda: symbolic.timeline("gpt-7b", optimize=["teleport"]), r"unknown optimisation 'teleport'"),
    (lambda: symbolic.timeline("gpt-7b", nccl_channels=0), r"^nccl_channels=0: outside the stated range 1\.\.1,024"),
    (lambda: symbolic.timeline("gpt-7b", bucket=25 * 2**20), r"^bucket=26214400: a bare number has no unit"),
    (lambda: symbolic.derive("activations", tp=True, sp="no"), r"^sp='no': give one of True, False"),
    (lambda: symbolic.derive("activations", tp=-8), r"^tp=-8: outside the stated range"),
    (lambda: symbolic.derive("activations", tp="eight"), r"^tp='eight': 'eight' is not an integer"),
    (lambda: symbolic.derive("activations", zero=True), r"^zero=True: a bool is not a choice"),
    (lambda: symbolic.derive("activations", tied="yes"), r"^tied='yes': give one of"),
    (lambda: symbolic.derive(5), r"^quantity 5: give a quantity's name"),
    (lambda: symbolic.bill(["gpt-7b"]), r"^model \['gpt-7b'\]: give a built-in name"),
]


@pytest.mark.parametrize("call, message", REFUSED, ids=[m for _, m in REFUSED])
def test_the_api_refuses_what_the_cli_refuses_naming_the_keyword(call, message):
    with pytest.raises(symbolic.ConfigError) as caught:
        call()
    text = str(caught.value)
    assert re.search(message, text), text
    assert "\n" not in text and len(text) < 400


def test_text_counts_are_read_as_the_cli_reads_them():
    """tp="8" is what `--tp 8` is: the same bill, not a TypeError deep in the layout."""
    assert symbolic.bill("llama-2-7b", tp="8").to_dict() == symbolic.bill("llama-2-7b", tp=8).to_dict()
    assert symbolic.bill("llama-2-7b", gpus_per_node="8").to_dict() == symbolic.bill("llama-2-7b").to_dict()
    by_text = symbolic.plan("gpt-7b", gpus="8", gpu_memory="80GB", top=1, tp="8", micro_batch="1").to_dict()
    assert by_text == symbolic.plan("gpt-7b", gpus=8, gpu_memory="80GB", top=1, tp=8, micro_batch=1).to_dict()
    assert symbolic.bill("gpt-7b", dp=2, zero="1", dtype="bfloat16").to_dict() == \
        symbolic.bill("gpt-7b", dp=2, zero=1, dtype="bf16").to_dict()


def test_a_gpu_name_is_a_memory_size():
    assert symbolic.bill("llama-2-7b", tp=8, gpu_memory="h100").gpu_memory_bytes == 80 * 10**9


def test_capacity_factor_as_python_numbers():
    from fractions import Fraction

    kw = dict(seq=4096, dp=8, ep=8)
    text = symbolic.bill("mixtral-8x7b", moe_capacity_factor="5/4", **kw).to_dict()
    assert symbolic.bill("mixtral-8x7b", moe_capacity_factor=Fraction(5, 4), **kw).to_dict() == text
    assert symbolic.bill("mixtral-8x7b", moe_capacity_factor=1.25, **kw).to_dict() == text


# --- hardware files: plausible ranges, names escaped, no NaN anywhere -----------------------

def _extreme_hardware(tmp_path, end: str) -> str:
    """A hardware file with every figure at the low (or high) end of its plausible range."""
    data = json.loads((hardware.HARDWARE_DIR / "a100-80gb.json").read_text())
    for key, entry in hardware.PLAUSIBLE.items():
        if key in data and not isinstance(data[key], dict):
            data[key] = int(getattr(entry, end)) if key == "nvlink_domain" else getattr(entry, end)
    data["peak_fp8_flops"] = getattr(hardware.PLAUSIBLE["peak_fp8_flops"], end)
    fraction = getattr(hardware.PLAUSIBLE["gemm_efficiency.fraction"], end)
    data["gemm_efficiency"] = [[1e18 if end == "high" else 1.0, fraction], [0, fraction]]
    data["latency"] = {key: getattr(hardware.PLAUSIBLE["latency"], end) for key in hardware.LATENCIES}
    data["processor_usage"] = {key: getattr(hardware.PLAUSIBLE["processor_usage"], end)
                               for key in hardware.PROCESSOR_USAGE}
    data["name"] = "\x1b]0;title\x07\x1b[2Jextreme-" + end
    path = tmp_path / f"{end}.json"
    path.write_text(json.dumps(data))
    return str(path)


#: Every command's arguments for a run on a hostile hardware file (the commands with --hardware are
#: found from the parser, and each must have a row here).
HARDWARE_RUNS = {
    "bill": [["gpt-7b", "--tp", "8", "--pp", "2", "--dp", "4", "--zero", "1"], ["mixtral-8x7b", "--ep", "8", "--dp", "8"],
             ["llama-2-7b", "--lora", "16", "--offload", "optimizer"]],
    "plan": [["gpt-7b", "--gpus", "64", "--gpu-memory", "80GB", "--top", "3"]],
}


def _no_constant(name):
    raise AssertionError(f"{name} in a --json output")


@pytest.mark.parametrize("end", ["low", "high"])
def test_no_nan_or_infinity_in_any_json_output_on_a_hostile_hardware_file(end, tmp_path, capsys):
    path = _extreme_hardware(tmp_path, end)
    commands = sorted({command for command, action in _cli_actions() if "--hardware" in action.option_strings})
    assert commands == sorted(HARDWARE_RUNS)
    for command in commands:
        for argv in HARDWARE_RUNS[command]:
            code = main([command, *argv, "--hardware", path, "--json"])
            out = capsys.readouterr().out
            assert code in (0, 1), (command, argv)
            data = json.loads(out, parse_constant=_no_constant)
            assert "\x1b" not in out and "\x07" not in out
            if command == "bill":
                assert math.isfinite(data["step_seconds"]) and data["step_seconds"] > 0
    bill = symbolic.bill("gpt-7b", tp=8, hardware=path)
    json.dumps(bill.to_dict(), allow_nan=False)
    assert "\x1b" not in bill.text()


# --- output paths ---------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("argv", [["calculator", "-o", "{fifo}"], ["sheet", "-o", "{fifo}.tex"],
                                  ["timeline", "gpt-7b", "--png", "{fifo}"]])
def test_a_fifo_output_is_refused_before_any_work(argv, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.mkfifo(str(fifo) + ".tex")
    assert main([part.format(fifo=fifo) for part in argv]) == 2
    err = capsys.readouterr().err
    assert "is a FIFO (named pipe), not a regular file" in err and len(err.strip().splitlines()) == 1


def test_a_device_output_is_refused(capsys):
    assert main(["calculator", "-o", os.devnull]) == 2
    assert "is a character device, not a regular file" in capsys.readouterr().err


def test_solve_with_a_huge_global_batch_answers_or_refuses(capsys):
    """The issue's case ran past 60 s: every integer up to B/d was validated; now B/d's divisors."""
    code = main(["solve", "gpt-7b", "--max", "micro-batch", "--pp", "4", "--global-batch", "1000000000",
                 "--gpu-memory", "1000000000GB"])
    err = capsys.readouterr().err
    assert code == 2 and "every micro-batch up to 1,000,000 fits" in err


def test_solve_with_a_pipeline_and_a_global_batch_checks_its_divisors(capsys):
    limit = symbolic.solve("gpt-7b", max="micro-batch", pp=4, tp=8, global_batch=64, gpu_memory="80GB")
    assert limit.answer is not None and 64 % limit.answer == 0


def test_a_snapshot_with_a_huge_integer_is_refused_in_text_as_in_json(tmp_path, capsys):
    snapshot = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096, "size": 2**70,
                                                   "stream": 0, "time_us": 1}]]}
    path = tmp_path / "big.pickle"
    path.write_bytes(pickle.dumps(snapshot, protocol=2))
    for extra in ([], ["--json"]):
        assert main(["snapshot", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert "['size'] is an integer of 71 bits; a snapshot's addresses, sizes and streams are 64-bit" in err


# --- config fields: transformers' aliases, cross-field checks -------------------------------

QWEN3_MOE = {"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 512, "intermediate_size": 1024,
             "moe_intermediate_size": 256, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
             "vocab_size": 1000, "num_experts_per_tok": 4, "max_position_embeddings": 4096}


def _config(tmp_path, raw, name="config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(raw) if not isinstance(raw, str) else raw)
    return str(path)


def test_qwen3_moe_as_transformers_5_saves_it_reads_its_experts(tmp_path):
    """transformers 5.24 stores Qwen3-MoE's expert count as num_local_experts (attribute_map)."""
    saved = symbolic.bill(_config(tmp_path, dict(QWEN3_MOE, num_local_experts=64), "a.json"))
    old = symbolic.bill(_config(tmp_path, dict(QWEN3_MOE, num_experts=64), "b.json"))
    assert saved.to_dict()["model_config"]["experts"] == 64 == old.to_dict()["model_config"]["experts"]
    assert saved.to_dict()["params"] == old.to_dict()["params"]
    with pytest.raises(symbolic.ConfigError, match="num_local_experts = 64 and num_experts = 32 are one field"):
        symbolic.bill(_config(tmp_path, dict(QWEN3_MOE, num_local_experts=64, num_experts=32), "c.json"))


def test_the_attribute_maps_are_transformers_own():
    transformers = pytest.importorskip("transformers")
    from transformers import AutoConfig

    from symbolic.models.hf_attribute_maps import ATTRIBUTE_MAPS, TRANSFORMERS_VERSION

    assert transformers.__version__ == TRANSFORMERS_VERSION
    for model_type in ("qwen3_moe", "mixtral", "gpt2", "deepseek_v3", "deepseek_v2"):
        assert ATTRIBUTE_MAPS[model_type] == AutoConfig.for_model(model_type).attribute_map, model_type


GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 256, "n_head": 4, "vocab_size": 1000, "n_positions": 512}
LLAMA = {"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
         "vocab_size": 1000, "intermediate_size": 512}
DEEPSEEK = json.loads((Path(symbolic.__file__).parent / "data" / "deepseek-v3.json").read_text())


@pytest.mark.parametrize("raw, message", [
    (dict(GPT2, add_cross_attention=True), r"add_cross_attention = true adds a cross-attention block"),
    (dict(GPT2, add_cross_attention="yes"), r"add_cross_attention must be true or false"),
    (dict(LLAMA, is_encoder_decoder=True), r"is_encoder_decoder = true adds an encoder stack"),
    (dict(DEEPSEEK, first_k_dense_replace=-1), r"first_k_dense_replace must be a non-negative integer, got -1"),
    (dict(DEEPSEEK, n_shared_experts=-1), r"n_shared_experts must be a non-negative integer for deepseek_v3"),
    (dict(QWEN3_MOE, num_experts=8, mlp_only_layers=[99, -1]), r"mlp_only_layers holds \[99, -1\], outside .*0\.\.3"),
    (dict(LLAMA, model_type="mistral", sliding_window=-4096), r"sliding_window must be a positive number"),
    (dict(LLAMA, model_type="qwen2_moe", sliding_window=0, use_sliding_window=True),
     r"sliding_window must be a positive number of tokens \(or null; 0 with use_sliding_window false\), got 0"),
    (dict(LLAMA, model_type="gpt_neox", rotary_pct=2.0), r"rotary_pct must be a fraction in \(0, 1\]"),
    (dict(LLAMA, partial_rotary_factor=0), r"partial_rotary_factor must be a fraction"),
    (dict(LLAMA, layer_types=["full_attention"]), r"layer_types has 1 entries for num_hidden_layers = 4"),
    (dict(LLAMA, _symbolic=5), r"_symbolic = 5: symbolic's own metadata is an object"),
    (dict(LLAMA, _symbolic={"name": 5}), r"_symbolic\.name = 5 must be text"),
    ('{"model_type": "llama", "num_hidden_layers": NaN}', r"num_hidden_layers is NaN, not a finite number"),
    ('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}", r"hidden_size is an integer of 5,000 digits"),
    ('{"model_type": "llama", "rope_theta": 1e999}', r"rope_theta is 1e999, beyond a float's range"),
])
def test_a_config_field_that_does_not_fit_is_refused_naming_it(raw, message, tmp_path, capsys):
    path = _config(tmp_path, raw)
    with pytest.raises(symbolic.ConfigError, match=message):
        symbolic.bill(path)
    assert main(["bill", path]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, message", [
    (["bill", "gpt-7b", "--lora", "1000000"], "lora rank 1000000 exceeds the hidden size h = 4096"),
    (["bill", "mixtral-8x7b", "--moe-capacity-factor", "0.5"], "'0.5' must be at least 1 (from 1 to 1000)"),
    (["bill", "mixtral-8x7b", "--moe-capacity-factor", "4.5"], "outside 1..E/k = 8/2"),
])
def test_lever_ranges_on_the_command_line(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_trace_resizes_layer_types_with_the_layer_count():
    from symbolic.models.hf_fields import resized

    qwen3 = {"model_type": "qwen3", "num_hidden_layers": 1, "layer_types": ["full_attention"]}
    assert "layer_types" not in resized(qwen3, 2)  # transformers rebuilds its default for 2 layers
    gemma = {"model_type": "gemma3_text", "num_hidden_layers": 6, "layer_types": ["sliding_attention"] * 5 +
             ["full_attention"], "first_k_dense_replace": 3, "mlp_only_layers": [0, 4]}
    two = resized(gemma, 2)
    assert two["layer_types"] == ["sliding_attention"] * 2 and two["num_hidden_layers"] == 2
    assert two["first_k_dense_replace"] == 2 and two["mlp_only_layers"] == [0]


def test_trace_hf_on_configs_as_transformers_saves_them(tmp_path, capsys):
    pytest.importorskip("transformers")
    from transformers import Qwen3Config

    Qwen3Config(num_hidden_layers=1, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                num_key_value_heads=2, vocab_size=256, head_dim=16).save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["layer_types"] == ["full_attention"]
    assert main(["trace", "--hf", str(tmp_path / "config.json"), "--seqs", "16", "--batches", "2"]) == 0
    assert "traced == declared at every point" in capsys.readouterr().out


LLAMA4_ONE_LAYER = dict(num_hidden_layers=1, hidden_size=48, num_attention_heads=4, num_key_value_heads=2,
                        head_dim=12, intermediate_size=14, intermediate_size_mlp=22, vocab_size=101,
                        max_position_embeddings=64, num_local_experts=3, num_experts_per_tok=1, attention_chunk_size=16)


def test_trace_hf_on_a_one_layer_llama4_as_transformers_saves_it(tmp_path, capsys):
    """Llama4TextConfig writes no_rope_layers [1] and moe_layers [0] for one layer; the trace's model of two
    layers takes transformers' default for two (both RoPE, both MoE) instead of the file's one-entry lists."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    from symbolic.trace import resized_config

    AutoConfig.for_model("llama4_text", **LLAMA4_ONE_LAYER).save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    assert (raw["no_rope_layers"], raw["moe_layers"]) == ([1], [0])
    two = resized_config(raw, 2)
    assert two["num_hidden_layers"] == 2 and not {"no_rope_layers", "moe_layers", "layer_types"} & set(two)
    assert resized_config(raw, 1)["no_rope_layers"] == [1]
    assert main(["trace", "--hf", str(tmp_path / "config.json"), "--seqs", "8", "--batches", "2"]) == 0
    assert "traced == declared at every point" in capsys.readouterr().out


def test_trace_hf_on_a_qwen2_moe_without_experts_measures_its_dense_layer(tmp_path, capsys):
    """num_experts 0: every layer Qwen2MoeDecoderLayer builds is the dense MLP (modeling_qwen2_moe.py:358-363);
    the trace sets the layer against the bill's dense layer, not the MoE inventory of its fitted path."""
    pytest.importorskip("transformers")
    from transformers import AutoConfig

    AutoConfig.for_model("qwen2_moe", num_hidden_layers=1, hidden_size=48, num_attention_heads=4,
                         num_key_value_heads=2, intermediate_size=80, vocab_size=101, max_position_embeddings=64,
                         num_experts=0).save_pretrained(tmp_path)
    assert main(["trace", "--hf", str(tmp_path / "config.json"), "--seqs", "8", "--batches", "2"]) == 0
    assert "traced == declared at every point" in capsys.readouterr().out


def test_trace_hf_refuses_to_extend_a_hand_written_pattern():
    pytest.importorskip("transformers")
    from symbolic.trace import resized_config

    raw = dict(LLAMA4_ONE_LAYER, model_type="llama4_text", no_rope_layers=[0], moe_layers=[])
    with pytest.raises(symbolic.ConfigError, match=r"no_rope_layers \[0\] is not llama4_text's default pattern "
                       r"for 1 layers \(\[1\]\)"):
        resized_config(raw, 2)
    assert resized_config(dict(raw, no_rope_layers=[1]), 2)["moe_layers"] == []  # its one layer dense: both dense


# --- the keyword space: a result or a ConfigError, never another exception, never NaN --------

VALUES = st.sampled_from([-1, 0, 1, 2, 8, 10**30, True, False, None, 1.5, float("nan"), float("inf"),
                          "8", "no", "", "x", "80GB", "1.25", "5/4", "h100", "bf16", "selective", "core_attn",
                          [], ["zero"], {"zero": 1}, (1,), b"8"])
#: Each command's first argument and keywords; plan's sweep pinned to a handful of layouts (a draw may unpin one).
BASE = {"bill": ("gpt-7b", {}),
        "plan": ("gpt-7b", {"gpus": 8, "gpu_memory": "80GB", "top": 1, "tp": 8, "pp": 1, "micro_batch": 1,
                            "recompute": "none", "zero": 0, "sp": True}),
        "solve": ("gpt-7b", {"max": "micro-batch", "gpu_memory": "80GB", "tp": 8}),
        "timeline": ("gpt-7b", {"tp": 8}), "derive": ("activations", {})}
DERIVE_KEYWORDS = ("tp", "sp", "cp", "pp", "interleave", "dp", "seq", "micro_batch", "recompute", "dtype", "zero",
                   "optimizer", "lora", "tied", "positions", "arch", "uneven", "pipeline")


def _keywords(command: str) -> list[str]:
    if command == "derive":
        return list(DERIVE_KEYWORDS)
    function = getattr(api, command)
    names = [name for name, p in inspect.signature(function).parameters.items() if p.kind is p.KEYWORD_ONLY]
    return names + (["tp", "pp", "sp", "zero", "recompute", "micro_batch"] if command == "plan" else [])


def _valid(name: str) -> list:
    """Values the schema accepts for keyword ``name`` (so that some draws run the engine)."""
    option = OPTIONS.get(name)
    if option is None:
        return [True, False]
    if option.kind == "int":
        return [option.low, min(option.high, 8), option.default]
    if option.kind in ("flag", "choice"):
        return [True, False] if option.kind == "flag" else list(option.choices)
    if option.kind == "names":
        return [["zero"], "flash-attention"] if name == "optimize" else [""]
    if option.kind == "text":
        return ["h100-sxm", "a100-80gb"] if name == "hardware" else [""]
    return {"memory": ["80GB", "h100", "4MiB"], "count": ["7B", 7 * 10**9], "ratio": ["1", 1.25],
            "margin": ["0", "10%", "4GB"]}[option.kind]


@st.composite
def calls(draw):
    command = draw(st.sampled_from(sorted(BASE)))
    names = draw(st.lists(st.sampled_from(_keywords(command)), min_size=1, max_size=3, unique=True))
    return command, {name: draw(st.one_of(st.sampled_from(_valid(name)), VALUES)) for name in names}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_the_api_keyword_space_gives_a_result_or_a_config_error(call):
    command, changes = call
    first, base = BASE[command]
    kwargs = dict(base, **changes)
    try:
        result = getattr(symbolic, command)(first, **kwargs)
    except symbolic.ConfigError as error:
        assert str(error) and "\n" not in str(error)
        return
    json.dumps(result.to_dict(), allow_nan=False)  # never NaN or Infinity
    assert str(result)


# --- --framework, --from, --no-double-quant: schema entries; a typed value beats the preset ----------

def _cli_json(capsys, *argv) -> dict:
    main(list(argv))
    out = capsys.readouterr().out
    return json.loads(out)


def test_framework_from_and_no_double_quant_come_from_the_schema():
    by_command = {}
    for command, action in _cli_actions():
        by_command.setdefault(command, {})[action.dest] = action
    for command in ("bill", "plan", "solve", "timeline"):
        framework, launch = by_command[command]["framework"], by_command[command]["launch"]
        assert framework.option_strings == ["--framework"] and tuple(framework.choices) == OPTIONS["framework"].choices
        assert framework.type is OPTIONS["framework"].type and framework.default is None
        assert launch.option_strings == ["--from"] and launch.nargs == 2 and launch.metavar == ("KIND", "SOURCE")
    assert OPTIONS["framework"].choices == ("megatron-core", "nemo", "torchtitan", "fsdp", "deepspeed", "llm-foundry", "none")
    for command in ("bill", "derive"):
        quant = by_command[command]["double_quant"]
        assert quant.option_strings == ["--no-double-quant"] and quant.default is True and quant.const is False
    for function in API_FUNCTIONS:
        assert inspect.signature(function).parameters["framework"].default is None
    # the API reads a framework's name as the CLI does (any case), and refuses another naming the choices
    assert OPTIONS["framework"].read("Megatron-Core") == "megatron-core"
    assert OPTIONS["launch"].read(("megatron", Path("args.txt"))) == ("megatron", "args.txt")


def test_the_apis_framework_is_the_clis(capsys):
    api_bill = symbolic.bill("llama-3-8b", framework="megatron-core").to_dict()
    assert api_bill == _cli_json(capsys, "bill", "llama-3-8b", "--framework", "megatron-core", "--json")
    assert api_bill["layout"]["optimizer"] == "bf16-adam-fp32-grads" and api_bill["layout"]["flash_attention"] is True
    assert api_bill["time_model"]["framework"] == "megatron-core"
    assert api_bill["framework_preset"] == {"framework": "megatron-core", "filled": {
        "flash_attention": True, "loss": "vocab-parallel", "optimizer": "bf16-adam-fp32-grads", "optimizer_impl": "fused",
        "overlap": "no"}}
    plan = symbolic.plan("llama-3-8b", gpus=8, gpu_memory="80GB", global_batch=16, framework="nemo").to_dict()
    cli_plan = _cli_json(capsys, "plan", "llama-3-8b", "--gpus", "8", "--gpu-memory", "80GB", "--global-batch", "16",
                         "--framework", "nemo", "--json")
    assert plan == cli_plan and (plan["optimizer"], plan["loss"], plan["flash_attention"]) == (
        "bf16-adam-fp32-grads", "fused", True)
    solve = symbolic.solve("llama-3-8b", max="micro-batch", gpu_memory="200GB", dp=8, framework="nemo").to_dict()
    assert solve == _cli_json(capsys, "solve", "llama-3-8b", "--max", "micro-batch", "--gpu-memory", "200GB",
                              "--dp", "8", "--framework", "nemo", "--json")
    assert solve["layout"]["zero"] == 1 and solve["micro_batch"] == 4  # s = 4096 (the default); NeMo's distributed optimizer: ZeRO-1
    timeline = symbolic.timeline("llama-3-8b", dp=8, framework="nemo").to_dict()
    assert timeline == _cli_json(capsys, "timeline", "llama-3-8b", "--dp", "8", "--framework", "nemo", "--json")
    assert (timeline["layout"]["zero"], timeline["layout"]["loss"]) == (1, "fused")
    # the memory-only commands take the preset's memory fields, and say which (no overlap: no step time)
    filled = {"flash_attention": True, "zero": 1, "loss": "fused", "optimizer": "bf16-adam-fp32-grads",
              "optimizer_impl": "fused"}
    assert solve["framework_preset"] == timeline["framework_preset"] == {"framework": "nemo", "filled": filled}
    main(["solve", "llama-3-8b", "--max", "micro-batch", "--gpu-memory", "200GB", "--dp", "8", "--framework", "nemo"])
    assert ("fused loss; from --framework nemo: fused attention, ZeRO-1, fused loss, bf16-adam-fp32-grads, fused "
            "optimizer step"
            in " ".join(capsys.readouterr().out.split("\nVERDICT")[0].split()))


@pytest.mark.parametrize("call", [lambda: symbolic.bill("llama-3-8b", framework="megatron"),
                                  lambda: symbolic.solve("gpt-7b", max="seq", gpu_memory="80GB", framework=5),
                                  lambda: symbolic.timeline("gpt-7b", framework=True)])
def test_a_bad_framework_names_the_field_the_value_and_the_choices(call):
    with pytest.raises(symbolic.ConfigError, match=r"^framework=.*: (a bool is not a choice; )?choose one of "
                                                   r"megatron-core, nemo, torchtitan, fsdp, deepspeed, llm-foundry, none "
                                                   r"\(--framework on the command line\)$"):
        call()


#: (preset, the CLI's options, the API's keywords, the Layout field or overlap, typed value kept, the preset's)
TYPED_WINS = [
    ("nemo", ["--optimizer", "bf16-adam"], {"optimizer": "bf16-adam"}, "optimizer", "bf16-adam",
     "bf16-adam-fp32-grads"),
    ("nemo", ["--zero", "0"], {"zero": 0}, "zero", 0, 1),
    ("nemo", ["--loss", "eager"], {"loss": "eager"}, "loss", "eager", "fused"),
    ("megatron-core", ["--overlap", "default"], {"overlap": "default"}, "overlap",
     "overlapped: DP grad reduce, param gather / ZeRO-3 prefetch", "no overlap"),
]


def _field(data: dict, field: str):
    return data["time_model"]["overlap"] if field == "overlap" else data["layout"][field]


@pytest.mark.parametrize("preset, argv, keywords, field, kept, filled", TYPED_WINS, ids=[row[3] for row in TYPED_WINS])
def test_a_typed_value_beats_the_preset_even_at_its_default(preset, argv, keywords, field, kept, filled, capsys):
    base = ["bill", "llama-3-8b", "--dp", "8", "--framework", preset, "--json"]
    untyped, typed = _cli_json(capsys, *base), _cli_json(capsys, *base, *argv)
    assert _field(untyped, field) == filled and _field(typed, field) == kept
    assert field in untyped["framework_preset"]["filled"] and field not in typed["framework_preset"]["filled"]
    assert symbolic.bill("llama-3-8b", dp=8, framework=preset, **keywords).to_dict() == typed
    assert symbolic.bill("llama-3-8b", dp=8, framework=preset).to_dict() == untyped


def test_the_api_can_type_what_the_cli_cannot_and_the_layout_line_names_the_presets(capsys):
    # flash_attention=False, given, keeps the unfused kernel (the CLI's --flash-attention only turns it on)
    assert symbolic.bill("gpt-7b", framework="megatron-core", flash_attention=False).to_dict()["layout"][
        "flash_attention"] is False
    main(["bill", "llama-3-8b", "--framework", "megatron-core"])
    untyped = capsys.readouterr().out.split("\nVERDICT")[0]
    main(["bill", "llama-3-8b", "--framework", "megatron-core", "--optimizer", "bf16-adam"])
    typed = capsys.readouterr().out.split("\nVERDICT")[0]
    assert " ".join(untyped.split()).endswith("bf16-adam-fp32-grads, bf16 activations, vocab-parallel loss; from "
                                              "--framework megatron-core: fused attention, vocab-parallel loss, "
                                              "bf16-adam-fp32-grads, fused optimizer step, no overlap")
    assert " ".join(typed.split()).endswith("ZeRO-0, bf16-adam, bf16 activations, vocab-parallel loss; from "
                                            "--framework megatron-core: fused attention, vocab-parallel loss, fused "
                                            "optimizer step, no overlap")
    # without a preset the line is as it was
    main(["bill", "llama-3-8b"])
    assert "--framework" not in capsys.readouterr().out.split("\nVERDICT")[0]


def test_from_launch_is_the_apis_from(capsys):
    """The API's ``--from``: ``symbolic.from_launch`` reads the config into a value; its ``options()`` are
    the keywords (framework= among them), and the bill is the CLI's without ``read_from``."""
    from test_launch import KORTHIKANTI_175B

    reading = symbolic.from_launch("megatron", KORTHIKANTI_175B)
    assert reading.options()["framework"] == "megatron-core"
    cli = _cli_json(capsys, "bill", "--from", "megatron", KORTHIKANTI_175B, "--gpu-memory", "80GB", "--json")
    assert cli.pop("read_from")["framework"] == "megatron-core"
    assert symbolic.bill(**reading.options(), gpu_memory="80GB").to_dict() == cli
    # what the config set counts as typed: the preset fills nothing of it (fp16 keeps bf16-adam)
    assert cli["layout"]["optimizer"] == "bf16-adam" and cli["layout"]["dtype"] == "fp16"


def test_a_typed_flag_beside_from_wins_even_at_its_default(capsys):
    from test_launch import KORTHIKANTI_175B

    # the config says --fp16; a typed --dtype bf16 (the default) wins over it, and is listed as typed
    main(["bill", "--from", "megatron", KORTHIKANTI_175B, "--dtype", "bf16"])
    out = capsys.readouterr().out
    assert "--dtype bf16 (typed) wins over the config's fp16" in " ".join(out.split())
    assert "bf16 activations" in out.split("\nVERDICT")[0]


def test_no_double_quant_reaches_the_layout(capsys):
    on = _cli_json(capsys, "bill", "llama-3-8b", "--lora", "16", "--base-dtype", "nf4", "--json")
    off = _cli_json(capsys, "bill", "llama-3-8b", "--lora", "16", "--base-dtype", "nf4", "--no-double-quant", "--json")
    assert on["layout"]["double_quant"] is True and off["layout"]["double_quant"] is False
    assert int(off["model_states_bytes"]) > int(on["model_states_bytes"])  # fp32 constants, not 8-bit
    assert symbolic.bill("llama-3-8b", lora=16, base_dtype="nf4", double_quant=False).to_dict() == off


# --- hostile input over the new keywords and over --from ---------------------------------------------

#: A preset's fields, each with values the schema accepts (a typed one must come back as typed).
PRESET_TYPED = {"optimizer": ["bf16-adam", "bf16-adam-fp32-grads", "fp32-adam"], "zero": [0, 1, 2],
                "loss": ["eager", "vocab-parallel", "fused"], "flash_attention": [True, False],
                "overlap": ["default", "none", "all"]}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(OPTIONS["framework"].choices) + ["MEGATRON-CORE", "megatron", "", 5, True, None]),
       st.dictionaries(st.sampled_from(sorted(PRESET_TYPED)), st.integers(0, 2), max_size=3))
def test_a_preset_never_overrides_a_keyword_given(framework, picks):
    typed = {name: PRESET_TYPED[name][index % len(PRESET_TYPED[name])] for name, index in picks.items()}
    try:
        bill = symbolic.bill("gpt-7b", dp=8, framework=framework, **typed)
    except symbolic.ConfigError as error:
        assert str(error) and "\n" not in str(error)
        assert framework not in OPTIONS["framework"].choices and framework is not None  # only a bad name refused
        return
    data = bill.to_dict()
    filled = data.get("framework_preset", {}).get("filled", {})
    for name, value in typed.items():
        assert name not in filled
        if name != "overlap":
            assert data["layout"][name] == value, (name, data["layout"][name])
    for name, value in filled.items():
        assert name not in typed and (name == "overlap" or data["layout"][name] == value)
    json.dumps(data, allow_nan=False)


_HOSTILE_VALUES = st.sampled_from(["auto", "", "x", "-1", "0", "1", "8", "1e400", "nan", "99999999999999999999",
                                   True, False, None, -1, 0, 1, 8, 3.5, float("nan"), float("inf"), 10**30,
                                   [], [1], {}, {"stage": 3}, "selective"])
_DEEPSPEED_KEYS = st.sampled_from(["train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
                                   "zero_optimization", "bf16", "fp16", "optimizer", "activation_checkpointing",
                                   "zero_optimization.stage", "zero_optimization.offload_optimizer", "bf16.enabled",
                                   "fp16.enabled", "optimizer.type", "data_types.grad_accum_dtype", "unknown_key"])


def _nested(pairs) -> dict:
    out: dict = {}
    for path, value in pairs:
        node, parts = out, path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[parts[-1]] = value
    return out


def _result_or_refusal(read):
    try:
        reading = read()
        options = reading.options()
        options.setdefault("model", "gpt-7b")
        bill = symbolic.bill(**options)
    except symbolic.ConfigError as error:
        assert str(error) and "\n" not in str(error) and len(str(error)) < 2500
        return
    json.dumps(bill.to_dict(), allow_nan=False)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_DEEPSPEED_KEYS, _HOSTILE_VALUES), max_size=5))
def test_a_malformed_ds_config_gives_a_bill_or_one_line(pairs):
    _result_or_refusal(lambda: symbolic.from_launch("deepspeed", _nested(pairs), model="gpt-7b"))


_MEGATRON_WORDS = st.sampled_from(["--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--micro-batch-size",
                                   "--global-batch-size", "--seq-length", "--sequence-parallel", "--bf16", "--fp16",
                                   "--recompute-granularity", "--recompute-activations", "--use-distributed-optimizer",
                                   "--num-layers", "--hidden-size", "--num-attention-heads", "--recompute-modules",
                                   "--virtual-pipeline-model-parallel-size", "--attention-backend", "--no-such-flag",
                                   "8", "0", "-1", "x", "1e9", "selective", "full", "'", "\"", "\\", "--", "=", "$X",
                                   "\x00", "\x1b[31m", "--tensor-model-parallel-size=4"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_MEGATRON_WORDS, min_size=1, max_size=8), st.booleans())
def test_a_malformed_megatron_command_line_gives_a_bill_or_one_line(words, as_text):
    source = " ".join(words) if as_text else words
    _result_or_refusal(lambda: symbolic.from_launch("megatron", source, model="gpt-7b"))


_TOML_LINES = st.sampled_from(["[parallelism]", "[training]", "[activation_checkpoint]", "[model]", "[job]",
                               "tensor_parallel_degree = 2", "tensor_parallel_degree = 'x'", "pipeline_parallel_degree = -1",
                               "data_parallel_shard_degree = -1", "local_batch_size = 0", "seq_len = 1e400",
                               "mode = 'none'", "mode = 'full'", "mode = 'selective'", "name = 'llama3'",
                               "flavor = '8B'", "parallelism = 5", "x = [1, 2", "mixed_precision_param = 'bfloat16'",
                               "\x00", "= 3", "[[parallelism]]"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(_TOML_LINES, max_size=8))
def test_a_malformed_torchtitan_toml_gives_a_bill_or_one_line(tmp_path_factory, unselective, lines):
    path = tmp_path_factory.mktemp("toml") / "job.toml"
    # torchtitan's default checkpointing (selective) is refused: without it, some draws reach a bill
    path.write_text(("[activation_checkpoint]\nmode = 'none'\n[parallelism]\n" if unselective else "")
                    + "\n".join(lines) + "\n")
    _result_or_refusal(lambda: symbolic.from_launch("torchtitan", path, model="gpt-7b"))
    code = main(["bill", "gpt-7b", "--from", "torchtitan", str(path), "--json"])
    assert code in (0, 1, 2)  # a bill, or one line (exit 2); never the bug exit (3)


@pytest.mark.parametrize("kind, source, message", [
    ("megatron", 5, r"^launch=\('megatron', 5\): SOURCE: give a path, or the command line"),
    ("megatron", ["--tensor-model-parallel-size", 5], r"^launch=.*SOURCE: give a path, or the command line"),
    ("deepspeed", {"zero_optimization": 5}, r"^--from deepspeed: zero_optimization 5: not a section"),
    ("MEGATRON", "x", r"^launch=\('MEGATRON', 'x'\): KIND 'MEGATRON': choose one of megatron, nemo"),
    ("megatron", "/", r"^--from megatron '/': not a regular file"),
])
def test_from_launch_refuses_what_it_cannot_read_in_one_line(kind, source, message):
    with pytest.raises(symbolic.ConfigError, match=message):
        symbolic.from_launch(kind, source, model="gpt-7b")


def test_a_fifo_or_a_section_given_as_a_value_is_refused_on_the_command_line(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["bill", "gpt-7b", "--from", "torchtitan", str(fifo)]) == 2  # refused, not read (it would block)
    assert "not a regular file" in capsys.readouterr().err
    job = tmp_path / "job.toml"
    job.write_text("parallelism = [1, 2]\n")
    assert main(["bill", "gpt-7b", "--from", "torchtitan", str(job)]) == 2
    assert "--from torchtitan: parallelism [1, 2]: not a section; give a table of its options" in capsys.readouterr().err


_BRIDGE = {"model": ["tensor_model_parallel_size", "pipeline_model_parallel_size", "sequence_parallel",
                     "context_parallel_size", "recompute_granularity", "num_layers"],
           "train": ["micro_batch_size", "global_batch_size"], "dataset": ["seq_length"],
           "optimizer": ["use_distributed_optimizer", "bf16", "fp16"], "ddp": ["overlap_grad_reduce", "grad_reduce_in_fp32"]}


@st.composite
def _bridge_configs(draw):
    sections = draw(st.lists(st.sampled_from(sorted(_BRIDGE)), max_size=3, unique=True))
    config = {}
    for section in sections:
        if draw(st.integers(0, 9)) == 0:
            config[section] = draw(_HOSTILE_VALUES)  # a section given as a value
            continue
        keys = draw(st.lists(st.sampled_from(_BRIDGE[section]), max_size=3, unique=True))
        config[section] = {key: draw(st.one_of(_HOSTILE_VALUES, st.sampled_from([1, 2, 4, 8, True, False])))
                           for key in keys}
    return config


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["nemo", "megatron-bridge"]), _bridge_configs())
def test_a_malformed_bridge_yaml_gives_a_bill_or_one_line(tmp_path_factory, kind, config):
    import yaml

    path = tmp_path_factory.mktemp("yaml") / "config.yaml"
    try:
        path.write_text(yaml.safe_dump(config))
    except ValueError:  # a float YAML cannot write (nan is written; this is safe_dump's own limit)
        return
    _result_or_refusal(lambda: symbolic.from_launch(kind, path, model="gpt-7b"))


def test_a_typed_framework_beside_from_wins_and_is_listed(capsys):
    job = Path(__file__).parent / "fixtures" / "launch" / "torchtitan_llama3_70b.toml"
    data = _cli_json(capsys, "bill", "--from", "torchtitan", str(job),
                     "--framework", "fsdp", "--json")
    assert data["time_model"]["framework"] == "fsdp" and data["read_from"]["framework"] == "torchtitan"
    assert data["read_from"]["overrides"] == ["--framework fsdp (typed) wins over the config's torchtitan"]
    # what the config set is kept; the typed preset fills only the rest (here the overlap)
    # t = 8 from the config: the bill's default loss is vocabulary-parallel; FSDP's (transformers' tp_plan) is the
    # eager loss on the gathered logits, which the preset fills
    assert data["framework_preset"] == {"framework": "fsdp", "filled": {"loss": "eager",
                                                                       "overlap": "DP grad reduce + param gather"}}


@pytest.mark.parametrize("argv, options", [
    (["activations", "--tp", "8", "--sp", "--pp", "--interleave", "2"], dict(tp=8, sp=True, pp=True, interleave=2)),
    (["states", "--zero", "3", "--lora", "16", "--base-dtype", "nf4", "--no-double-quant"],
     dict(zero=3, lora=16, base_dtype="nf4", double_quant=False)),
    (["params", "--model", "llama-3-8b", "--untied", "--seq", "8192"], dict(model="llama-3-8b", tied=False, seq=8192)),
])
def test_derive_builds_one_request_from_flags_and_keywords(argv, options):
    """The CLI's flags and the API's keywords read into the same frozen request (issue 45: the API
    no longer parses through the CLI's argparse parser)."""
    import argparse

    from symbolic.claims.derivation import DeriveRequest, request
    from symbolic.commands import derive

    parser = argparse.ArgumentParser()
    derive.add_arguments(parser)
    model = options.pop("model", None)
    assert DeriveRequest.of(parser.parse_args(argv)) == request(argv[0], model, **options)
