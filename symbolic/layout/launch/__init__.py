"""Readers of the launch configs people already have: a Megatron-LM command line, a NeMo /
Megatron-Bridge recipe dump, a torchtitan job TOML, a DeepSpeed ``ds_config.json``, an accelerate
config. Each returns a :class:`LaunchReading` — the Layout fields it sets, the model it names (if
any), the framework preset's name, and every option taken (and what it became), ignored (and why) or
assumed (a framework default, with where in the framework's code it is).

Rules: each reader uses the framework's own option names and defaults, read at these commits
(``fetch`` the repository, ``git show COMMIT:PATH``):

- Megatron-LM ``d98e8a64ddf34856e74b24714e3bedb2f5a39553``: ``megatron/training/arguments.py``
  (``--recompute-activations`` → selective, the global batch = micro-batch × d when not given,
  ``--ffn-hidden-size`` 4h or SwiGLU's ``int(8h/3 / 64)·64``, bf16's fp32 main gradients unless
  ``--grad-reduce-in-bf16``), ``megatron/core/model_parallel_config.py`` (t = p = c = e = 1, no SP),
  ``megatron/core/transformer/transformer_config.py`` (dropout 0.1, LayerNorm, biases on,
  ``attention_backend`` auto), ``megatron/training/vocab_utils.py`` (the vocabulary padded to a
  multiple of ``make_vocab_size_divisible_by`` (128) × t), ``megatron/core/optimizer/__init__.py``
  (Adam is TE's or apex's FusedAdam).
- torchtitan ``238fa9953e4aec2a62582121564273d7cbb1e9f1`` (the last commit with job TOMLs):
  ``torchtitan/config/job_config.py``.
- DeepSpeed ``38327e07f6cd39b63418f60cedd1651b0be3e7c3``: ``deepspeed/runtime/config.py``,
  ``deepspeed/runtime/zero/config.py``, ``deepspeed/runtime/zero/offload_config.py``.
- accelerate ``16cb6eb80dd9aa8b4df1a63ef57863e455d53b83``: ``src/accelerate/commands/config/``
  (the YAML keys), ``src/accelerate/utils/dataclasses.py`` (FSDP sharding strategies).
- Megatron-Bridge ``067f987df03b8355b03192d88d70f1709fedf51a``: ``src/megatron/bridge/training/config.py``
  (ConfigContainer: ``model`` holds Megatron-Core's TransformerConfig / ModelParallelConfig names,
  ``train`` the batch, ``dataset`` the sequence, ``optimizer`` / ``ddp`` the optimizer).

An option a reader does not know is refused with one line naming it — it might change memory or
time — unless it is in the reader's table of options that change neither (logging, paths, seeds,
learning-rate schedule), which are listed as ignored with the reason. No value is ``eval``-ed: a
command line is split with :mod:`shlex`, numbers are read by a regular expression.

One contract with the CLI (``reader.py``): every Layout field read passes the schema the CLI and the
API read (``layout/options.py``: ranges and choices); a boolean is read as its framework reads it
(accelerate's ``"false"``, OmegaConf's ``0``; Megatron's ``--bf16=false`` refused as argparse refuses
it); a choice outside the framework's is refused, never defaulted; a key given twice is refused where
the framework refuses it (DeepSpeed's JSON, OmegaConf's YAML); a file is size-capped (1 MiB; 64 KiB
for what shlex splits), YAML is parsed with a safe loader that allows a few aliases, and a mapping is
checked to be a finite tree (no self-reference) before it is walked.

The package reads like the data flow: ``reader.py`` is the shared reader (a :class:`LaunchReading`,
the accumulator, the value checks, the file loading); one module per launch kind fills it
(``megatron.py``, ``bridge.py``, ``torchtitan.py``, ``deepspeed.py``, ``accelerate.py``, and the
fine-tuners' ``axolotl.py`` and ``llamafactory.py`` on ``finetune.py``); this module
picks the kind (:func:`read_launch`).
"""
from __future__ import annotations

from dataclasses import fields

from ...core.inputs import clean
from ...models.config import ConfigError, ModelConfig
from ..layout import Layout
from .accelerate import read_accelerate
from .axolotl import read_axolotl
from .bridge import read_bridge
from .deepspeed import read_deepspeed
from .megatron import read_megatron
from .reader import (ACCELERATE_COMMIT, BRIDGE_COMMIT, DEEPSPEED_COMMIT, KINDS, MEGATRON_COMMIT, TORCHTITAN_COMMIT,
                     TYPED, LaunchReading, ReadNote, builtin_match)
from .llamafactory import read_llamafactory
from .torchtitan import read_torchtitan

__all__ = ["KINDS", "READERS", "LaunchReading", "ReadNote", "builtin_match", "read_launch", "read_megatron",
           "read_bridge", "read_torchtitan", "read_deepspeed", "read_accelerate", "read_axolotl",
           "read_llamafactory", "MEGATRON_COMMIT",
           "TORCHTITAN_COMMIT", "DEEPSPEED_COMMIT", "ACCELERATE_COMMIT", "BRIDGE_COMMIT", "LAYOUT_FIELDS"]

READERS = {"megatron": read_megatron, "nemo": lambda s, m=None: read_bridge(s, m, "nemo"),
           "megatron-bridge": read_bridge, "torchtitan": read_torchtitan, "deepspeed": read_deepspeed,
           "accelerate": read_accelerate, "axolotl": read_axolotl, "llamafactory": read_llamafactory}


def read_launch(kind: str, source, model: ModelConfig | None = None, typed=()) -> LaunchReading:
    """Read ``source`` as a launch config of ``kind`` (:data:`KINDS`); ``model`` (a ModelConfig), when
    given, is the model trained (the config's own model arguments are then listed as ignored);
    ``typed``: the Layout fields the user typed beside it — an option the reader cannot take that
    would set one of them is listed as ignored (the typed flag gives it), not refused."""
    if kind not in READERS:
        raise ConfigError(f"--from {clean(str(kind))!r}: give one of {', '.join(KINDS)}")
    token = TYPED.set(frozenset(typed))
    try:
        return READERS[kind](source, model)
    except ConfigError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as error:
        # A value of a type no reader checked (a list where a number belongs): one line, never a traceback.
        raise ConfigError(f"--from {kind}: a value of the wrong type or form ({type(error).__name__}: "
                          f"{clean(str(error))[:120]}); check the file's values against the framework's "
                          "documentation") from None
    finally:
        TYPED.reset(token)


LAYOUT_FIELDS = tuple(f.name for f in fields(Layout))
