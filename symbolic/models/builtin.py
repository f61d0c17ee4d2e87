"""The built-in models by name: HF-style ``config.json`` files shipped in
``symbolic/data/``, read by :mod:`symbolic.models.hf` on first use.

The presets are the Korthikanti et al. 2022 Table 3 models (V = 51200, s =
2048), the 7B example of seed 001 (L = 32, h = 4096, a = 32, s = 4096; V not
stated by the seed, 51200 assumed here as for the Table 3 models), Llama 2 7B
and Mixtral 8x7B.
"""
from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from .config import ConfigError, ModelConfig
from .hf import builtin_entries, builtin_model


class BuiltinModels(Mapping):
    """The built-in models by name, in their stated order; each one is read from its file when first
    asked for, so a command about one model does not build the others (DeepSeek-V3's MLA note derives
    a formula with sympy, which a cached bill of another model never imports)."""

    def __init__(self):
        self._files = builtin_entries()
        self._models: dict[str, ModelConfig] = {}

    def __getitem__(self, name: str) -> ModelConfig:
        if name not in self._models:
            self._models[name] = builtin_model(self._files[name])  # KeyError for an unknown name
        return self._models[name]

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


@cache
def presets() -> BuiltinModels:
    """The built-in models by name, each read on first use."""
    return BuiltinModels()


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


