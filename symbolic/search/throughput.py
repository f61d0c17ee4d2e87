"""Predicted against published throughput: the step-time model on runs nobody here made.

``derivations/throughput/public.json`` (a copy of ``shared/throughput/public.json``)
lists 28 published runs with their model, GPU, layout and measured TFLOP/s per
GPU. :func:`predict` prices each run with the plan's time model and reports the
throughput in the source's own FLOP convention:

* Narayanan et al. 2021 (Tables 1 and 2): their Eq 3, which counts the
  recompute forward — the engine's hardware FLOPs under full recompute (the
  inventory gives Eq 3 exactly);
* Megatron-LM's H100 table: Megatron-Core's logged model FLOPs — the engine's
  model FLOPs (no recompute, full s×s attention).

What a source does not print, the model chooses as a user of ``plan`` would —
the fastest layout that fits 80 GB with the printed sizes fixed: the
micro-batch, the interleaving, the recompute policy, SP, the ZeRO stage where
not printed. The overlap strategy is the source's framework's: Megatron-LM
2021 reduces gradients after the backward (``none``); DeepSpeed ZeRO-3
prefetches and overlaps its reduce (``default``); the Megatron-Core table
names ``--overlap-grad-reduce --overlap-param-gather --tp-comm-overlap``
(``all``). One hardware file per GPU kind; nothing is fitted to the rows.

A row that prints no TFLOP/s or MFU but a step time or tokens per second (per
GPU or in all, :data:`STEP_TIME_FIELDS`, :data:`TOKENS_PER_GPU_FIELDS`,
:data:`TOKENS_FIELDS`) is compared on that time: its measured TFLOP/s are the
same counted FLOPs over the measured step.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from ..ledgers.hardware import load as load_hardware
from ..ledgers.time import OVERLAPS
from ..models.config import ConfigError, ModelConfig, positive_int
from ..layout.stages import account_for_split_layout
from .plan import plan

#: Recipes that set Megatron-Core's account_for_embedding_in_pipeline_split and
#: account_for_loss_in_pipeline_split (the embedding and the loss each counted as a layer in the
#: pipeline split), by (source words, model): the source's framework code that says so. Megatron-
#: Bridge's performance recipes (perf_recipes/llama/{b200,gb200}/llama31.py,
#: perf_recipes/qwen/*/qwen3_moe.py) start from these and do not reset the two flags.
PIPELINE_SPLIT_RECIPES = {
    ("megatron-bridge", "LLAMA3.1_405B"): "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/llama/h100/"
    "llama3.py llama31_405b_pretrain_256gpu_h100_bf16_config @067f987d",
    ("megatron-bridge", "Qwen3_235B_a22B"): "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/qwen/h100/"
    "qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config @067f987d",
    **{("megatron-moe-modelzoo", model): "yanring/Megatron-MoE-ModelZoo model_configs/benchmarking/"
       "Qwen3-235B-A22B.yaml @1ed4179f (the config its best_practice/qwen3 runs launch)"
       for model in ("Qwen3-235B", "Qwen3-235B-A22B")},
}


def pipeline_split_recipe(row: dict) -> str | None:
    """The recipe (:data:`PIPELINE_SPLIT_RECIPES`) that counts the embedding and the loss as
    pipeline layers for this row, None for every other row."""
    text = _text(row.get("source"))
    return next((cite for (words, model), cite in PIPELINE_SPLIT_RECIPES.items()
                 if words in text and str(row.get("model")) == model), None)

DATA = Path(__file__).resolve().parents[1] / "derivations" / "throughput" / "public.json"  # a link in a clone, a copy in a wheel
#: GPU names as sources print them → the hardware file (first match wins; lower case, spaces and
#: dashes ignored). A GPU without a file (H100 PCIe, H800 PCIe, A10G ...) is not priced: its row
#: says so instead of borrowing another GPU's figures.
GPU_KINDS = (("gb300", "gb300-nvl72"), ("b300", "b300"), ("gb200", "gb200-nvl72"), ("b200", "b200"), ("h200", "h200"),
             ("h100pcie", None), ("mi300x", "mi300x"), ("mi325x", "mi325x"), ("mi355x", "mi355x"), ("l40s", "l40s"),
             ("rtx4090", "rtx-4090"), ("rtx5090", "rtx-5090"), ("rtx6000ada", "rtx-6000-ada"), ("a6000", "rtx-a6000"),
             ("h100", "h100-sxm"), ("h800pcie", None), ("h800", "h800"), ("a10040", "a100-40gb"),
             ("a100", "a100-80gb"), ("a80040", None), ("a800pcie", None), ("a800", "a800-80gb"))
#: FlashAttention's first release (Dao et al., arXiv 2205.14135, May 2022): a run published
#: before it ran the unfused s×s attention.
FLASH_ATTENTION_ARXIV = 2205


@dataclass
class Prediction:
    row: dict
    model: str
    gpu: str
    layout: str
    measured: float          #: TFLOP/s per GPU, as the source prints it
    predicted: float         #: TFLOP/s per GPU in the source's convention; nan if nothing fits
    convention: str
    step_seconds: float
    binding: str
    chosen: str              #: what the model chose where the source is silent
    #: TFLOP/s per GPU in the source's convention by the FLOPs-only one-liner (:func:`one_liner_seconds`)
    baseline: float = float("nan")

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured

    @property
    def baseline_error(self) -> float:
        return (self.baseline - self.measured) / self.measured


def rows(path: Path = DATA) -> list:
    """The runs of ``path``: a JSON list of rows, or an object holding it under ``runs`` (a regular file
    of at most 64 MiB; NaN reads as a value not given). Each entry is returned as it is — one that is
    no row is refused by :func:`predict` with its reason; a file that holds no list is a ConfigError."""
    from ..core.inputs import InputError, read_regular_file

    try:
        data = json.loads(read_regular_file(path, 64 * 2**20, "published runs file"))
    except InputError as error:
        raise ConfigError(str(error)) from None
    except (ValueError, RecursionError) as error:
        raise ConfigError(f"{path}: not JSON ({str(error)[:120]})") from None
    if isinstance(data, dict):
        data = data.get("runs")
    if not isinstance(data, list):
        raise ConfigError(f"{path}: published runs are a JSON list of rows, or an object with the list under 'runs'")
    return data


def _text(value) -> str:
    return str(value or "").lower()


def _number(mapping: dict, *names):
    """The first of ``names`` in ``mapping`` that holds a positive number (None if none does; 0 or null
    reads as not given). A value that is no number — text that is not one, a boolean, a negative or
    non-finite number — is a ConfigError naming the field, never read as absent."""
    for name in names:
        value = mapping.get(name)
        if value is None or value != value or (isinstance(value, str) and not value.strip()):
            continue  # not given (NaN: a table's empty cell)
        number = value
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number \
                or number in (float("inf"), float("-inf")) or number < 0:
            raise ConfigError(f"{name} must be a positive number; got {value!r}")
        if number > 0:
            return int(number) if isinstance(number, float) and number.is_integer() and isinstance(value, str) \
                else number
    return None


def hardware_kind(row: dict) -> str:
    """The hardware file of the row's GPU (:data:`GPU_KINDS`); ConfigError when there is none."""
    gpu = row.get("hardware", {}).get("gpu_type", "")
    key = "".join(ch for ch in _text(gpu) if ch.isalnum())
    if re.search(r"h100[\s_-]*nvl\b", _text(gpu)):  # the H100 NVL is a PCIe card pair, not the SXM part
        key = "h100pcie"
    for pattern, kind in GPU_KINDS:
        if pattern in key:
            if kind is None:
                break
            return kind
    raise ConfigError(f"no hardware file for GPU {gpu!r}: add one shaped like symbolic/data/hardware/a100-80gb.json")


