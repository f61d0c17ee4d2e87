"""What the fine-tuners' readers (``axolotl.py``, ``llamafactory.py``) share: the model a YAML names
(a built-in, by its Hugging Face id, or a local HF config), the HF Trainer optimizer names, the
adapter targets, LoRA dropout's saved tensors (an approximation named with its size), and the
``deepspeed:`` section read by the DeepSpeed reader's rules with the fine-tuner's own values in its
``"auto"`` fields.

Both run HF Trainer (transformers 5.24.0 as installed: ``TrainingArguments.optim`` defaults to
``adamw_torch_fused`` on torch ≥ 2.8, ``training_args.py``) with PEFT (0.21.0 as installed:
``get_peft_model(autocast_adapter_dtype=True)`` keeps the adapters in fp32, ``tuners_utils.py``
``_cast_adapter_dtype``), so a LoRA run's adapters are fp32 parameters, fp32 gradients and fp32 Adam
states under bf16 autocast: the ``fp32-adam`` recipe on the adapters, the frozen base in bf16 (or
NF4 / int8 under bitsandbytes).
"""
from __future__ import annotations

import re
from pathlib import Path

from ...models.config import ConfigError, ModelConfig
from .deepspeed import read_nested_deepspeed
from .reader import _load_mapping, _Reader

#: HF Trainer ``optim`` names (transformers 5.24.0 ``training_args.py`` OptimizerNames) the engine
#: bills, for fp32 trainable parameters: the recipe and the step's implementation. bitsandbytes'
#: 32-bit AdamW (``paged_adamw_32bit``) is one fused kernel with fp32 m and v;
#: its 8-bit AdamW keeps m and v in int8 with an fp32 absmax per 2048 (``adam8bit``: the same bytes per
#: trainable parameter as fp32 weights and gradients with int8 states — 4 + 4 + 1 + 1 B against the
#: recipe's 2 + 2 + 4 (master) + 1 + 1 B — split differently between parameters, gradients and states).
HF_OPTIMIZERS = {
    "adamw_torch_fused": ("fp32-adam", "fused", "torch.optim.AdamW(fused=True)"),
    "adamw_torch": ("fp32-adam", "foreach", "torch.optim.AdamW (foreach)"),
    "paged_adamw_32bit": ("fp32-adam", "fused", "bitsandbytes' paged 32-bit AdamW (one fused kernel; paged "
                          "states counted on the GPU)"),
    "adamw_bnb_8bit": ("adam8bit", "fused", "bitsandbytes' 8-bit AdamW"),
    "adamw_8bit": ("adam8bit", "fused", "bitsandbytes' 8-bit AdamW"),
    "paged_adamw_8bit": ("adam8bit", "fused", "bitsandbytes' paged 8-bit AdamW (paged states counted on the GPU)"),
}
#: The linear modules of a LLaMA-style layer, as PEFT's ``target_modules`` name them.
_ATTENTION = {"q_proj", "k_proj", "v_proj", "o_proj"}
_ALL_LINEAR = _ATTENTION | {"gate_proj", "up_proj", "down_proj"}


def _builtin_by_hf_id(name: str) -> tuple[str, str]:
    """(built-in name, how it matched) for a Hugging Face id: the id a built-in's source names
    (``HF meta-llama/Meta-Llama-3-8B``), or the same repository name under another owner (the
    NousResearch mirrors) — said in the note, never silent."""
    from ...models.builtin import presets

    ids = {}
    for builtin, config in presets().items():
        match = re.search(r"HF ([\w.-]+/[\w.-]+)", config.source)
        if match:
            ids[match.group(1).lower()] = builtin
    lowered = name.lower()
    if lowered in ids:
        return ids[lowered], f"HF {name}"
    tail = lowered.rsplit("/", 1)[-1]
    for hf_id, builtin in ids.items():
        if hf_id.rsplit("/", 1)[-1] == tail:
            return builtin, f"the repository name of HF {hf_id} (another owner's copy: give MODEL if it differs)"
    return "", ""


def resolve_model(reader: _Reader, option: str, name, model: ModelConfig | None, where: str) -> None:
    """The model a fine-tuner's YAML names: MODEL when given; else a built-in (by name or HF id) or a
    local HF config (a folder with ``config.json``, or the file); else assumed absent (give MODEL)."""
    from ...models.builtin import preset, presets
    from ..options import model_from_text

    if model is not None:
        reader.model = model
        if name:
            reader.ignore(option, name, f"the model given, {model.name}, is used")
        return
    if not isinstance(name, str) or not name.strip():
        reader.assume(option, "absent", "give MODEL (a built-in name or an HF config.json)")
        return
    if name in presets():
        reader.model_name, reader.model = name, preset(name)
        reader.take(option, name, f"model = {name}")
        return
    builtin, how = _builtin_by_hf_id(name)
    if builtin:
        reader.model_name, reader.model = builtin, preset(builtin)
        reader.take(option, name, f"model = {builtin} ({how})")
        return
    path = Path(name).expanduser()
    if not path.is_absolute() and where not in ("a mapping", "command line"):
        local = Path(where).parent / path
        path = local if local.exists() else path
    config = path / "config.json" if path.is_dir() else path
    if config.suffix == ".json" and config.is_file():
        try:
            reader.model = model_from_text(str(config))
        except (ConfigError, ValueError) as error:
            reader.refuse(option, name, f"its config.json does not read ({str(error)[:120]})")
        reader.take(option, name, f"model = the HF config.json at {config}")
        return
    reader.assume(option, name, "not a built-in model nor a local HF config: give MODEL (its config.json)")


