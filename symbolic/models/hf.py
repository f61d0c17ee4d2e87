"""Models from HuggingFace ``config.json`` files, and the built-in models.

A ``config.json`` (the file ``transformers`` saves beside the weights) is read
into the same frozen :class:`~symbolic.models.config.ModelConfig` the presets use.
Its ``model_type`` names the family; the reader knows :data:`FAMILIES` (16
read here, and those read by a module of their own, :mod:`symbolic.models.families`)
and refuses any other in one line — there is no stand-in layer. Plain
Llama/Mistral layers get the ``llama`` inventory, Mixtral the ``moe`` one,
GPT-2 the ``gpt`` one; every other family (and a Llama with biases or its own
head_dim) is a ``composed`` layer: a :class:`~symbolic.models.config.Recipe` of
parts (:mod:`symbolic.models.architectures.composed`) whose own letters'
values go to ``ModelConfig.dims``. A field a file leaves out takes
transformers 5.24.0's default for its family (:data:`DEFAULTS`) — above all
``tie_word_embeddings``. What the bill still assumes of a config (MTP modules
HF does not build, a kernel HF does not run) is one sentence with its size in
``ModelConfig.approximations`` — a bill never shows an approximated number
without saying so.

Fields read (GPT-2 files spell the first five ``n_layer``, ``n_embd``,
``n_head``, ``n_inner``, ``n_positions``, as HF's ``attribute_map`` does):

==============================  ======  ======================================
config.json                     letter  note
==============================  ======  ======================================
num_hidden_layers               L       required
hidden_size                     h       required
num_attention_heads             a       required
vocab_size                      V       required
max_position_embeddings                 the longest s (``max_positions``); the
                                        default s is 4096 capped by it; GPT-2's
                                        n_positions is also the table's P rows
intermediate_size               f       GPT-2: null means 4h
num_key_value_heads             g       GQA (null: = heads)
head_dim                        d_h     when ≠ h/a (Llama-family attention)
tie_word_embeddings                     the family's default when absent
attention_bias, qkv_bias,               biases (Llama/Qwen3/OLMo-2/Gemma all
mlp_bias                                four; Qwen2 Q/K/V always)
hidden_act, activation_function         the MLP activation
use_parallel_residual                   GPT-NeoX's residual wiring
num_local_experts, num_experts, E       MoE experts (the families' spellings)
n_routed_experts
num_experts_per_tok             k       top-k
moe_intermediate_size           f_e     one expert's width
shared_expert_intermediate_size f_s     shared expert(s) width (DeepSeek:
n_shared_experts                        n_shared × f_e)
first_k_dense_replace,          L_d     dense layers of an MoE model
mlp_only_layers,
decoder_sparse_step
norm_topk_prob, topk_method             routing (saved tensors)
q_lora_rank, kv_lora_rank,      r_q,    MLA
qk_nope_head_dim,               r_kv,
qk_rope_head_dim, v_head_dim    d_n,
                                d_r, d_v
attn_logit_softcapping                  Gemma-2's tanh soft-cap
num_nextn_predict_layers                DeepSeek-V3 MTP: stated apart
sliding_window, layer_types,    w, L_w  sliding-window attention (models.windows):
use_sliding_window,                     the window and its layers; billed at the
max_window_layers                       window's band on the fused kernel
==============================  ======  ======================================

The built-in models are such files, shipped in ``symbolic/data/`` with a
``"_symbolic"`` object naming them (``name``, ``source``, ``params_label``,
``order``, their place in listings, and ``positions_follow_seq`` for the
papers' GPT models, whose position table Eq 2 sizes by s).
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from . import windows
from .config import ConfigError, ModelConfig, Recipe, default_seq
from .hf_fields import canonical
from .families import NOT_MODELLED
from .families import READERS as FAMILY_READERS

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

REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")


#: transformers 5.24.0's defaults for the fields this reader takes from a config,
#: per ``model_type`` (the ``configuration_<family>.py`` dataclass defaults;
#: ``tests/test_families.py`` compares this table with the installed classes).
#: A field absent from a config.json takes its family's default, as
#: ``AutoConfig`` would give it; ``None`` where HF derives it (heads: a; head_dim: h/a).
DEFAULTS: dict[str, dict] = {
    "gpt2": {"n_inner": None, "n_positions": 1024, "activation_function": "gelu_new", "tie_word_embeddings": True},
    "gpt_neox": {"intermediate_size": 24576, "max_position_embeddings": 2048, "tie_word_embeddings": False,
                 "use_parallel_residual": True, "attention_bias": True, "hidden_act": "gelu"},
    "llama": {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
              "head_dim": None, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
              "hidden_act": "silu"},
    "mistral": {"intermediate_size": 14336, "max_position_embeddings": 131072, "num_key_value_heads": 8,
                "head_dim": None, "tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": 4096},
    "mixtral": {"intermediate_size": 14336, "max_position_embeddings": 131072, "num_key_value_heads": 8,
                "head_dim": None, "tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": None,
                "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2": {"intermediate_size": 22016, "max_position_embeddings": 32768, "num_key_value_heads": 32,
              "tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False, "sliding_window": 4096},
    "qwen2_moe": {"intermediate_size": 5632, "max_position_embeddings": 32768, "num_key_value_heads": 16,
                  "tie_word_embeddings": False, "hidden_act": "silu", "use_sliding_window": False,
                  "sliding_window": 4096, "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
                  "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1, "mlp_only_layers": None,
                  "norm_topk_prob": False, "qkv_bias": True},
    "qwen3": {"intermediate_size": 22016, "max_position_embeddings": 32768, "num_key_value_heads": 32,
              "head_dim": 128, "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
              "use_sliding_window": False, "sliding_window": 4096},
    "qwen3_moe": {"intermediate_size": 6144, "max_position_embeddings": 32768, "num_key_value_heads": 4,
                  "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
                  "use_sliding_window": False, "sliding_window": 4096, "num_experts": 128, "num_experts_per_tok": 8,
                  "moe_intermediate_size": 768, "decoder_sparse_step": 1, "mlp_only_layers": None,
                  "norm_topk_prob": False},
    "gemma": {"intermediate_size": 24576, "max_position_embeddings": 8192, "num_key_value_heads": 16,
              "head_dim": 256, "tie_word_embeddings": True, "attention_bias": False, "hidden_act": "gelu_pytorch_tanh"},
    "gemma2": {"intermediate_size": 9216, "max_position_embeddings": 8192, "num_key_value_heads": 4,
               "head_dim": 256, "tie_word_embeddings": True, "attention_bias": False,
               "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096},
    "gemma3_text": {"intermediate_size": 9216, "max_position_embeddings": 131072, "num_key_value_heads": 4,
                    "head_dim": 256, "tie_word_embeddings": True, "attention_bias": False,
                    "hidden_activation": "gelu_pytorch_tanh", "sliding_window": 4096},
    "phi3": {"intermediate_size": 8192, "max_position_embeddings": 4096, "num_key_value_heads": None,
             "tie_word_embeddings": False, "hidden_act": "silu", "sliding_window": None},
    "olmo2": {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
              "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu"},
    "deepseek_v2": {"intermediate_size": 11008, "max_position_embeddings": 2048, "num_key_value_heads": None,
                    "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False, "hidden_act": "silu",
                    "n_routed_experts": 64, "num_experts_per_tok": None, "moe_intermediate_size": 1407,
                    "n_shared_experts": 2, "first_k_dense_replace": 0, "norm_topk_prob": False,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128},
    "deepseek_v3": {"intermediate_size": 18432, "max_position_embeddings": 4096, "num_key_value_heads": 128,
                    "tie_word_embeddings": False, "attention_bias": False, "hidden_act": "silu",
                    "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048,
                    "n_shared_experts": 1, "first_k_dense_replace": 3, "norm_topk_prob": True,
                    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                    "v_head_dim": 128},
}

#: The families read by a module of their own (:mod:`symbolic.models.families`): their defaults.
DEFAULTS.update({model_type: family.DEFAULTS for model_type, family in FAMILY_READERS.items()})

#: The MLP activations the parts model (HF ``hidden_act`` names); the chained ones are
#: several element-wise ops in HF (``NewGELUActivation``, ``FastGELUActivation``).
ACTIVATIONS = ("silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast", "relu")
CHAINED_ACTIVATIONS = ("gelu_new", "gelu_fast")

#: The model types this reader knows (HF's ``model_type`` strings), in the order they are listed.
FAMILIES = tuple(DEFAULTS)

#: MoE fields' spellings per family (the experts count).
_EXPERTS = {"mixtral": "num_local_experts", "qwen2_moe": "num_experts", "qwen3_moe": "num_experts",
            "deepseek_v2": "n_routed_experts", "deepseek_v3": "n_routed_experts"}
_EXPERTS.update({model_type: family.EXPERTS for model_type, family in FAMILY_READERS.items()
                 if getattr(family, "EXPERTS", None)})


#: model_types transformers 5.24.0 has no module for, published with remote code whose ``architectures`` class is one
#: of its own: model_type -> (that class, the family read). Kimi-K2's config.json names DeepseekV3ForCausalLM and maps
#: it to remote DeepSeek-V3 code (auto_map); transformers itself reads a kimi_k2 text_config as deepseek_v3
#: (models/kimi_k25/configuration_kimi_k25.py:85-86).
BY_ARCHITECTURE = {"kimi_k2": ("DeepseekV3ForCausalLM", "deepseek_v3")}


def family_of(raw: dict) -> str | None:
    """The model_type transformers builds ``raw`` as: its own, or the family its ``architectures`` names
    (:data:`BY_ARCHITECTURE`)."""
    model_type = raw.get("model_type")
    if model_type in BY_ARCHITECTURE and raw.get("architectures") == [BY_ARCHITECTURE[model_type][0]]:
        return BY_ARCHITECTURE[model_type][1]
    return model_type


def _field(raw: dict, name: str):
    """``raw[name]`` under any of its spellings; ``None`` when absent or null."""
    for key in (name, *ALIASES.get(name, ())):
        if raw.get(key) is not None:
            return raw[key]
    return None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _present(raw: dict, name: str) -> bool:
    return any(key in raw for key in (name, *ALIASES.get(name, ())))


def _count(raw: dict, name: str, where: str, default=None) -> int | None:
    """A positive integer field (``default`` when absent or null); anything else is a
    :class:`ConfigError` naming the field."""
    value = _field(raw, name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{where}: {name} must be a positive integer, got {json.dumps(value)}")
    return value


def _flag(raw: dict, name: str, where: str, default: bool) -> bool:
    value = raw.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {name} must be true or false, got {json.dumps(value)}")
    return value


def _known(raw: dict, where: str) -> str:
    model_type = raw.get("model_type")
    if model_type == "gemma3" and isinstance(raw.get("text_config"), dict):
        raise ConfigError(f"{where}: model_type 'gemma3' is the multimodal Gemma 3 (vision tower + text); "
                          "give its text_config as a file with model_type 'gemma3_text'")
    if isinstance(model_type, str) and model_type in NOT_MODELLED and model_type not in DEFAULTS:
        raise ConfigError(f"{where}: model_type {json.dumps(model_type)} is not modelled: {NOT_MODELLED[model_type]}")
    if not isinstance(model_type, str) or model_type not in DEFAULTS:
        shown = json.dumps(model_type) if model_type is not None else "(none)"
        raise ConfigError(f"{where}: model_type {shown} is not a family this version models exactly; "
                          f"known: {', '.join(FAMILIES)}")
    return model_type


def from_hf_dict(raw: dict, name: str, source: str = "", where: str = "config.json",
                 positions_follow_seq: bool = False) -> ModelConfig:
    """:func:`_from_hf_dict`, with ``seq`` the stated default (:func:`~symbolic.models.config.default_seq`)
    and the position table's length kept as ``max_positions``: an HF config gives no training length,
    and its table's maximum (131,072 for Llama-3.1) is not what people train at. The papers' built-ins
    (``positions_follow_seq``) keep their training length."""
    model = _from_hf_dict(raw, name, source, where, positions_follow_seq)
    if positions_follow_seq:
        return model
    return replace(model, seq=default_seq(model.seq), max_positions=model.seq)


#: Multimodal configs whose text model is their ``text_config``: model_type -> (the text model's type, what
#: of the rest is not counted). Llama4Config (its Llama4TextConfig); Gemma3nConfig (Gemma3nTextConfig,
#: Gemma3nForCausalLM).
WRAPPED_TEXT_MODELS = {
    "llama4": ("llama4_text", "the vision tower and the multimodal projector are"),
    "gemma3n": ("gemma3n_text", "the vision tower (vision_config), the audio tower (audio_config) and their "
                                "multimodal embedders are"),
}


def _from_hf_dict(raw: dict, name: str, source: str = "", where: str = "config.json",
                  positions_follow_seq: bool = False) -> ModelConfig:
    """The :class:`ModelConfig` of a parsed HF ``config.json``.

    The ``model_type`` must be one of :data:`FAMILIES` (else one line, exit
    2); a field the file leaves out takes transformers 5.24.0's default for
    that family (:data:`DEFAULTS`). ``where`` names the file in error
    messages. ``positions_follow_seq``: a learned position table sized by the
    training sequence, as the papers count it (the built-in GPT models);
    otherwise a learned table has ``n_positions`` rows and a longer ``--seq``
    is refused. Raises :class:`ConfigError` (one line naming the field) for
    missing, non-integer or non-positive fields.
    """
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a config.json holds one JSON object, not {type(raw).__name__}")
    wrapper = WRAPPED_TEXT_MODELS.get(raw.get("model_type"))
    if wrapper is not None:  # a multimodal config: the text model is its text_config
        text_type, not_counted = wrapper
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise ConfigError(f"{where}: model_type {raw['model_type']!r} needs its text_config (a JSON object with "
                              f"the text model's fields); or give that object as a file with model_type {text_type!r}")
        model = _from_hf_dict({**text, "model_type": text_type}, name, source, f"{where}: text_config",
                              positions_follow_seq)
        return replace(model, approximations=model.approximations + (
            f"model_type {raw['model_type']!r}: its text model (text_config) is billed; {not_counted} not counted",))
    if raw.get("model_type") in BY_ARCHITECTURE:
        model_type = raw["model_type"]
        architecture, family = BY_ARCHITECTURE[model_type]
        if family_of(raw) != family:
            raise ConfigError(f"{where}: model_type {json.dumps(model_type)} is read through its architectures "
                              f"[{json.dumps(architecture)}] (remote code: transformers 5.24.0 has no module for it); "
                              f"this file gives architectures {json.dumps(raw.get('architectures'))}")
        model = _from_hf_dict({**raw, "model_type": family}, name, source, where, positions_follow_seq)
        return replace(model, approximations=(
            f"model_type {json.dumps(model_type)} (no transformers module) is read as {family}, the family its "
            f"architectures {architecture} names: parameters as HF's {architecture} builds them from these fields",)
            + model.approximations)
    model_type = _known(raw, where)
    raw = canonical(raw, model_type, where)  # transformers' attribute_map spellings, cross-field checks
    if model_type == "nemotron_h" and _field(raw, "num_hidden_layers") is None \
            and isinstance(raw.get("layers_block_type"), list):  # NemotronHConfig's layer count is its blocks'
        raw = {**raw, "num_hidden_layers": len(raw["layers_block_type"])}
    defaults = DEFAULTS[model_type]
    missing = [field for field in REQUIRED if _field(raw, field) is None]
    if missing:
        raise ConfigError(f"{where}: missing required field(s) {', '.join(missing)}; "
                          "add them to the file (see `symbolic.models.hf` for the fields read)")
    layers, hidden, heads, vocab = (_count(raw, field, where) for field in REQUIRED)
    if model_type in FAMILY_READERS:
        return _from_family(FAMILY_READERS[model_type], raw, name, source, where, (layers, hidden, heads, vocab))
    if model_type == "gpt2":
        seq = _count(raw, "max_position_embeddings", where, defaults["n_positions"])
        ffn = _count(raw, "intermediate_size", where) or 0
    else:
        seq = _count(raw, "max_position_embeddings", where, defaults["max_position_embeddings"])
        ffn = _count(raw, "intermediate_size", where, defaults["intermediate_size"])
    head_dim = None
    if "head_dim" in defaults or model_type in ("qwen2", "qwen2_moe", "qwen3_moe", "phi3", "olmo2"):
        # HF's attention takes config.head_dim when the config has one (getattr), else h // a.
        head_dim = _count(raw, "head_dim", where, defaults.get("head_dim") if not _present(raw, "head_dim")
                          else None)
    if head_dim is None and model_type not in ("deepseek_v2", "deepseek_v3") and hidden % heads:
        raise ConfigError(f"{where}: num_attention_heads ({heads}) must divide hidden_size ({hidden}): "
                          "each head has width hidden_size/num_attention_heads (or give head_dim)")
    kv_default = defaults.get("num_key_value_heads")
    kv_heads = _count(raw, "num_key_value_heads", where, kv_default if _present(raw, "num_key_value_heads") is False
                      else None) or heads
    if model_type in ("gpt2", "gpt_neox"):
        kv_heads = heads  # no key/value grouping in these families
    if heads % kv_heads:
        raise ConfigError(f"{where}: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})")
    tied = _flag(raw, "tie_word_embeddings", where, defaults["tie_word_embeddings"])

    own_head = head_dim is not None and head_dim * heads != hidden

    unmodelled = _unmodelled_fields(raw, model_type, where)
    recipe, dims, moe, notes = _recipe(model_type, raw, defaults, where, layers, hidden, heads, ffn, own_head)
    notes += unmodelled
    if own_head:
        dims["d_h"] = head_dim
    rule = windows.rule_of(model_type)
    if rule is None:
        notes += _window_notes(model_type, raw, defaults, seq)
    else:
        value = lambda name: _field(raw, name) if _present(raw, name) else defaults.get(name)  # noqa: E731
        found = windows.read(rule, value, raw, layers, where, model_type)
        recipe = windows.apply(recipe, dims, found)
        if found:
            notes.append(windows.note(found, heads, kv_heads, head_dim or hidden // heads, default_seq(seq)))
    if recipe.norm in ("rmsnorm_offset", "rmsnorm_fp32"):
        notes.append(f"the output side's final norm is counted as Llama's RMSNorm: {model_type}'s keeps x·rstd in fp32, "
                     f"2·s·b·h bytes more ({2 * hidden:,} B per token)"
                     + (f", and the (1 + weight) fp32 copy, {4 * hidden:,} B" if recipe.norm == "rmsnorm_offset"
                        else "") + " (the output side is reported beside the total, not in it)")
    if model_type == "gemma2":
        notes.append("attention is counted as a fused kernel (FlashAttention-2, which soft-caps natively): HF's "
                     "Gemma-2 has no SDPA path and its eager attention keeps the s×s scores — the fp32 softmax, the "
                     "bf16 probabilities" + (" and the soft-cap's tanh" if recipe.softcap else "") +
                     f", {8 if recipe.softcap else 6}·b·a·s² bytes per layer — and K, V repeated to a heads (traced)")
    if recipe.attention == "mla" and dims["d_v"] != dims["d_n"] + dims["d_r"]:
        notes.append(_mla_math_note(recipe, dims, heads, seq))

    common = dict(name=name, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq=seq, tied=tied,
                  source=source)
    if model_type == "gpt2":
        activation = raw.get("activation_function", defaults["activation_function"])
        if activation not in ("gelu_new", "gelu", "gelu_fast"):
            raise ConfigError(f"{where}: activation_function {activation!r}: the GPT-2 reader models gelu_new, "
                              "gelu_fast and gelu")
        # The papers' GPT models count the fused GeLU (one saved input); an HF GPT-2 runs HF's chain.
        return ModelConfig(**common, ffn=ffn, positions="learned",
                           mlp="gelu" if positions_follow_seq else activation,
                           position_table=0 if positions_follow_seq else seq,
                           approximations=tuple(([] if positions_follow_seq else _gpt2_notes(raw, defaults))
                                                + unmodelled))
    experts, top_k, expert_ffn, shared = moe
    plain_llama = (model_type in ("llama", "mistral") and recipe == Recipe(model_type) and not own_head)
    plain_mixtral = model_type == "mixtral" and not own_head and not recipe.window
    arch = "llama" if plain_llama else "moe" if plain_mixtral else "composed"
    return ModelConfig(**common, ffn=ffn, positions="rope", arch=arch,
                       kv_heads=0 if kv_heads == heads else kv_heads,
                       mlp="swiglu" if recipe.mlp == "gated" else "gelu",
                       norm="layernorm" if recipe.norm == "layernorm" else "rmsnorm",
                       experts=experts, experts_per_token=top_k, shared_experts=shared, expert_ffn=expert_ffn,
                       approximations=tuple(notes), recipe=None if arch != "composed" else recipe,
                       dims=tuple(sorted(dims.items())) if arch == "composed" else ())


class FamilyFields:
    """A config's fields as a family module reads them (:mod:`symbolic.models.families`): under HF's
    names and ``attribute_map`` spellings, a field the file leaves out at the family's default."""

    def __init__(self, raw: dict, model_type: str, where: str, sizes: tuple[int, int, int, int]):
        self.raw, self.model_type, self.where = raw, model_type, where
        self.layers, self.hidden, self.heads, self.vocab = sizes
        self.defaults = DEFAULTS[model_type]

    def value(self, name: str):
        """The field's value (any spelling); the family's default when the file leaves it out."""
        return _field(self.raw, name) if _present(self.raw, name) else self.defaults.get(name)

    def count(self, name: str, default=None) -> int | None:
        """A positive integer field; None when null (HF derives it), ``default`` when neither given
        nor defaulted."""
        value = self.value(name)
        if value is None:
            return default
        return _count({name: value}, name, self.where)

    def flag(self, name: str) -> bool:
        return _flag({name: self.value(name)}, name, self.where, bool(self.defaults.get(name, False)))

    def activation(self, name: str = "hidden_act", known: tuple = ACTIVATIONS) -> str:
        act = self.value(name)
        act = {"swish": "silu"}.get(act, act)  # transformers' ACT2FN: "swish" is SiLU
        if act not in known:
            self.refuse(name, act, f"an activation the MLP part models ({', '.join(known)})")
        return act

    def refuse(self, name: str, value, what: str):
        raise ConfigError(f"{self.where}: {name} {json.dumps(value)} on model_type {self.model_type!r}: "
                          f"this version models {what}")