def _gated(dims: dict) -> bool:
    """A gated MLP (SwiGLU/GeGLU): the row says so in an activation field."""
    return any(word in _text(dims.get(name)) for name in ("activation", "mlp", "act", "ffn_type")
               for word in ("swiglu", "silu", "geglu", "gated", "glu"))


def _model(row: dict) -> ModelConfig:
    """The row's model: a GPT of the papers unless its dimensions say otherwise — key/value heads
    fewer than heads or a gated MLP (read as a Llama layer), routed experts (a Mixtral layer), or an
    HF ``config`` given whole (read by the family reader)."""
    from ..models.hf import from_hf_dict

    dims = row["dims"]
    name, source = row.get("model", "run"), row.get("source", "")
    if isinstance(row.get("config"), dict):
        return from_hf_dict(row["config"], name, source, where=f"{name}: config")
    # The dimensions every row gives: positive whole numbers, each named when it is not one.
    sizes = {}
    for key, meaning in (("L", "layers"), ("h", "hidden size"), ("a", "attention heads"), ("V", "vocabulary"),
                         ("s", "sequence length")):
        sizes[key] = _count(dims, key, "dims")
        if sizes[key] is None:
            raise ConfigError(f"{name}: dims.{key} ({meaning}) is missing")
    heads = sizes["a"]
    kv = _number(dims, "kv_heads", "num_query_groups", "g") or heads
    experts = _number(dims, "experts", "num_experts", "E") or 0
    gated = _gated(dims)
    if experts > 1 or kv != heads or gated:
        hf = {"num_hidden_layers": sizes["L"], "hidden_size": sizes["h"], "num_attention_heads": heads,
              "num_key_value_heads": kv, "vocab_size": sizes["V"], "max_position_embeddings": sizes["s"],
              "tie_word_embeddings": bool(dims.get("tied", False)), "model_type": "llama"}
        ffn = _number(dims, "ffn")
        if experts > 1:
            top_k = _number(dims, "topk", "top_k", "experts_per_token", "k")
            if top_k is None:
                raise ConfigError(f"{name}: dims.topk is needed for routed experts (the experts each token uses)")
            hf.update(model_type="mixtral", num_local_experts=int(experts), num_experts_per_tok=int(top_k))
            ffn = _number(dims, "expert_ffn", "moe_ffn", "ffn")
        if ffn:
            hf["intermediate_size"] = int(ffn)
        elif not gated:
            hf["intermediate_size"] = 4 * sizes["h"]
        else:
            raise ConfigError(f"{name}: dims.ffn is needed for a gated MLP (its width is not 4h by convention)")
        # dims.s is the run's sequence, a training length (not a position table to default below)
        return replace(from_hf_dict(hf, name, source, where=f"{name}: dims"), seq=sizes["s"], max_positions=0)
    return ModelConfig(name=name, layers=sizes["L"], hidden=sizes["h"], heads=heads, vocab=sizes["V"],
                       seq=sizes["s"], ffn=_count(dims, "ffn", "dims", 0), source=source)


