"""Models from HuggingFace ``config.json`` files, and the built-in models.

A ``config.json`` (the file ``transformers`` saves beside the weights) is read
into the same frozen :class:`~symbolic.models.config.ModelConfig` the presets use.
Its ``model_type`` names the layer family; the family is modelled by its own
inventory when :data:`symbolic.models.architectures.ARCHITECTURES` has one and the
bill itemises it (:data:`symbolic.models.config.BILLED_ARCHITECTURES`), and otherwise
by the GPT layer (Korthikanti et al. 2022 §4.1), with one sentence
per feature that this approximates in ``ModelConfig.approximations`` — a
bill never shows an approximated number without saying so. The LLaMA and MoE
inventories state what they leave out of a family too (Qwen2's Q/K/V biases,
Qwen3's QK-norm, Qwen2-MoE's shared-expert gate and routing, dense layers of
an MoE model, sliding windows, a head_dim other than h/a).

Fields read (GPT-2 files spell the first five ``n_layer``, ``n_embd``,
``n_head``, ``n_inner``, ``n_positions``, as HF's ``attribute_map`` does):

==========================  ======  ==========================================
config.json                 letter  note
==========================  ======  ==========================================
num_hidden_layers           L       required
hidden_size                 h       required
num_attention_heads         a       required
vocab_size                  V       required
max_position_embeddings     s       required; the default sequence length
intermediate_size           f       required, except GPT-2 (null means 4h)
num_key_value_heads                 GQA; absent means = heads (MHA)
tie_word_embeddings                 absent means true (HF's default)
hidden_act                          reported; the family fixes the MLP form
num_local_experts,                  MoE: experts (Mixtral, Qwen-MoE,
num_experts, n_routed_experts       DeepSeek spellings)
num_experts_per_tok                 MoE: experts per token (top-k)
n_shared_experts,                   MoE: shared experts (DeepSeek count;
shared_expert_intermediate_size     Qwen-MoE width / moe_intermediate_size)
moe_intermediate_size               MoE: expert width (absent: intermediate_size)
sliding_window, head_dim            noted when the inventory cannot model them
==========================  ======  ==========================================

The built-in models are such files, shipped in ``symbolic/data/`` with a
``"_symbolic"`` object naming them (``name``, ``source``, ``params_label``, and
``order``, their place in listings).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path

from . import config
from .config import ConfigError, ModelConfig

#: Each HF field and the other spellings HF's ``attribute_map`` gives it.
ALIASES: dict[str, tuple[str, ...]] = {
    "num_hidden_layers": ("n_layer",),
    "hidden_size": ("n_embd",),
    "num_attention_heads": ("n_head",),
    "intermediate_size": ("n_inner",),
    "max_position_embeddings": ("n_positions",),
}

#: The built-in models' files (package data, see pyproject.toml).
DATA = Path(__file__).resolve().parent.parent / "data"  # symbolic/data/

REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size", "max_position_embeddings")


@dataclass(frozen=True)
class Family:
    """What a ``model_type``'s layer is made of, as far as the ledgers care.

    arch: the inventory that models it exactly, once ``ARCHITECTURES`` has it.
    mlp: ``gelu`` (h -> f -> h) or ``swiglu`` (gate and up h -> f, down f -> h).
    norm: ``layernorm`` or ``rmsnorm``. positions: ``learned`` or ``rope``.
    biases: which linear layers have biases: ``all``, ``attention`` (Q, K, V
    and output), ``qkv`` or ``none``.
    dropout: whether training saves dropout masks. moe: the MLP is a mixture
    of experts. default_ffn: ``intermediate_size`` may be null, meaning 4h.
    """

    arch: str
    mlp: str
    norm: str
    positions: str
    biases: str
    dropout: bool
    moe: bool = False
    default_ffn: bool = False
    qk_norm: bool = False
    shared_gate: bool = False


_LLAMA = Family("llama", "swiglu", "rmsnorm", "rope", "none", False)
_QWEN2 = Family("llama", "swiglu", "rmsnorm", "rope", "qkv", False)
_QWEN3 = Family("llama", "swiglu", "rmsnorm", "rope", "none", False, qk_norm=True)
_MIXTRAL = Family("moe", "swiglu", "rmsnorm", "rope", "none", False, moe=True)
_QWEN3_MOE = Family("moe", "swiglu", "rmsnorm", "rope", "none", False, moe=True, qk_norm=True)
_QWEN2_MOE = Family("moe", "swiglu", "rmsnorm", "rope", "qkv", False, moe=True, shared_gate=True)

#: The model types this reader knows (HF's ``model_type`` strings).
FAMILIES: dict[str, Family] = {
    "gpt2": Family("gpt", "gelu", "layernorm", "learned", "all", True, default_ffn=True),
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "qwen3": _QWEN3,
    "qwen2": _QWEN2,
    "mixtral": _MIXTRAL,
    "qwen3_moe": _QWEN3_MOE,
    "qwen2_moe": _QWEN2_MOE,
}

def _field(raw: dict, name: str):
    """``raw[name]`` under any of its spellings; ``None`` when absent or null."""
    for key in (name, *ALIASES.get(name, ())):
        if raw.get(key) is not None:
            return raw[key]
    return None


def _count(raw: dict, name: str, where: str) -> int | None:
    """A positive integer field, or ``None`` when absent; anything else is a
    :class:`ConfigError` naming the field."""
    value = _field(raw, name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: {name} must be a positive integer, got {json.dumps(value)}")
    return value


def _first(raw: dict, names: tuple[str, ...], where: str) -> int | None:
    """The first of ``names`` present (the same field's spellings across families)."""
    for name in names:
        value = _count(raw, name, where)
        if value is not None:
            return value
    return None


def from_hf_dict(raw: dict, name: str, source: str = "", where: str = "config.json") -> ModelConfig:
    """The :class:`ModelConfig` of a parsed HF ``config.json``.

    ``where`` names the file in error messages. Raises :class:`ConfigError`
    (one line naming the field) for missing, non-integer or non-positive fields.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a config.json holds one JSON object, not {type(raw).__name__}")
    model_type = raw.get("model_type")
    model_type = model_type if isinstance(model_type, str) and model_type else "(none)"
    family = FAMILIES.get(model_type)

    required = list(REQUIRED)
    if not (family and family.default_ffn):
        required.append("intermediate_size")
    missing = [field for field in required if _field(raw, field) is None]
    if missing:
        raise ConfigError(f"{where}: missing required field(s) {', '.join(missing)}; "
                          "add them to the file (see `symbolic.models.hf` for the fields read)")
    layers, hidden, heads, vocab, seq = (_count(raw, field, where) for field in REQUIRED)
    ffn = _count(raw, "intermediate_size", where) or 0
    if hidden % heads:
        raise ConfigError(f"{where}: num_attention_heads ({heads}) must divide hidden_size ({hidden}): "
                          "each head has width hidden_size/num_attention_heads")
    kv_heads = _count(raw, "num_key_value_heads", where) or heads
    if heads % kv_heads:
        raise ConfigError(f"{where}: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})")
    tied = raw.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise ConfigError(f"{where}: tie_word_embeddings must be true or false, got {json.dumps(tied)}")

    # Mixture of experts: the several spellings of the same three numbers.
    experts = _first(raw, ("num_local_experts", "num_experts", "n_routed_experts"), where)
    top_k = _count(raw, "num_experts_per_tok", where)
    expert_ffn = _count(raw, "moe_intermediate_size", where) or ffn
    shared = _count(raw, "n_shared_experts", where) or 0
    shared_width = _count(raw, "shared_expert_intermediate_size", where)
    if experts:
        if not top_k:
            raise ConfigError(f"{where}: missing required field num_experts_per_tok for a mixture of experts "
                              f"({experts} experts)")
        if top_k > experts:
            raise ConfigError(f"{where}: num_experts_per_tok ({top_k}) exceeds the number of experts ({experts})")
        if shared_width:
            if shared_width % expert_ffn:
                raise ConfigError(f"{where}: shared_expert_intermediate_size ({shared_width}) must be a multiple "
                                  f"of moe_intermediate_size ({expert_ffn})")
            shared = shared_width // expert_ffn

    notes = _common_notes(raw, hidden, heads, seq) + _unmodelled_fields(raw, family, experts, where)
    if family is None:
        family = _unknown_family(raw)
        notes.insert(0, f"model_type {model_type!r} is not one this reader knows ({', '.join(FAMILIES)}): "
                        "its layer is assumed to be the GPT layer (pre-LayerNorm, multi-head attention, "
                        "MLP h→f→h with biases and dropout); check the numbers against the model's code")
    if raw.get("attention_bias") is True and family.biases != "all":
        family = replace(family, biases="attention")  # Llama-style files may switch Q/K/V/O biases on
    if family.moe and not experts:
        raise ConfigError(f"{where}: model_type {model_type!r} is a mixture of experts: give num_local_experts "
                          "(or num_experts) and num_experts_per_tok")

    common = dict(name=name, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq=seq, tied=tied,
                  positions=family.positions, source=source)
    if _has_inventory(family.arch):
        return ModelConfig(**common, ffn=0 if family.default_ffn and not ffn else ffn, arch=family.arch,
                           kv_heads=0 if kv_heads == heads else kv_heads, mlp=family.mlp, norm=family.norm,
                           experts=experts or 0, experts_per_token=(top_k or 0) if experts else 0,
                           shared_experts=shared if experts else 0, expert_ffn=expert_ffn if experts else 0,
                           approximations=tuple(_native_notes(family, raw, layers, hidden, heads, kv_heads,
                                                              experts, shared) + notes))
    gpt_ffn, gpt_notes = _as_gpt(family, model_type, ffn, kv_heads, heads, experts, top_k, shared, expert_ffn)
    return ModelConfig(**common, ffn=gpt_ffn, approximations=tuple(gpt_notes + notes))


def _native_notes(family: Family, raw: dict, layers: int, hidden: int, heads: int, kv_heads: int,
                  experts: int | None, shared: int) -> list[str]:
    """What the llama/moe inventories (no biases, Mixtral routing, every layer
    the same) do not model of a family they are used for."""
    if family.arch not in ("llama", "moe"):
        return []
    notes = []
    kv_width = kv_heads * hidden // heads
    if family.biases in ("qkv", "attention"):
        per_layer = hidden + 2 * kv_width + (hidden if family.biases == "attention" else 0)
        which = "Q, K, V" + (" and output" if family.biases == "attention" else "") + " projections"
        notes.append(f"the biases of the {which} are not counted (the {family.arch!r} inventory has none): "
                     f"parameters are understated by {layers} × {per_layer:,} = {layers * per_layer:,}")
    if family.qk_norm:
        head = raw.get("head_dim") if isinstance(raw.get("head_dim"), int) else hidden // heads
        notes.append(f"the per-head RMSNorms on Q and K (QK-norm) are not counted: parameters are understated by "
                     f"{layers} × 2 × {head} = {layers * 2 * head:,}, and what these norms save for backward is "
                     "not counted")
    if experts:
        if family.shared_gate and shared:
            notes.append(f"the shared experts' sigmoid gate (h→1 per layer) is not counted: parameters are "
                         f"understated by {layers} × {hidden:,} = {layers * hidden:,}, and its matmul and saved "
                         "tensors (the gate and the shared experts' output) are not counted")
        renormalise = raw.get("norm_topk_prob", not family.shared_gate)
        if renormalise is False or family.shared_gate:
            notes.append("the routing is counted as Mixtral's (the top-k weights renormalised, kept in fp32)"
                         + (": this model does not renormalise them" if renormalise is False else "")
                         + (" and keeps them in bf16" if family.shared_gate else "")
                         + "; activations differ by a few values per token")
        dense = raw.get("mlp_only_layers") or []
        step = raw.get("decoder_sparse_step", 1)
        first_dense = raw.get("first_k_dense_replace", 0)
        if dense or (isinstance(step, int) and step > 1) or (isinstance(first_dense, int) and first_dense > 0):
            notes.append("some layers of this model have a dense MLP (mlp_only_layers, decoder_sparse_step or "
                         "first_k_dense_replace): every layer is counted as a mixture-of-experts layer")
    return notes


def _unknown_family(raw: dict) -> Family:
    """An unknown model type: the GPT layer, with the positions the file implies."""
    rope = any(key in raw for key in ("rope_theta", "rope_scaling", "rotary_dim", "rotary_pct"))
    return Family("gpt", "gelu", "layernorm", "rope" if rope else "learned", "all", True)


def _has_inventory(arch: str) -> bool:
    """Whether the bill itemises ``arch`` with its own inventory: a model the
    bill would count with another layer must say so (approximations).
    (Every billed arch has an inventory in ``architectures.ARCHITECTURES``; a
    test holds that, so reading a config never needs sympy.)"""
    return arch in config.BILLED_ARCHITECTURES


def _unmodelled_fields(raw: dict, family: Family | None, experts: int | None, where: str) -> list[str]:
    """Fields that change the model but that the family's inventory does not read:
    refused when the bill would be silently wrong (experts on a dense family),
    else one sentence each for the approximations list."""
    dense = family is not None and not family.moe
    if dense and experts and experts > 1:
        spelled = next(key for key in ("num_local_experts", "num_experts", "n_routed_experts") if raw.get(key))
        raise ConfigError(f"{where}: {spelled} = {experts} on model_type {raw.get('model_type')!r}, a dense family "
                          "the reader bills without experts; give the MoE model_type (e.g. mixtral, qwen2_moe) or "
                          f"remove {spelled}")
    notes = []
    quantization = raw.get("quantization_config")
    if isinstance(quantization, dict) and quantization:
        method = quantization.get("quant_method", "unnamed")
        notes.append(f"quantization_config ({str(method)[:40]}): the stored weights are quantised; the model "
                     "states are counted by the --optimizer recipe, not at the quantised width")
    mtp = next((raw[key] for key in ("num_nextn_predict_layers", "mtp_num_layers") if isinstance(raw.get(key), int)
                and not isinstance(raw.get(key), bool) and raw[key] > 0), 0)
    if mtp:
        notes.append(f"{mtp} multi-token-prediction layer(s) are not counted (parameters, activations, FLOPs)")
    return notes


def _common_notes(raw: dict, hidden: int, heads: int, seq: int) -> list[str]:
    """Features no inventory of this version models, whatever the family."""
    notes = []
    window = raw.get("sliding_window")
    use_window = raw.get("use_sliding_window", True)
    if isinstance(window, int) and not isinstance(window, bool) and 0 < window < seq and use_window:
        notes.append(f"sliding-window attention (window {window}) is counted as full attention over s: "
                     f"the attention-score terms (a·s² per layer) are overstated for s > {window}")
    head_dim = raw.get("head_dim")
    if isinstance(head_dim, int) and head_dim * heads != hidden:
        notes.append(f"head_dim {head_dim} × {heads} heads ≠ hidden_size {hidden}: attention is counted with "
                     f"heads of width hidden/heads = {Fraction(hidden, heads)}")
    return notes


def _as_gpt(family: Family, model_type: str, ffn: int, kv_heads: int, heads: int, experts: int | None,
            top_k: int | None, shared: int, expert_ffn: int) -> tuple[int, list[str]]:
    """The MLP width the GPT layer models ``family`` with, and what it approximates."""
    notes = []
    if family.arch != "gpt":
        notes.append(f"model_type {model_type!r} is not itemised with a {family.arch!r} inventory in this version: "
                     "its layers are counted with the GPT layer (Korthikanti et al. 2022 §4.1), approximated as "
                     "follows")
    if kv_heads != heads:
        notes.append(f"grouped-query attention ({kv_heads} key/value heads for {heads} query heads) is counted as "
                     f"multi-head attention: the K and V projections' weights and FLOPs and the saved K, V are "
                     f"counted for {heads} heads, {heads // kv_heads}× the model's")
    gated = family.mlp == "swiglu"
    # A gated MLP has three h×f matrices; a GeLU MLP of width 3f/2 has the same
    # weight count and matmul FLOPs (2 · h · 3f/2 = 3hf).
    width = expert_ffn if experts else ffn
    one = Fraction(3 * width, 2) if gated else Fraction(width)
    if one.denominator != 1:
        one = Fraction(width)
    if experts:
        holders = experts + shared
        gpt_ffn = int(one) * holders
        notes.append(f"the mixture of experts ({experts} experts, top-{top_k}"
                     + (f", {shared} shared" if shared else "")
                     + f", expert width {expert_ffn}) is counted as one dense MLP holding all {holders} experts' "
                     f"weights (width {gpt_ffn}): parameters and model states count every expert, but FLOPs and "
                     f"MLP activations are counted as if each token went through all of them "
                     f"({Fraction(holders, top_k + shared)}× the {top_k + shared} it uses); the router is not "
                     "counted")
    else:
        gpt_ffn = int(one) if gated or ffn else 0
    if gated:
        mlp = "each expert's SwiGLU MLP" if experts else "the SwiGLU MLP"
        if Fraction(3 * width, 2).denominator == 1:
            notes.append(f"{mlp} (gate and up h→{width}, down {width}→h) is counted as a GeLU MLP of "
                         f"width 3·{width}/2 = {int(one)}: the same weight count and matmul FLOPs, but the saved "
                         "activations are the GeLU MLP's, not SwiGLU's")
        else:
            notes.append(f"{mlp} (gate and up h→{width}, down {width}→h) is counted as a GeLU MLP of "
                         f"width {width}: the gate's weights, FLOPs and activations are not counted")
    if family.norm == "rmsnorm":
        notes.append("RMSNorm is counted as LayerNorm: a bias of h per norm that RMSNorm does not have is counted "
                     "as parameters, and LayerNorm's saved inputs stand in for RMSNorm's")
    if family.biases != "all":
        which = {"qkv": "the attention output and MLP linears", "attention": "the MLP linears"}.get(
            family.biases, "the linear layers")
        notes.append(f"biases are counted on {which}, which have none in this model")
    if not family.dropout:
        notes.append("this model trains without dropout, but the GPT layer's dropout masks and dropped-out "
                     "attention probabilities are counted: activations are overstated")
    if family.positions == "rope":
        notes.append("rotary position embeddings: no position table is counted (exact); what the rotation "
                     "saves for backward is not counted")
    return gpt_ffn, notes


def _name_for(path: Path) -> str:
    """``.../Llama-2-7b-hf/config.json`` is called ``Llama-2-7b-hf``."""
    return path.parent.name or path.stem if path.name == "config.json" else path.stem


def load_hf_config(path: str | Path) -> ModelConfig:
    """Read an HF ``config.json`` file into a :class:`ModelConfig`."""
    from ..core.inputs import InputError, clean, read_json_file

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise ConfigError(f"{clean(path)}: no such file; give a built-in model name or a path to a config.json")
    try:  # a regular file only, size and depth capped before parsing (symbolic.core.inputs)
        raw = read_json_file(path)
    except InputError as error:
        raise ConfigError(str(error)) from None
    meta = raw.get("_symbolic", {}) if isinstance(raw, dict) else {}
    meta = meta if isinstance(meta, dict) else {}  # a hostile "_symbolic": ignored, not trusted
    name = meta.get("name") or (raw.get("_name_or_path") if isinstance(raw, dict) else None)
    source = meta.get("source") or f"HF config.json ({path})"
    model = from_hf_dict(raw, str(name or _name_for(path)), source, where=str(path))
    return replace(model, params_label=meta.get("params_label", ""))


def builtin_models() -> dict[str, ModelConfig]:
    """The models shipped in ``symbolic/data/*.json``, by name."""
    found = []
    for entry in DATA.glob("*.json"):
        raw = json.loads(entry.read_text(encoding="utf-8"))
        meta = raw["_symbolic"]
        model = from_hf_dict(raw, meta["name"], meta["source"], where=f"symbolic/data/{entry.name}")
        found.append((meta["order"], replace(model, params_label=meta.get("params_label", ""))))
    return {model.name: model for _, model in sorted(found, key=lambda item: item[0])}
