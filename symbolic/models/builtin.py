"""The built-in models by name: HF-style ``config.json`` files shipped in
``symbolic/data/``, read by :mod:`symbolic.models.hf` on first use.

The presets are the Korthikanti et al. 2022 Table 3 models (V = 51200, s =
2048), the 7B example of seed 001 (L = 32, h = 4096, a = 32, s = 4096; V not
stated by the seed, 51200 assumed here as for the Table 3 models), Llama 2 7B
and Mixtral 8x7B.
"""
from __future__ import annotations

from functools import cache

from .config import ConfigError, ModelConfig
from .hf import builtin_models


@cache
def presets() -> dict[str, ModelConfig]:
    """The built-in models by name, read on first use."""
    return builtin_models()


def __getattr__(name: str):
    """``PRESETS`` (PEP 562): the built-in models, loaded on first use."""
    if name == "PRESETS":
        return presets()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def preset(name: str) -> ModelConfig:
    try:
        return presets()[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; built-in models: {', '.join(presets())}, "
                          "or a path to an HF config.json") from None


