"""Model configurations: frozen dataclasses and the built-in presets.

The Korthikanti et al. 2022 Table 3 models (V = 51200, s = 2048) and the 7B
example of seed 001 (L = 32, h = 4096, a = 32, s = 4096; V not stated by the
seed, 51200 assumed here as for the Table 3 models).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields


class ConfigError(ValueError):
    """Bad user input; the message names the field and the fix."""


@dataclass(frozen=True)
class ModelConfig:
    """A dense GPT model.

    layers (L), hidden (h), heads (a), vocab (V), seq (s, also the learned
    position table's length). ffn: the MLP width; 0 means the GPT default 4h.
    tied: the output layer reuses the word embedding. positions: ``learned``
    or ``rope``.
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

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "vocab", "seq"):
            positive_int(name, getattr(self, name))
        if self.ffn:
            positive_int("ffn", self.ffn)
        if self.hidden % self.heads:
            raise ConfigError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads}): "
                              "each head has width hidden/heads")
        if self.positions not in ("learned", "rope"):
            raise ConfigError(f"positions must be 'learned' or 'rope', not {self.positions!r}")

    def values(self) -> dict[str, int]:
        """The dimension values in the papers' letters."""
        return {"L": self.layers, "h": self.hidden, "a": self.heads, "V": self.vocab, "s": self.seq,
                "f": self.ffn or 4 * self.hidden}


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


_TABLE3 = "Korthikanti et al. 2022 Table 3"

PRESETS: dict[str, ModelConfig] = {c.name: c for c in (
    ModelConfig("gpt-22b", 48, 6144, 64, 51200, 2048, source=_TABLE3, params_label="22B"),
    ModelConfig("gpt-175b", 96, 12288, 96, 51200, 2048, source=_TABLE3 + " (GPT-3)", params_label="175B"),
    ModelConfig("gpt-530b", 105, 20480, 128, 51200, 2048, source=_TABLE3 + " (MT-NLG)", params_label="530B"),
    ModelConfig("gpt-1t", 128, 25600, 160, 51200, 2048, source=_TABLE3, params_label="1T"),
    ModelConfig("gpt-7b", 32, 4096, 32, 51200, 4096,
                source="seed 001 §1 7B example (V not stated: 51200 assumed)", params_label="7B"),
)}


def preset(name: str) -> ModelConfig:
    try:
        return PRESETS[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; built-in models: {', '.join(PRESETS)}") from None


def field_names() -> list[str]:
    return [f.name for f in fields(ModelConfig)]