def _convention(row: dict) -> str:
    """The FLOP count the source's throughput divides by the step time:
    ``eq3`` (Narayanan's Eq 3: the full-recompute forward counted), ``hardware`` (the FLOPs run,
    recompute included), ``6n`` (6 × parameters × tokens, Kaplan et al. 2020), ``6n-causal``
    / ``model-causal`` (attention halved for the causal mask) or ``model`` (forward + backward, full
    s×s attention, nothing recomputed: Megatron-Core's logged FLOPs)."""
    kind = _text(row["measured"].get("tflops_kind"))
    if kind.startswith("as table") or "eq. 3" in kind or "eq 3" in kind:
        return "eq3"
    causal = "causal" in kind or "halv" in kind
    if "6n" in kind.replace(" ", "").replace("·", "").replace("*", ""):
        return "6n" + ("-causal" if causal else "")
    if "hardware" in kind or "hfu" in kind:
        return "hardware"
    return "model" + ("-causal" if causal else "")


def _measured(row: dict, peak_tflops: float) -> float:
    """TFLOP/s per GPU as the source prints it, or its MFU / % of peak × the dense peak."""
    measured = row["measured"]
    value = _number(measured, "tflops_per_gpu")
    if value is not None:
        return float(value)
    share = _number(measured, "mfu", "pct_of_peak")
    if share is not None:
        return float(share) / (100.0 if share > 1 else 1.0) * peak_tflops
    return float("nan")


#: A measured step time, as sources print it (seconds per iteration).
STEP_TIME_FIELDS = ("step_time_s", "step_seconds", "iteration_time_s", "seconds_per_iteration", "time_per_iteration_s")
#: A measured throughput in tokens per second per GPU (TGS) and in tokens per second in all.
TOKENS_PER_GPU_FIELDS = ("tokens_per_second_per_gpu", "tokens_per_sec_per_gpu", "tokens_per_gpu_per_second", "tgs")
TOKENS_FIELDS = ("tokens_per_second", "tokens_per_sec")


def measured_step_seconds(row: dict, tokens_per_iteration: float, gpus: int) -> float | None:
    """The measured step time a row gives directly or as tokens/s (per GPU or in all): the same
    quantity the model predicts, compared without any FLOP convention. None if the row has none."""
    measured = row.get("measured", {})
    seconds = _number(measured, *STEP_TIME_FIELDS)
    if seconds is not None:
        return float(seconds)
    per_gpu = _number(measured, *TOKENS_PER_GPU_FIELDS)
    if per_gpu is not None:
        return tokens_per_iteration / gpus / float(per_gpu)
    total = _number(measured, *TOKENS_FIELDS)
    if total is not None:
        return tokens_per_iteration / float(total)
    return None


