"""``--gpu NAME`` on a command: the option, and the :class:`~symbolic.ledgers.gpus.GpuChoice` of a command's
parsed arguments (:mod:`symbolic.ledgers.gpus` resolves it, for the API too)."""
from __future__ import annotations

from ..ledgers.gpus import GpuChoice, gpu_names, resolve  # noqa: F401 (the commands read them here)


def add_gpu_option(parser) -> None:
    """``--gpu NAME`` on a parser or an argument group."""
    from ..layout.options import add

    add(parser, "gpu")


def from_args(args) -> GpuChoice:
    """:func:`resolve` of a command's parsed arguments (a command without ``--hardware`` has the default)."""
    return resolve(getattr(args, "gpu", None), getattr(args, "gpu_memory", None), getattr(args, "hardware", None))
