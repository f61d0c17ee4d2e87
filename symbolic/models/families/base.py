"""What a family's reader returns, and the config fields it reads through.

A family module (one per HF ``model_type``) holds transformers' defaults for
the fields it reads (``DEFAULTS``), the file its recipe is read from
(``SOURCE``), its page title (``TITLE``) and ``read(fields) -> Read``: the
:class:`~symbolic.models.config.Recipe` of its layer and what the numbers
of the config are. :mod:`symbolic.models.hf` does the rest (the required
fields, the checks every family shares, the ModelConfig), so adding a family
is its module, its registration in :data:`symbolic.models.families.READERS`
and its tests.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import Recipe

#: transformers, the version every family's recipe and defaults are read from (its modeling files)
HF_VERSION = "5.24.0"


def source(model_type: str) -> str:
    """The modeling file a family is read from."""
    return f"HF transformers {HF_VERSION} models/{model_type}/modeling_{model_type}.py"


@dataclass(frozen=True)
class Read:
    """A config as its family reads it. recipe: the layer's parts (``head_dim`` is set by the reader
    of every family from ``head_dim``). ffn: the MLP width f. kv_heads: key/value heads (g).
    head_dim: the config's head width, None for h/a. seq: the default sequence length.
    dims: the recipe's own letters' values. moe: (E, k, f_e, shared count). notes: what the
    bill states beside the numbers (multipliers read, approximations with their size). tied: the
    output layer tied to the embedding as the family reads it (None: ``tie_word_embeddings``)."""

    recipe: Recipe
    ffn: int
    kv_heads: int
    seq: int
    head_dim: int | None = None
    dims: dict = field(default_factory=dict)
    moe: tuple = (0, 0, 0, 0)
    notes: tuple = ()
    tied: bool | None = None


def rotary_factor(fields, default: float) -> float:
    """``partial_rotary_factor`` as HF's config reads it: a top-level key, or in ``rope_parameters``
    (``rope_scaling``), else the family's default (its config's ``kwargs.setdefault``)."""
    for holder in (fields.raw, fields.raw.get("rope_parameters"), fields.raw.get("rope_scaling")):
        if isinstance(holder, dict) and holder.get("partial_rotary_factor") is not None:
            value = holder["partial_rotary_factor"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                fields.refuse("partial_rotary_factor", value, "a fraction in (0, 1]")
            return float(value)
    return default


def head_width(fields) -> int:
    """The head width of a family whose attention takes ``getattr(config, "head_dim", hidden_size //
    num_attention_heads)``: the file's ``head_dim``, else h // a floored (GLM-4.5's defaults, 4096 // 96 = 42:
    HF builds Q of 96·42 = 4,032 features, an output projection 4,032 → 4,096)."""
    return fields.count("head_dim") or fields.hidden // fields.heads


def multiplier_note(fields, names: tuple[str, ...]) -> tuple[str, ...]:
    """The scalar multipliers a family applies (Granite's, Cohere's logit scale), read and stated: a
    multiply by a Python number keeps no tensor, so they change no byte and no counted FLOP."""
    values = []
    for name in names:
        value = fields.value(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            fields.refuse(name, value, "a number")
        values.append(f"{name} = {value:g}")
    return (f"{', '.join(values)}: scalar multipliers ({fields.model_type}), read; a multiply by a constant "
            "keeps no tensor for backward and is no matmul, so they change no byte, parameter or counted FLOP",)


def math_path_gap(recipe: Recipe, values: dict) -> tuple[str, int]:
    """What torch SDPA's math path keeps beyond the fused kernel the bill counts, for one layer of
    ``recipe``: the two declared inventories' difference (each traced on CPU), as a formula and at
    ``values`` (letters -> ints)."""
    from sympy import Add, factor, sstr

    from ...core.dims import SYMBOLS
    from ..architectures import composed

    def total(kernel):
        return Add(*(term.bytes for term in composed.saved_tensors(recipe, kernel, "cpu")))

    gap = factor(total("math") - total("fused"))
    return sstr(gap).replace("**", "^"), int(gap.subs({SYMBOLS[k]: v for k, v in values.items() if k in SYMBOLS}))


def no_attention_dropout(fields, title: str) -> None:
    """Refuse ``attention_dropout`` > 0 in one line for a family whose attention has no dropout part: a
    mask on the probabilities that the bill would not count."""
    dropout = fields.value("attention_dropout")
    if dropout not in (0, 0.0, None):
        fields.refuse("attention_dropout", dropout, "attention_dropout 0 (a dropout mask on the probabilities is "
                      f"not modelled for {title})")


def expert_counts(fields, experts_field: str, top_k_field: str = "num_experts_per_tok") -> tuple[int, int]:
    """(E, k) of an MoE family's config, refusing k > E in one line (no router picks more experts than
    there are)."""
    experts, top_k = fields.count(experts_field), fields.count(top_k_field)
    if top_k > experts:
        fields.refuse(top_k_field, top_k, f"at most {experts_field} ({experts}) experts per token")
    return experts, top_k


def dropout_rate(fields, name: str) -> float:
    """A dropout probability field (``attention_dropout``, ``residual_dropout``): a number in [0, 1), 0 when
    null. HF applies it in training mode only (``training=self.training``), which is what the bill counts."""
    value = fields.value(name)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        fields.refuse(name, value, f"{name} as a probability in [0, 1)")
    return float(value)


def attention_dropout_note(recipe: Recipe, rate: float, fields, kv_heads: int, head_dim: int | None,
                           seq: int) -> tuple[str, ...]:
    """What ``attention_dropout`` changes beside the fused kernel the bill counts: torch SDPA on CPU (and its
    math fallback anywhere) does not run dropout in a fused kernel; it keeps fp32 Q, K, V at a heads, the
    fp32 softmax, its fp32 noise and the dropped probabilities (traced). Sized at the config's default
    sequence length, b = 1."""
    from dataclasses import replace

    from ..config import default_seq

    if not recipe.attention_dropout:
        return ()
    values = {"h": fields.hidden, "a": fields.heads, "g": kv_heads, "d_h": head_dim or fields.hidden // fields.heads,
              "s": default_seq(seq), "b": 1}
    own_width = values["d_h"] * values["a"] != values["h"]  # the reader sets head_dim after read(); here already
    formula, at = math_path_gap(replace(recipe, head_dim=own_width), values)
    return (f"attention_dropout = {rate:g} is applied in training: billed as FlashAttention-2 runs it, the mask "
            "drawn in the kernel from its RNG state (no s×s tensor kept); torch SDPA on CPU has no fused kernel with "
            f"dropout and takes its math path, which keeps {formula} bytes per layer more (traced), {at:,} B per layer "
            f"at s = {values['s']:,}, b = 1; HF's eager attention keeps the dropout's mask and the dropped "
            "probabilities instead of the probabilities (traced)",)