def _overlap(row: dict) -> str:
    if row["layout"].get("overlaps"):
        return "all"
    return "default" if _zero_stage(row["layout"].get("zero")) == 3 else "none"


def _zero_stage(value):
    """The ZeRO stage a row names (0-3; FSDP's full sharding is 3, its SHARD_GRAD_OP 2), None if unprinted."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value in (0, 1, 2, 3):
        return value
    text = _text(value)
    if text in ("none", "no", "off", "ddp", "0"):
        return 0
    for stage in ("3", "2", "1"):
        if text in (stage, f"zero-{stage}", f"zero{stage}", f"stage {stage}"):
            return int(stage)
    if "shard_grad_op" in text or "zero-2" in text or "zero2" in text:
        return 2
    if "fsdp" in text or "full_shard" in text or "zero-3" in text or "zero3" in text:
        return 3
    if "distributed optimizer" in text or "zero-1" in text or "zero1" in text:
        return 1
    return None


def _flash(row: dict) -> bool:
    """Whether the run's attention is a fused kernel: what the row says, else whether the source
    could have had it — FlashAttention (arXiv 2205.14135) postdates an arXiv source numbered before
    2205; any other run chooses it, as ``plan`` would (it is both faster and smaller)."""
    said = " ".join(_text(row.get(k)) for k in ("notes",)) + " " + " ".join(
        _text(v) for v in row.get("layout", {}).values() if isinstance(v, str))
    if "no flash" in said or "unfused attention" in said or "without flash" in said:
        return False
    if "flash" in said or "fused attention" in said:
        return True
    arxiv = re.search(r"arxiv\s*:?\s*(\d{4})\.\d{4,5}", _text(row.get("source")))
    return not (arxiv and int(arxiv.group(1)) < FLASH_ATTENTION_ARXIV)


def _nothing(row: dict, model: str, gpu: str, layout: str, measured: float, convention: str, why: str) -> Prediction:
    return Prediction(row, model, gpu, layout, measured, float("nan"), convention, float("nan"), why, "")


def _tokens(model: ModelConfig, layout) -> int:
    """Tokens of one iteration, all data-parallel replicas: B·s."""
    return (layout.global_batch or layout.micro_batch * layout.dp) * (layout.seq or model.seq)


def counted_flops(model: ModelConfig, layout, convention: str, totals: dict) -> float:
    """FLOPs per GPU per iteration in the source's convention (:func:`_convention`), from the bill."""
    from dataclasses import replace

    from ..bill.derive import make_bill

    gpus = layout.gpus
    if convention == "eq3":
        return float(make_bill(model, replace(layout, recompute="full")).totals["flops_per_gpu_per_iteration"])
    if convention == "hardware":
        return float(totals["flops_per_iteration"]) / gpus
    tokens = _tokens(model, layout)
    if convention.startswith("6n"):
        from ..bill.derive import active_parameters
        from ..core.numeric import exact
        from ..ledgers import params as params_ledger

        active = active_parameters(model)
        n = float(exact(params_ledger.count(active), layout.values(model))) if active is not None \
            else float(totals["params"])
        return 6 * n * tokens / gpus
    model_flops = float(totals["model_flops_per_iteration"]) / gpus
    if convention == "model-causal":  # the causal mask halves the attention core's Q·Kᵀ and ·V
        from ..bill.derive import inventories
        from ..core.numeric import exact
        from ..core.tensors import Group, Inventory
        from ..ledgers import flops as flops_ledger

        matmuls = inventories(model)[2]
        core = Inventory(tuple(mm for mm in matmuls if mm.group is Group.ATTENTION_CORE))
        per_micro_batch = float(exact(flops_ledger.model_training(core), layout.values(model)))
        micro_batches = layout.iteration_micro_batches() * layout.dp
        model_flops -= per_micro_batch * micro_batches / gpus / 2
    return model_flops


#: The objects of a row (public.json's shape): the model's dimensions, the hardware, the layout, the measurement.
ROW_OBJECTS = ("dims", "hardware", "layout", "measured")