def _from_family(family, raw: dict, name: str, source: str, where: str, sizes: tuple) -> ModelConfig:
    """The :class:`ModelConfig` of a family read by its own module (:mod:`symbolic.models.families`):
    the module reads its recipe and numbers; the checks every family shares are here."""
    model_type = family.MODEL_TYPE
    layers, hidden, heads, vocab = sizes
    read = family.read(FamilyFields(raw, model_type, where, sizes))
    head_dim = read.head_dim
    own_head = head_dim is not None and head_dim * heads != hidden
    if not own_head and hidden % heads:
        raise ConfigError(f"{where}: num_attention_heads ({heads}) must divide hidden_size ({hidden}): "
                          "each head has width hidden_size/num_attention_heads (or give head_dim)")
    kv_heads = read.kv_heads
    if heads % kv_heads:
        raise ConfigError(f"{where}: num_key_value_heads ({kv_heads}) must divide num_attention_heads ({heads})")
    tied = _flag(raw, "tie_word_embeddings", where, DEFAULTS[model_type]["tie_word_embeddings"]) \
        if read.tied is None else read.tied
    notes = [*read.notes, *_unmodelled_fields(raw, model_type, where)]
    dims = dict(read.dims)
    if own_head:
        dims["d_h"] = head_dim
    recipe = replace(read.recipe, head_dim=own_head)
    rule = windows.rule_of(model_type, family)
    if rule is None:
        if not getattr(family, "READS_WINDOWS", False):  # dots1 states its own
            notes += _window_notes(model_type, raw, DEFAULTS[model_type], read.seq)
    else:
        fields = FamilyFields(raw, model_type, where, sizes)
        found = windows.read(rule, fields.value, raw, layers, where, model_type)
        recipe = windows.apply(recipe, dims, found)
        if found:
            notes.append(windows.note(found, heads, kv_heads, head_dim or hidden // heads, default_seq(read.seq)))
    experts, top_k, expert_ffn, shared = read.moe
    return ModelConfig(name=name, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq=read.seq, tied=tied,
                       source=source, ffn=read.ffn, positions="rope", arch="composed",
                       kv_heads=0 if kv_heads == heads else kv_heads,
                       mlp="swiglu" if recipe.mlp == "gated" else "gelu",
                       norm="layernorm" if recipe.norm.startswith("layernorm") else "rmsnorm",
                       experts=experts, experts_per_token=top_k, shared_experts=shared, expert_ffn=expert_ffn,
                       approximations=tuple(notes), recipe=recipe, dims=tuple(sorted(dims.items())))


def _recipe(model_type: str, raw: dict, defaults: dict, where: str, layers: int, hidden: int, heads: int,
            ffn: int, own_head: bool):
    """The family's :class:`Recipe`, its letters' values, its MoE numbers (E, k, f_e, shared count)
    and what it approximates."""
    flag = lambda name: _flag(raw, name, where, defaults.get(name, False))  # noqa: E731
    act = raw.get("hidden_activation") or raw.get("hidden_act") or defaults.get("hidden_activation") \
        or defaults.get("hidden_act", "silu")
    act = {"swish": "silu"}.get(act, act)  # transformers' ACT2FN: "swish" is SiLU
    if act not in ACTIVATIONS:
        raise ConfigError(f"{where}: hidden_act {act!r} is not an activation the MLP part models "
                          f"({', '.join(ACTIVATIONS)})")
    dims: dict[str, int] = {}
    notes: list[str] = []
    moe = (0, 0, 0, 0)
    base = dict(family=model_type, head_dim=own_head, activation=act)
    if model_type == "gpt2":
        return Recipe("gpt2"), dims, moe, notes
    if model_type == "gpt_neox":
        bias = flag("attention_bias")
        parallel = flag("use_parallel_residual")
        recipe = Recipe(**base, norm="layernorm", residual="parallel" if parallel else "sequential",
                        qkv_bias=bias, o_bias=bias, fused_qkv=True, mlp="plain", mlp_bias=True, rotary_cat=True)
        return recipe, dims, moe, notes
    if model_type in ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "olmo2", "phi3"):
        attention_bias = flag("attention_bias") if model_type in ("llama", "qwen3", "qwen3_moe", "olmo2") else False
        # Qwen2 hard-codes bias=True on Q, K, V; Qwen2-MoE reads qkv_bias; the others attention_bias (all four)
        qkv_bias = {"qwen2": True, "qwen2_moe": flag("qkv_bias")}.get(model_type, attention_bias)
        recipe = dict(base, qkv_bias=qkv_bias, o_bias=attention_bias,
                      mlp_bias=flag("mlp_bias") if model_type == "llama" else False,
                      qk_norm="head" if model_type in ("qwen3", "qwen3_moe") else "full" if model_type == "olmo2"
                      else "none",
                      placement="post" if model_type == "olmo2" else "pre",
                      norm="rmsnorm_fp32" if model_type == "olmo2" else "rmsnorm",
                      fused_qkv=model_type == "phi3", fused_gate_up=model_type == "phi3",
                      rotary_cat=model_type == "phi3")
        no_experts = model_type in ("qwen2_moe", "qwen3_moe") and _field(raw, "num_experts") == 0 \
            and _is_int(_field(raw, "num_experts"))
        if no_experts:
            # Qwen3MoeDecoderLayer (modeling_qwen3_moe.py:310-315; Qwen2-MoE's :358-363, transformers 5.24.0): a
            # layer is MoE iff not in mlp_only_layers and num_experts > 0 and (idx + 1) % decoder_sparse_step == 0,
            # else the dense MLP of intermediate_size: with no experts every layer is dense, no router, no shared
            notes.append(f"num_experts = 0: HF builds every one of the {layers} layers with the dense MLP "
                         f"(width {ffn}), no router or experts; billed as that dense model (the MoE fields are "
                         "not read)")
        elif model_type in ("qwen2_moe", "qwen3_moe", "mixtral"):
            moe, extra, more, moe_notes = _moe_fields(model_type, raw, defaults, where, layers, ffn)
            recipe.update(extra)
            dims.update(more)
            notes += moe_notes
        return Recipe(**recipe), dims, moe, notes
    if model_type in ("gemma", "gemma2", "gemma3_text"):
        bias = flag("attention_bias")
        softcap = model_type == "gemma2" and raw.get("attn_logit_softcapping", 50.0) is not None
        recipe = Recipe(**base, norm="rmsnorm_offset", placement="pre" if model_type == "gemma" else "sandwich",
                        qkv_bias=bias, o_bias=bias, qk_norm="head" if model_type == "gemma3_text" else "none",
                        softcap=softcap)
        return recipe, dims, moe, notes
    if model_type in ("deepseek_v2", "deepseek_v3"):
        mla = {}
        for key, letter in (("kv_lora_rank", "r_kv"), ("qk_nope_head_dim", "d_n"), ("qk_rope_head_dim", "d_r"),
                            ("v_head_dim", "d_v")):
            mla[letter] = _count(raw, key, where, defaults[key])
        q_lora = _count(raw, "q_lora_rank", where, defaults["q_lora_rank"] if "q_lora_rank" not in raw else None)
        if q_lora:
            mla["r_q"] = q_lora
        dims.update(mla)
        bias = flag("attention_bias")
        recipe = dict(base, attention="mla", q_lora=bool(q_lora), o_bias=bias,
                      mlp_bias=flag("mlp_bias") if model_type == "deepseek_v2" else False, head_dim=False)
        moe, extra, more, moe_notes = _moe_fields(model_type, raw, defaults, where, layers, ffn)
        recipe.update(extra)
        dims.update(more)
        notes += moe_notes
        if recipe["mlp_bias"]:
            raise ConfigError(f"{where}: mlp_bias true for {model_type}: the shared and routed experts' biases are "
                              "not modelled; this version refuses it")
        notes += _mtp_notes(model_type, raw, hidden, vocab=_count(raw, "vocab_size", where), moe=moe,
                            dims=dims, recipe=recipe, heads=heads)
        if model_type == "deepseek_v3" and layers > dims.get("L_d", 0):
            sparse = layers - dims.get("L_d", 0)
            notes.append(f"the router's e_score_correction_bias ({moe[0]} per MoE layer, {sparse} × {moe[0]} = "
                         f"{sparse * moe[0]:,} values) is an fp32 buffer in HF, not a parameter: stored in the "
                         "checkpoint, not trained by the optimizer, not counted in params")
        return Recipe(**recipe), dims, moe, notes
    raise ConfigError(f"{where}: model_type {model_type!r} has no recipe")  # unreachable: DEFAULTS lists the families


#: Every spelling of the experts count, in any family (a dense family's reader must not ignore one).
_EXPERTS_SPELLINGS = ("num_local_experts", "num_experts", "n_routed_experts")


def _unmodelled_fields(raw: dict, model_type: str, where: str) -> list[str]:
    """Fields that change the model but that the family's recipe does not read:
    refused when the bill would be silently wrong (experts on a dense family),
    else one sentence each for the approximations list. DeepSeek-V3's
    multi-token prediction is stated exactly by :func:`_mtp_notes`."""
    if model_type not in _EXPERTS:
        spelled = next((key for key in _EXPERTS_SPELLINGS if isinstance(raw.get(key), int)
                        and not isinstance(raw.get(key), bool) and raw[key] > 1), None)
        if spelled:
            raise ConfigError(f"{where}: {spelled} = {raw[spelled]} on model_type {model_type!r}, a dense family "
                              "the reader bills without experts; give the MoE model_type (e.g. mixtral, qwen2_moe, "
                              f"qwen3_moe) or remove {spelled}")
    notes = []
    quantization = raw.get("quantization_config")
    if isinstance(quantization, dict) and quantization:
        from ..core.inputs import clean

        method = clean(quantization.get("quant_method", "unnamed"))
        notes.append(f"quantization_config ({method[:40]}): the stored weights are quantised; the model "
                     "states are counted by the --optimizer recipe, not at the quantised width")
    keys = ("mtp_num_layers",) if model_type == "deepseek_v3" else ("num_nextn_predict_layers", "mtp_num_layers")
    mtp = next((raw[key] for key in keys if isinstance(raw.get(key), int)
                and not isinstance(raw.get(key), bool) and raw[key] > 0), 0)
    if mtp:
        notes.append(f"{mtp} multi-token-prediction layer(s) are not counted (parameters, activations, FLOPs)")
    return notes


def _moe_fields(model_type: str, raw: dict, defaults: dict, where: str, layers: int, ffn: int):
    """(E, k, f_e, shared count), the recipe's MoE fields and the letters' values of an MoE family."""
    key = _EXPERTS[model_type]
    experts = _count(raw, key, where, defaults.get(key))
    top_k = _count(raw, "num_experts_per_tok", where, defaults.get("num_experts_per_tok"))
    if not experts or not top_k:
        raise ConfigError(f"{where}: missing required field num_experts_per_tok for a mixture of experts "
                          f"({experts} experts)" if experts else f"{where}: missing required field {key}")
    if top_k > experts:
        raise ConfigError(f"{where}: num_experts_per_tok ({top_k}) exceeds the number of experts ({experts})")
    if model_type == "mixtral":
        return (experts, top_k, ffn, 0), {"moe": "mixtral"}, {}, []
    expert_ffn = _count(raw, "moe_intermediate_size", where, defaults["moe_intermediate_size"])
    norm = _flag(raw, "norm_topk_prob", where, defaults["norm_topk_prob"])
    extra = {"moe": model_type + ("_norm" if norm else "")}
    if model_type == "deepseek_v2":  # HF's V2 router does not read norm_topk_prob; its topk_method matters
        method = raw.get("topk_method", "greedy")
        if method not in ("greedy", "group_limited_greedy"):
            raise ConfigError(f"{where}: topk_method {method!r}: DeepseekV2TopkRouter knows greedy and "
                              "group_limited_greedy")
        extra = {"moe": "deepseek_v2" + ("_group" if method == "group_limited_greedy" else "")}
    dims: dict[str, int] = {}
    notes: list[str] = []
    shared = 0
    if model_type == "qwen2_moe":
        width = _field(raw, "shared_expert_intermediate_size")
        width = defaults["shared_expert_intermediate_size"] if width is None and \
            "shared_expert_intermediate_size" not in raw else width
        # HF builds the shared expert (width f_s, possibly 0) and its sigmoid gate h→1 in every MoE layer
        if width != 0:
            width = _count(raw, "shared_expert_intermediate_size", where, width)
        extra.update(shared=True, shared_gate=True)
        dims["f_s"] = width
        shared = width // expert_ffn if width % expert_ffn == 0 else 0
    if model_type in ("deepseek_v2", "deepseek_v3"):
        n_shared = raw.get("n_shared_experts", defaults["n_shared_experts"])
        # HF builds shared_experts = MLP(moe_intermediate_size * n_shared_experts) (modeling_deepseek_v3.py:212,
        # modeling_deepseek_v2.py:127): None fails there; 0 builds it 0 wide (no parameters), run and added as zeros
        if isinstance(n_shared, bool) or not isinstance(n_shared, int) or n_shared < 0:
            raise ConfigError(f"{where}: n_shared_experts must be a non-negative integer for {model_type} "
                              "(HF builds one shared MLP of moe_intermediate_size × n_shared_experts), got "
                              f"{json.dumps(n_shared)}")
        extra.update(shared=True)
        dims["f_s"] = expert_ffn * n_shared
        shared = n_shared
    dense = _dense_layers(model_type, raw, defaults, where, layers)
    if dense:
        extra["dense_layers"] = True
        dims["L_d"] = dense
        if model_type in ("deepseek_v2", "deepseek_v3"):  # the first L_d: bill and timeline place them
            notes.append(f"{dense} of the {layers} layers (the first {dense}) have a dense MLP (width {ffn}) instead of "
                         "the MoE: parameters, FLOPs and activations over the whole model are exact; the inventory's "
                         "layer is the layers' average, which bill and timeline resolve stage by stage (each stage "
                         "its own dense and MoE layers, layout.stages); plan and solve price a stage at L/p average "
                         "layers")
        else:
            notes.append(f"{dense} of the {layers} layers have a dense MLP (width {ffn}) instead of the MoE: parameters, "
                         "FLOPs and activations over the whole model are exact; a layer's terms are the layers' average, "
                         "so under pipeline parallelism (pp > 1) the stage holding the dense layers is not itemised apart")
    return (experts, top_k, expert_ffn, shared), extra, dims, notes


def _dense_layers(model_type: str, raw: dict, defaults: dict, where: str, layers: int) -> int:
    """How many layers HF builds with a dense MLP instead of the MoE."""
    if model_type in ("deepseek_v2", "deepseek_v3"):
        first = raw.get("first_k_dense_replace", defaults["first_k_dense_replace"])
        if not isinstance(first, int) or isinstance(first, bool) or first < 0:
            raise ConfigError(f"{where}: first_k_dense_replace must be a non-negative integer, got {json.dumps(first)}")
        # DeepseekV3DecoderLayer (modeling_deepseek_v3.py:493; V2's :428): MoE iff layer_idx >= first_k_dense_replace,
        # so a value past the layer count makes every layer dense
        return min(first, layers)
    only = raw.get("mlp_only_layers") or []
    step = raw.get("decoder_sparse_step", defaults["decoder_sparse_step"])
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise ConfigError(f"{where}: mlp_only_layers must be a list of layer indices, got {json.dumps(only)}")
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise ConfigError(f"{where}: decoder_sparse_step must be a positive integer, got {json.dumps(step)}")
    # Qwen2MoeDecoderLayer: MoE iff idx not in mlp_only_layers and (idx + 1) % decoder_sparse_step == 0
    return sum(1 for i in range(layers) if i in only or (i + 1) % step != 0)


def _mtp_notes(model_type, raw, hidden, vocab, moe, dims, recipe, heads) -> list[str]:
    """DeepSeek-V3's multi-token-prediction modules: counted apart (HF does not build them)."""
    modules = raw.get("num_nextn_predict_layers", 0)
    if model_type != "deepseek_v3" or not isinstance(modules, int) or isinstance(modules, bool) or modules <= 0:
        return []
    experts, top_k, expert_ffn, _ = moe
    h, a = hidden, heads
    r_kv, d_n, d_r, d_v = dims["r_kv"], dims["d_n"], dims["d_r"], dims["d_v"]
    r_q = dims.get("r_q")
    attention = ((h * r_q + r_q + r_q * a * (d_n + d_r)) if r_q else h * a * (d_n + d_r)) \
        + h * (r_kv + d_r) + r_kv + r_kv * a * (d_n + d_v) + a * d_v * h
    moe_mlp = h * experts + experts * 3 * h * expert_ffn + 3 * h * dims["f_s"]
    layer = attention + moe_mlp + 2 * h
    own = 2 * h * h + 3 * h  # eh_proj (2h -> h), enorm, hnorm, the shared head's norm
    per_module = layer + own
    return [f"multi-token prediction (num_nextn_predict_layers = {modules}, DeepSeek-V3 §2.2) is not built by HF's "
            f"DeepseekV3ForCausalLM and not counted: each module adds {per_module:,} parameters (one MoE decoder "
            f"layer {layer:,}, the 2h→h projection and three norms {own:,}), and {2 * vocab * h:,} more where its "
            f"embedding and output head are stored as copies (the released checkpoint does); total "
            f"{modules * per_module:,} (+{modules * 2 * vocab * h:,})"]


def _mla_math_note(recipe: Recipe, dims: dict, heads: int, seq: int) -> str:
    """What MLA keeps on SDPA's math path beyond the fused kernel the bill counts, exactly: the two
    declared inventories' difference (both traced on CPU, tests/test_family_traces.py), per layer, as a
    formula and at the model's default sequence, b = 1."""
    from sympy import Add, factor, sstr

    from ..core.dims import SYMBOLS
    from .architectures import composed

    def total(kernel):
        return Add(*(term.bytes for term in composed.saved_tensors(recipe, kernel, "cpu")))

    gap = factor(total("math") - total("fused"))
    values = {SYMBOLS[letter]: value for letter, value in dims.items() if letter in SYMBOLS}
    values.update({SYMBOLS["a"]: heads, SYMBOLS["s"]: seq, SYMBOLS["b"]: 1})
    at = int(gap.subs(values))
    return ("MLA's attention core is counted as a fused kernel (Q, K at d_n + d_r, V as the slice of kv_b's output it "
            "is, the output and its token-major copy, an fp32 log-sum-exp): with V narrower than Q and K, torch SDPA "
            "falls back to its math path on CPU, which keeps fp32 Q, Kᵀ, V and the s×s probabilities instead — "
            f"{sstr(gap).replace('**', '^')} bytes per layer more (traced, exact), {at:,} B per layer at s = {seq:,} "
            "(max_position_embeddings), b = 1; which kernel a GPU runs depends on its backend")


def _window_notes(model_type: str, raw: dict, defaults: dict, seq: int) -> list[str]:
    """Sliding-window attention: HF applies the window as a mask, so what it saves and what FlopCounterMode
    counts are full attention's; a kernel with a native window (flash-attn window_size) multiplies less."""
    window = raw.get("sliding_window", defaults.get("sliding_window"))
    use = raw.get("use_sliding_window", defaults.get("use_sliding_window", True))
    if not (isinstance(window, int) and not isinstance(window, bool) and 0 < window < seq and use):
        return []
    layers = " on its sliding layers" if model_type in ("gemma2", "gemma3_text") else ""
    return [f"sliding-window attention (window {window}){layers} is applied by HF as a mask: the saved tensors and "
            f"FLOPs are counted over the full s×s, as HF computes them; a kernel with a native window does "
            f"fewer attention FLOPs for s > {window}"]


def _gpt2_notes(raw: dict, defaults: dict) -> list[str]:
    """What HF's eager GPT-2 layer keeps that the inventory (symbolic in b) does not: at b = 1 the
    batched matmul's reshape of Q (a slice of c_attn's output) is a view, so the whole 3h-wide
    output stays alive (traced)."""
    return ["at micro-batch 1, HF's eager GPT-2 attention keeps c_attn's whole output (6·s·h bytes per layer) "
            "where Q alone (2·s·h) is declared — the batched matmul's reshape of a slice is a view only when "
            "b = 1: 4·s·h bytes per layer more than the bill shows (traced); exact for b ≥ 2"]


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
    model = from_hf_dict(raw, str(name or _name_for(path)), source, where=str(path),
                         positions_follow_seq=meta.get("positions_follow_seq", False) is True)
    return replace(model, params_label=meta.get("params_label", ""))


def builtin_entries() -> dict[str, Path]:
    """The models shipped in ``symbolic/data/*.json``: each one's name and file, in their stated order
    (only the files' ``_symbolic`` blocks are read: a model is built when it is asked for)."""
    found = []
    for entry in DATA.glob("*.json"):
        meta = json.loads(entry.read_text(encoding="utf-8"))["_symbolic"]
        found.append((meta["order"], meta["name"], entry))
    return {name: entry for _, name, entry in sorted(found, key=lambda item: item[0])}


def builtin_model(entry: Path) -> ModelConfig:
    """The built-in model of one ``symbolic/data/*.json`` file."""
    raw = json.loads(entry.read_text(encoding="utf-8"))
    meta = raw["_symbolic"]
    model = from_hf_dict(raw, meta["name"], meta["source"], where=f"symbolic/data/{entry.name}",
                         positions_follow_seq=meta.get("positions_follow_seq", False) is True)
    return replace(model, params_label=meta.get("params_label", ""))


def builtin_models() -> dict[str, ModelConfig]:
    """The models shipped in ``symbolic/data/*.json``, by name."""
    return {name: builtin_model(entry) for name, entry in builtin_entries().items()}
