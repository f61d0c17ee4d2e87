"""Model configurations: the frozen dataclass every reader produces, the
error bad input raises, and which architectures the engine itemises.

The built-in models are in :mod:`symbolic.models.builtin`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

#: The inventories (``ModelConfig.arch``) the bill itemises, and with it every
#: consumer of a ModelConfig (timeline, plan, solve), all through
#: :func:`symbolic.bill.derive.inventories`. The HF reader
#: (``symbolic.models.hf``) gives a model one of these arches, and otherwise
#: maps it onto the GPT layer and states what that approximates. Which
#: architectures exist is the models' knowledge: a test holds that each has an
#: inventory in ``symbolic.models.architectures.ARCHITECTURES``.
BILLED_ARCHITECTURES = ("gpt", "llama", "moe")


#: Stated ranges of a model's sizes (inclusive; issue 14). The largest published transformers are far
#: inside them (L ≈ 10^2, h ≈ 3·10^4, V ≈ 2.6·10^5, s ≈ 10^7); beyond them a config is refused, not
#: evaluated (10^30 layers would otherwise hang every consumer).
MODEL_LIMITS = {"layers": 10**5, "hidden": 10**7, "heads": 10**6, "vocab": 10**8, "seq": 10**8,
                "ffn": 10**8, "kv_heads": 10**6, "experts": 10**5, "experts_per_token": 10**5,
                "shared_experts": 10**5, "expert_ffn": 10**8}


class ConfigError(ValueError):
    """Bad user input; the message names the field and the fix."""


@dataclass(frozen=True)
class ModelConfig:
    """A transformer model configuration.

    layers (L), hidden (h), heads (a), vocab (V), seq (s, also the learned
    position table's length). ffn: the MLP width; 0 means the GPT default 4h.
    tied: the output layer reuses the word embedding. positions: ``learned``
    or ``rope``. arch: the inventory in ``symbolic.models.architectures.ARCHITECTURES``
    that models it. kv_heads: key/value heads (0 means = heads, i.e. MHA).
    mlp: ``gelu`` (h -> f -> h) or ``swiglu`` (gate and up, then down).
    norm: ``layernorm`` or ``rmsnorm``. experts, experts_per_token,
    shared_experts, expert_ffn: mixture-of-experts fields (0 means dense).
    approximations: what the chosen inventory does not model of the source
    config, each a sentence a user must see next to the numbers.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    ffn: int = 0
    tied: bool = True
    positions: str = "learned"
    source: str = ""
    params_label: str = field(default="", compare=False)
    arch: str = "gpt"
    kv_heads: int = 0
    mlp: str = "gelu"
    norm: str = "layernorm"
    experts: int = 0
    experts_per_token: int = 0
    shared_experts: int = 0
    expert_ffn: int = 0
    approximations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab", "seq"):
            positive_int(name, getattr(self, name))
        if self.ffn:
            positive_int("ffn", self.ffn)
        if self.hidden % self.heads:
            raise ConfigError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads}): "
                              "each head has width hidden/heads")
        check_ranges(self)
        if self.positions not in ("learned", "rope"):
            raise ConfigError(f"positions must be 'learned' or 'rope', not {self.positions!r}")

    def values(self) -> dict[str, int]:
        """The dimension values in the papers' letters."""
        values = {"L": self.layers, "h": self.hidden, "a": self.heads, "V": self.vocab, "s": self.seq,
                  "f": self.ffn or 4 * self.hidden}
        if self.arch != "gpt":  # the LLaMA/MoE inventories' letters (symbolic.core.dims)
            values["g"] = self.kv_heads or self.heads
        if self.experts:
            values.update(E=self.experts, k=self.experts_per_token, E_s=self.shared_experts,
                          f_e=self.expert_ffn or self.ffn)
        return values


def positive_int(name: str, value) -> int:
    """``value`` as a positive int, or a :class:`ConfigError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        else:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value}")
    return value


def check_ranges(model: "ModelConfig") -> None:
    """Every size of ``model`` within :data:`MODEL_LIMITS`, or a :class:`ConfigError` naming it."""
    for name, limit in MODEL_LIMITS.items():
        value = getattr(model, name)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ConfigError(f"{name} = {value:.3g} is beyond the stated range (at most {limit:,}) "
                              if value > 10**15 else
                              f"{name} = {value:,} is beyond the stated range (at most {limit:,}); check the config")


def field_names() -> list[str]:
    return [f.name for f in fields(ModelConfig)]