def _count(mapping: dict, key: str, where: str, default=None):
    """A positive whole number the row gives under ``key`` (:func:`positive_int`'s reading, a float
    that is whole too); ``default`` when absent, null or NaN; anything else a ConfigError naming it."""
    value = mapping.get(key)
    if value is None or value == "" or value != value:  # NaN: a table's empty cell
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return positive_int(f"{where}.{key}", value)


def predict(row: dict, gpu_memory: int | None = None) -> Prediction:
    """Price one published run (module docstring). A row the engine cannot price (a GPU with no
    hardware file, a model it cannot read, no layout that fits, a field of the wrong kind) comes
    back with a nan prediction and the reason in ``binding``, never an exception."""
    nan = float("nan")
    if not isinstance(row, dict):
        return _nothing({}, "run", "", "", nan, "model", f"a row is a JSON object, not {type(row).__name__}")
    name = str(row.get("model", "run"))
    for key in ROW_OBJECTS:
        if key in row and not isinstance(row[key], dict):
            return _nothing(row, name, "", "", nan, "model", f"row.{key} must be an object; got {row[key]!r}"[:300])
    if "dims" not in row:
        return _nothing(row, name, "", "", nan, "model", "row.dims is missing: the model's L, h, a, V and s")
    row = dict(row, **{key: row.get(key) or {} for key in ROW_OBJECTS[1:]})
    try:
        return _predict(row, gpu_memory)
    except ConfigError as error:
        return _nothing(row, name, str(row["hardware"].get("gpu_type")), "", nan, "model", str(error))
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as error:  # never a traceback
        return _nothing(row, name, str(row["hardware"].get("gpu_type")), "", nan, "model",
                        f"row not read ({type(error).__name__}: {error})"[:300])


