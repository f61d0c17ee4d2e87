"""A GPU choice (``--gpu NAME``; ``gpu=`` in the API): one GPU names both the memory the verdict compares
against and the hardware the step time is priced on, from one shipped hardware file
(``symbolic/data/hardware/*.json``: its ``hbm_bytes`` and its figures). ``--gpu-memory SIZE`` overrides the
memory, ``--hardware NAME|FILE`` the hardware; ``--gpu-memory NAME`` (a GPU's name where a size goes) means that
GPU, memory and hardware, as ``--gpu NAME`` does — never its memory with another GPU's time.

Without ``--gpu`` the memory is what ``--gpu-memory`` gives (or none) and the time is on
``--hardware`` (default the papers' A100-80GB); the answer's first lines say which.

Here, below the commands, so that the CLI (``commands/_gpu.py`` adds the option) and the Python API
(``symbolic.api``) resolve a GPU with the same code.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.inputs import clean
from ..layout.options import parse_memory
from ..models.config import ConfigError
from .hardware import DEFAULT, Hardware, builtin, load, names


@dataclass(frozen=True)
class GpuChoice:
    """The GPU memory and the step-time hardware of one command, and which option set each."""

    memory: int | None      #: bytes per GPU the verdict compares against (None: not given)
    hardware: Hardware      #: the figures the step time is priced on
    memory_from: str        #: "--gpu h100", "--gpu-memory h100" (a GPU's name), "--gpu-memory" (a size), or ""
    hardware_from: str      #: "--gpu h100", "--hardware FILE", or "default"
    gpu: str = ""           #: the GPU's name when one GPU sets both (``--gpu``), else ""

    def as_dict(self) -> dict:
        """The ``gpu`` key of the commands' JSON."""
        return {"name": self.gpu, "memory_bytes": self.memory, "memory_from": self.memory_from,
                "hardware": self.hardware.name, "hardware_from": self.hardware_from}


def gpu_names() -> list[str]:
    """The names ``--gpu`` takes: every shipped hardware file's name and aliases."""
    return sorted(builtin())


def _known(name: str, field: str) -> Hardware:
    kinds = builtin()
    key = str(name).strip().lower()
    if key not in kinds:
        raise ConfigError(f"{field} {clean(name)!r}: unknown GPU; choose one of {', '.join(names())} "
                          "(or give --gpu-memory SIZE and --hardware FILE)")
    return kinds[key]


def resolve(gpu=None, gpu_memory=None, hardware=None) -> GpuChoice:
    """The :class:`GpuChoice` of ``--gpu``, ``--gpu-memory`` and ``--hardware`` (each None when not given)."""
    named = _known(gpu, "--gpu") if gpu is not None else None
    source = f"--gpu {str(gpu).strip().lower()}" if named else ""
    if isinstance(gpu_memory, str) and gpu_memory.strip().lower() in builtin():
        by_memory = _known(gpu_memory, "--gpu-memory")
        if named is not None and by_memory is not named:
            raise ConfigError(f"--gpu-memory {clean(gpu_memory)!r} and --gpu {clean(gpu)!r} name two GPUs: give "
                              f"--gpu {clean(gpu_memory).lower()} alone, or a size such as --gpu-memory 80GB")
        named, source = by_memory, f"--gpu-memory {gpu_memory.strip().lower()}"
        gpu_memory = None
    if gpu_memory is not None:
        try:
            memory = parse_memory(gpu_memory, "--gpu-memory")
        except ConfigError as error:  # the size reader's line, with every GPU this module knows
            words = str(error).split("; or a GPU:")[0]
            raise ConfigError(f"{words}; or a GPU: {', '.join(names())} (its memory and hardware, as --gpu)") \
                from None
        memory_from = "--gpu-memory"  # a size: the bytes are in ``memory``
    else:
        memory = int(named.hbm_bytes) if named is not None else None
        memory_from = source
    if hardware is not None:
        kind, hardware_from = load(hardware), f"--hardware {clean(hardware)}"
    elif named is not None:
        kind, hardware_from = named, source
    else:
        kind, hardware_from = load(DEFAULT), "default"
    return GpuChoice(memory, kind, memory_from, hardware_from, named.name if named is not None else "")
