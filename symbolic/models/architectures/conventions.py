"""Backend conventions: what a kernel saves beyond (or instead of) the paper's count.

PyTorch's CPU and CUDA kernels do not save the same thing for the same module.
An inventory takes one of the conventions below as a parameter:

``CUDA`` — what the papers and users assume, and what the CUDA kernels save:

- dropout keeps a 1-byte mask: on CUDA ``F.dropout`` runs ``aten::native_dropout``,
  whose backward keeps a ``bool`` mask (Korthikanti §4.1 counts 1 byte);
- ``LayerNorm`` keeps its per-row mean and reciprocal std in fp32 (the
  kernel's accumulate type) next to its input. Korthikanti §4.1 leaves these
  2·4·s·b bytes out; they are a named term here, and the paper's form is
  :func:`paper_form`, which drops them explicitly.

``CPU`` — what the tests can trace on this machine (torch 2.13.0):

- ``F.dropout`` on CPU is ``input * noise`` with a ``noise`` tensor of the
  *activation* dtype (``aten/src/ATen/native/Dropout.cpp``: the fused
  ``native_dropout`` path is taken only for CUDA/XPU/lazy tensors), so the
  "mask" costs 2 bytes per element in bf16, not 1;
- ``LayerNorm`` keeps mean and rstd in the activation dtype (bf16 in, bf16
  statistics out), 2·2·s·b bytes.

Terms a convention adds carry ``source`` :data:`BACKEND`; :func:`paper_form`
removes them so the paper's count is still derived, not typed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...core.dims import b, s
from ...core.tensors import Axis, Group, Inventory, SavedTensor

#: The ``source`` of terms a backend saves that the papers do not count.
BACKEND = "backend convention (PyTorch kernel), not in the paper's count"


@dataclass(frozen=True)
class Conventions:
    """What one backend's kernels save.

    name: ``cuda`` or ``cpu``. dropout_mask: dtype of a dropout mask —
    ``mask`` (1 byte) or ``bf16`` (the activation dtype: a noise tensor).
    norm_statistics: dtype of LayerNorm's per-row mean and rstd (``fp32`` on
    CUDA, the activation dtype ``bf16`` on CPU). source: where this is read.
    """

    name: str
    dropout_mask: str
    norm_statistics: str
    source: str


CUDA = Conventions("cuda", "mask", "fp32",
                   "aten native_dropout (bool mask); layer_norm CUDA kernel (fp32 mean/rstd)")
CPU = Conventions("cpu", "bf16", "bf16",
                  "aten Dropout.cpp _dropout_impl (input * noise); layer_norm CPU kernel (input-dtype mean/rstd)")
CONVENTIONS = {c.name: c for c in (CUDA, CPU)}


def conventions(name) -> Conventions:
    """``name`` (or a :class:`Conventions`) as a :class:`Conventions`."""
    if isinstance(name, Conventions):
        return name
    if name not in CONVENTIONS:
        raise ValueError(f"unknown backend conventions {name!r}; known: {', '.join(CONVENTIONS)}")
    return CONVENTIONS[name]


def norm_statistics(prefix: str, conv: Conventions, names=("mean", "rstd")) -> tuple[SavedTensor, ...]:
    """A normalisation's per-row statistics, (s, b) each, as backend terms."""
    return tuple(SavedTensor(f"{prefix}_{n}", (s, b), conv.norm_statistics, Axis.SEQUENCE, 0, Group.BODY,
                             BACKEND, f"per-row {n} kept by the norm kernel ({conv.name})") for n in names)


def with_conventions(inventory: Inventory, conv) -> Inventory:
    """A paper inventory (e.g. ``gpt.saved_tensors()``) as ``conv``'s kernels save it.

    Every dropout mask takes the convention's mask dtype; every LayerNorm
    input (a term named ``.../layernorm_input``) gains its mean and rstd terms.
    """
    conv = conventions(conv)
    out = []
    for term in inventory:
        if term.dtype == "mask":
            term = replace(term, dtype=conv.dropout_mask,
                           note=term.note + f"; {conv.name}: {conv.dropout_mask} per element")
        out.append(term)
        if term.name.endswith("/layernorm_input"):
            out.extend(norm_statistics(term.name.removesuffix("_input"), conv))
    return Inventory(tuple(out), inventory.applied + (f"conventions({conv.name})",))


def paper_form(inventory: Inventory) -> Inventory:
    """The inventory without the backend-convention terms: the paper's count."""
    return inventory.map(lambda x: None if x.source == BACKEND else x, "paper_form")