def _predict(row: dict, gpu_memory: int | None) -> Prediction:
    lay, hw_row = row["layout"], row["hardware"]
    name = str(row.get("model", "run"))
    layout_text = f"t={lay.get('tp')} p={lay.get('pp')} d={lay.get('dp')} B={lay.get('gbs')}"
    convention = _convention(row)
    try:
        hardware = load_hardware(hardware_kind(row))
    except ConfigError as error:
        return _nothing(row, name, str(hw_row.get("gpu_type")), layout_text, _measured(row, float("nan")),
                        convention, str(error))
    measured = _measured(row, hardware.peak_bf16_flops / 1e12)
    try:
        model = _model(row)
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError) as error:
        return _nothing(row, name, hardware.name, layout_text, measured, convention, f"model: {error}")
    fixed = {key: _count(lay, key, "layout", 1) for key in ("tp", "pp", "dp", "cp")}
    experts = _count(lay, "ep", "layout", 1)
    if experts > 1:
        fixed["ep"] = experts
    if _count(lay, "mbs", "layout"):
        fixed["micro_batch"] = _count(lay, "mbs", "layout")
    if _count(lay, "vp", "layout"):
        fixed["interleave"] = _count(lay, "vp", "layout")
    zero = _zero_stage(lay.get("zero"))
    if zero is not None:
        fixed["zero"] = zero
    recompute = _text(lay.get("recompute"))
    if recompute.startswith("full"):
        fixed["recompute"] = "full"
    elif recompute.startswith("selective"):
        fixed["recompute"] = "selective"
    elif recompute in ("none", "no", "off", "false"):
        fixed["recompute"] = "none"
    if isinstance(lay.get("sp"), bool):
        fixed["sp"] = lay["sp"] and fixed["tp"] > 1
    if str(row.get("source", "")).startswith("arXiv 2104.04473"):
        # Narayanan et al. 2021 predate sequence parallelism and selective recompute (Korthikanti
        # 2022); their Eq 3 counts the full-recompute forward, which their runs used (§5.1).
        fixed.update(sp=False, recompute="full")
    # Megatron-LM reduces bf16 gradients in fp32 (arguments.py: bf16 forces
    # accumulate_allreduce_grads_in_fp32); Narayanan's fp16 runs reduce fp16 gradients.
    optimizer = "bf16-adam" if _text(lay.get("precision")).startswith("fp16") else "bf16-adam-fp32-grads"
    overlap = _overlap(row)
    flash = _flash(row)
    # FP8 training (Transformer Engine): the weight GEMMs at the FP8 peak, their inputs kept in FP8.
    fp8 = "fp8" in _text(lay.get("precision"))
    gpus = _count(hw_row, "gpus", "hardware") or fixed["tp"] * fixed["pp"] * fixed["dp"] * fixed["cp"]
    uneven = {}
    recipe = pipeline_split_recipe(row)
    if recipe and fixed["pp"] > 1:
        # Megatron-Core's rule as the chunks it builds; without interleaving that is a first and a last
        # stage one layer short, which plan searches; with it the first and last *chunks* are short,
        # a per-chunk layout that bill prices and plan does not search.
        v = fixed.get("interleave", 1)
        split = account_for_split_layout(model.layers, fixed["pp"], v, embedding=True, loss=True)
        if v > 1:
            return _nothing(row, name, hardware.name, layout_text, measured, convention,
                            f"{recipe} counts the embedding and the loss as pipeline layers (Megatron-Core's "
                            f"account_for_embedding/loss_in_pipeline_split): {model.layers} + 2 layers over "
                            f"{fixed['pp']}×{v} chunks, the first and last chunk one short — a per-chunk layout "
                            f"plan does not search (bill prices it: --pipeline-layout '{split}')")
        chunks = split.split("|")
        uneven = dict(first_stage_layers=chunks[0].count("t"), last_stage_layers=chunks[-1].count("t"))
    memory = gpu_memory or int(hardware.hbm_bytes)
    per_node = _count(hw_row, "gpus_per_node", "hardware") or hardware.nvlink_domain
    if hardware.nvlink_domain > per_node and "nvl" in _text(hw_row.get("gpu_type")):
        per_node = hardware.nvlink_domain   # an NVL72 rack is one NVLink domain across its trays
    # Megatron-LM (the Megatron-Core table) offers DDP or its distributed optimizer (ZeRO-1's
    # sharding), not ZeRO-2/3: where the stage is not printed, the faster of those two.
    # (ZeRO-1 shards over d·c: with one data-parallel rank only the plain optimizer is a layout.)
    stages = [fixed["zero"]] if "zero" in fixed else [0, 1]
    def fastest(fixed_sizes):
        best, refused = [], []
        for stage in stages:
            try:
                result = plan(model, gpus, memory, global_batch=_count(lay, "gbs", "layout", 0), optimizer=optimizer,
                              hardware=hardware, gpus_per_node=per_node, fixed=dict(fixed_sizes, zero=stage),
                              overlap=OVERLAPS[overlap], max_micro_batch=16, flash_attention=flash,
                              fp8_activations=fp8, **uneven)
            except ConfigError as error:
                refused.append(str(error))
                continue
            best += result.ranked(1)
        return sorted(best, key=lambda item: item.step_seconds), refused

    best, refused = fastest(fixed)
    if len(refused) == len(stages):  # no stage gives a valid layout: the first reason
        return _nothing(row, name, hardware.name, layout_text, measured, convention, f"no valid layout: {refused[0]}")
    if not best:
        why = f"nothing fits {memory / 1e9:g} GB"
        if fixed.get("recompute") in ("none", "selective"):
            # The row's policy as this engine reads it (selective: Megatron's core_attn) does not fit;
            # say whether full recompute would — a framework's own "selective" may keep less.
            lighter, _ = fastest(dict(fixed, recompute="full"))
            if lighter:
                why += (f" with {fixed['recompute']} recompute as this engine reads it (selective: Megatron's "
                        f"core_attn); with full recompute the fastest layout fits ({lighter[0].step_seconds:.3g} s "
                        "a step): a framework's own selective policy may keep less")
        return _nothing(row, name, hardware.name, layout_text, measured, convention, why)
    item = best[0]
    chosen_layout = item.layout
    counted = counted_flops(model, chosen_layout, convention, item.totals)
    predicted = counted / item.step_seconds / 1e12
    six_n = counted_flops(model, chosen_layout, "6n", item.totals)
    baseline = counted / one_liner_seconds(six_n, hardware.peak_bf16_flops) / 1e12
    if math.isnan(measured):  # no TFLOP/s or MFU printed: a step time or tokens/s, in the same FLOPs
        seconds = measured_step_seconds(row, _tokens(model, chosen_layout), chosen_layout.gpus)
        if seconds is not None:
            measured = counted / seconds / 1e12
    chosen = (f"b={chosen_layout.micro_batch} v={chosen_layout.interleave} {chosen_layout.recompute} recompute"
              f"{' SP' if chosen_layout.sp else ''} ZeRO-{chosen_layout.zero}"
              f"{' flash' if flash else ''}{' fp8' if fp8 else ''}; overlap {overlap}"
              # an uneven split the search chose where the source names none (Megatron's first/last stage sizes)
              + (f"; stages first {chosen_layout.first_stage_layers or '-'} last {chosen_layout.last_stage_layers or '-'} "
                 "layers (the source names no split)" if chosen_layout.first_stage_layers or
                 chosen_layout.last_stage_layers else ""))
    return Prediction(row, name, hardware.name, layout_text, measured, predicted, convention, item.step_seconds,
                      item.binding, chosen, baseline)