def lora_targets(reader: _Reader, option: str, modules) -> str:
    """PEFT ``target_modules`` -> the engine's ``lora_targets`` (every linear layer, or attention's
    four), else refused (a typed ``--lora-targets`` gets past it)."""
    if isinstance(modules, str):
        modules = [modules]
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        reader.refuse(option, repr(modules), "give a list of module names")
    names = set(modules)
    if names in ({"all-linear"}, {"all"}) or names >= _ALL_LINEAR:
        return "all-linear"
    if names == _ATTENTION:
        return "attention"
    reader.unless_typed("lora_targets", option, ",".join(modules), "the engine adapts every linear layer "
                        f"({', '.join(sorted(_ALL_LINEAR))}) or attention's four ({', '.join(sorted(_ATTENTION))}); "
                        "type --lora-targets")
    return ""


def lora_dropout(reader: _Reader, option: str, value, targets: str, micro_batch: int, seq: int | None,
                 recompute: str) -> None:
    """LoRA dropout p > 0: PEFT applies an ``nn.Dropout`` to each adapted layer's input before
    ``lora_A`` (``peft/tuners/lora/layer.py`` Linear.forward), and ``lora_A`` keeps the dropped
    input (2 B an element in bf16) with the dropout's mask (1 B): per layer b·s·(Σ adapted inputs)·3 B
    that the bill does not count — named here with its size (for LLaMA-style layers: q, k, v, o, gate,
    up take h each, down f), × L without recompute, one layer's during a full recompute."""
    try:
        p = float(value)
    except (TypeError, ValueError):
        reader.refuse(option, value, "give a number from 0 to 1")
    if not 0 <= p < 1:
        reader.refuse(option, value, "give a number from 0 to 1")
    if p == 0:
        reader.take(option, value, "no dropout on the adapters' inputs")
        return
    model = reader.model
    if model is None or seq is None or model.arch != "llama" or model.experts:
        reader.assume(option, value, "approximation: PEFT's dropout keeps each adapted layer's dropped input and "
                      "mask (b·s·Σ inputs·3 B a layer), not in the bill; its size needs a LLaMA-style MODEL")
        return
    h, f = model.hidden, model.ffn or 4 * model.hidden
    inputs = 4 * h if targets == "attention" else 6 * h + f
    per_layer = micro_batch * seq * inputs * 3
    layers = 1 if recompute == "full" else model.layers
    size = per_layer * layers
    reader.assume(option, value, f"approximation: PEFT's dropout keeps each adapted layer's dropped input (bf16) "
                  f"and mask (1 B): b·s·{'4h' if targets == 'attention' else '(6h + f)'}·3 B = "
                  f"{per_layer / 1e9:.2f} GB a layer, × {layers} = {size / 1e9:.2f} GB not in the bill"
                  + (" (one layer's, during its recompute)" if layers == 1 else ""))


def deepspeed_section(reader: _Reader, option: str, value, where: str, script: dict) -> None:
    """A ``deepspeed:`` section (a path to a ds_config.json, or the mapping itself) read by the
    DeepSpeed reader's rules, its ``"auto"`` fields filled with the fine-tuner's own values
    (``script``: micro-batch, accumulation, bf16, fp16 — HF Trainer's fill, with the TrainingArguments
    the fine-tuner built)."""
    if isinstance(value, str):
        path = Path(value).expanduser()
        if not path.is_absolute() and where not in ("a mapping", "command line") and not path.is_file():
            # the YAML's folder, or one above it: the fine-tuners resolve it from where they run (the repository)
            folders = [Path(where).parent, *Path(where).resolve().parent.parents]
            path = next((folder / path for folder in folders if (folder / path).is_file()), path)
        if not path.is_file():
            reader.refuse(option, value, "the ds_config.json it names is not here; give its path (relative to the "
                          "YAML's folder or absolute), or the section inline")
        data, _ = _load_mapping(str(path), "deepspeed")
        label = path.name
    elif isinstance(value, dict):
        data, label = value, option
    else:
        reader.refuse(option, repr(value), "give a ds_config.json path or its mapping")
    fills = {"train_micro_batch_size_per_gpu": script["micro_batch"],
             "gradient_accumulation_steps": script["accumulation"]}
    filled = dict(data)
    for key, number in fills.items():
        if filled.get(key) == "auto":
            filled[key] = number
    if filled.get("train_batch_size") == "auto":
        del filled["train_batch_size"]
    for section, on in (("bf16", script["bf16"]), ("fp16", script["fp16"])):
        if isinstance(filled.get(section), dict) and filled[section].get("enabled") == "auto":
            filled[section] = {**filled[section], "enabled": on}
    reader.take(option, value if isinstance(value, str) else "(inline)", f"read by the deepspeed reader "
                f"({path if isinstance(value, str) else label}), "
                "its 'auto' fields filled with this file's values (HF Trainer's trainer_config_process)")
    read_nested_deepspeed(reader, filled, label)
    reader.framework = "deepspeed"
    if "optimizer" not in data and script["optimizer"] in HF_OPTIMIZERS:  # DeepSpeed wraps HF Trainer's optimizer
        _, impl, what = HF_OPTIMIZERS[script["optimizer"]]
        reader.assume("optimizer", script["optimizer"], f"the client optimizer DeepSpeed wraps: {what}, "
                      f"optimizer_impl = {impl}", optimizer_impl=impl)