#: The one-liner's share of the dense peak (issue 20's baseline: 6N·tokens ÷ (GPUs × peak × 0.5)).
ONE_LINER_MFU = 0.5


def one_liner_seconds(six_n_flops_per_gpu: float, peak_flops: float) -> float:
    """The FLOPs-only step time every estimate must beat: 6 × (active) parameters × tokens per GPU
    (Kaplan et al. 2020's 6N) at half the dense BF16 peak — no layout, no kernel, no communication."""
    return six_n_flops_per_gpu / (peak_flops * ONE_LINER_MFU)


#: Sources by the words of their ``source`` field (first match wins): the short name, the framework
#: that ran them (as the source says: Megatron-Bridge and NeMo run Megatron-Core underneath, the
#: SimuMax B200 table ran Megatron-LM with Transformer Engine).
SOURCES = (("2104.04473", "Narayanan 2021", "Megatron-LM 2021"),
           ("nvidia/megatron-lm", "Megatron-LM README", "Megatron-Core"),
           ("llm-foundry", "llm-foundry", "llm-foundry (FSDP)"),
           ("megatron-bridge", "Megatron-Bridge", "Megatron-Bridge"),
           ("simumax", "SimuMax B200", "Megatron-LM + TE"),
           ("megatron-moe-modelzoo", "Megatron-MoE ModelZoo", "Megatron-Core"),
           ("nvidia/nemo", "NeMo", "NeMo"))
#: A sequence at least this long is "long context" in the benchmark's groups.
LONG_CONTEXT = 16384


def source_of(row: dict) -> tuple[str, str]:
    """(short source name, framework) of a row (:data:`SOURCES`); the source text itself otherwise.
    Narayanan's Table 2 ZeRO-3 rows ran DeepSpeed, not Megatron-LM."""
    text = _text(row.get("source")) if isinstance(row, dict) else ""
    for words, name, framework in SOURCES:
        if words in text:
            layout = row.get("layout") if isinstance(row.get("layout"), dict) else {}
            if name == "Narayanan 2021" and _zero_stage(layout.get("zero")) == 3:
                framework = "DeepSpeed ZeRO-3"
            return name, framework
    return str(row.get("source", "") if isinstance(row, dict) else "")[:40] or "unknown", "unknown"


def kind_of(row: dict) -> str:
    """``MoE`` (routed experts), ``long context`` (s ≥ :data:`LONG_CONTEXT`) or ``dense``."""
    dims = row.get("dims") if isinstance(row, dict) and isinstance(row.get("dims"), dict) else {}
    try:
        experts = _number(dims, "experts", "num_experts", "E") or 0
        seq = _number(dims, "s") or 0
    except ConfigError:
        return "dense"
    return "MoE" if experts > 1 else ("long context" if seq >= LONG_CONTEXT else "dense")


def predict_all(path: Path = DATA) -> list[Prediction]:
    return [predict(row) for row in rows(path)]


def error_bands(predictions: list[Prediction]) -> list[dict]:
    """The model's measured error on the published runs, per (framework, GPU kind) and per GPU kind
    over every framework (``framework`` None): runs, mean and max |error|, mean signed error — the
    band a bill prints beside its step time (:mod:`symbolic.bill.bands`)."""
    groups: dict[tuple, list[float]] = {}
    for p in predictions:
        if math.isnan(p.error):
            continue
        framework = source_of(p.row)[1]
        for key in ((framework, p.gpu), (None, p.gpu)):
            groups.setdefault(key, []).append(p.error)
    return [{"framework": framework, "gpu": gpu, "runs": len(errors),
             "mean_abs_error": round(sum(abs(e) for e in errors) / len(errors), 4),
             "max_abs_error": round(max(abs(e) for e in errors), 4),
             "bias": round(sum(errors) / len(errors), 4)}
            for (framework, gpu), errors in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][0] or ""))]
