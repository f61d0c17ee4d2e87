"""The terms every ledger is made of: saved tensors, parameters and matmuls.

A term is data: a path-like name (``attention/softmax_output``), a shape made
of dimension symbols, and what the accounting needs to know about it. Bytes
and FLOPs are *derived* from the shape, never typed in.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Iterable, Iterator

from sympy import Expr, Integer, Mul, sympify

#: Bytes per element of each storage dtype. Dropout masks are stored as one
#: byte per element (``torch.bool``/``uint8``), as Korthikanti §4.1 counts them.
DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "mask": 1,
    "int64": 8,  # index tensors (top-k expert choices, token maps, loss targets)
}


class Axis(Enum):
    """The parallel axis that splits a tensor.

    ``TENSOR``: split across heads or the hidden/FFN width by tensor parallelism
    (Megatron's column/row-parallel linears). ``SEQUENCE``: replicated under
    tensor parallelism, split along the sequence by sequence parallelism
    (Korthikanti §4.2.2). ``NONE``: never split. ``CONTEXT`` and ``EXPERT`` are
    the axes of context and expert parallelism.
    """

    NONE = "none"
    TENSOR = "tensor-parallel"
    SEQUENCE = "sequence-parallel"
    CONTEXT = "context-parallel"
    EXPERT = "expert-parallel"


class Group(Enum):
    """The recompute group a saved tensor belongs to.

    ``LAYER_INPUT``: the layer's input, the one tensor full recompute keeps
    (Korthikanti §5, Table 2). ``ATTENTION_CORE``: the softmax/dropout tensors
    of the Q·Kᵀ score matrix, which selective recompute drops and recomputes
    (Korthikanti §5). ``BODY``: everything else, kept unless full recompute.
    ``EXPERT_ACTIVATION``: what an expert's SwiGLU saves of its own beyond its
    input (SiLU(gate), kept for ·up), which a fused SwiGLU kernel does not keep;
    ``EXPERT_ACTIVATION_OUTPUT``: the activation's output, the down projection's
    input. Megatron-Core's ``moe_act`` recompute drops both (body otherwise).
    ``RECOMPUTED``: on a matmul, one a per-op policy re-runs in backward (torchtitan's per-op
    selective checkpointing recomputes every second matmul: ``symbolic.layout.op_sac``).
    """

    LAYER_INPUT = "layer input"
    ATTENTION_CORE = "attention core"
    BODY = "body"
    EXPERT_ACTIVATION = "expert activation"
    EXPERT_ACTIVATION_OUTPUT = "expert activation output"
    RECOMPUTED = "recomputed by the per-op policy"


def _product(shape: Iterable[Expr]) -> Expr:
    return Mul(*shape)


@dataclass(frozen=True)
class SavedTensor:
    """A tensor autograd keeps from forward for backward.

    ``shape`` is the logical (unsharded) shape; ``split_dim`` is the index of the
    entry the parallel axis ``split`` divides, and ``sharded_by`` how many ways
    it is divided now (1 until a strategy shards it).
    """

    name: str
    shape: tuple[Expr, ...]
    dtype: str
    split: Axis
    split_dim: int | None
    group: Group
    source: str
    note: str = ""
    sharded_by: Expr = Integer(1)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"{self.name}: unknown dtype {self.dtype!r}")
        if (self.split is Axis.NONE) != (self.split_dim is None):
            raise ValueError(f"{self.name}: split axis and split_dim must come together")

    @property
    def bytes_per_element(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def local_shape(self) -> tuple[Expr, ...]:
        """The shape one GPU holds: the split entry divided by ``sharded_by``."""
        if self.split_dim is None:
            return self.shape
        shape = list(self.shape)
        shape[self.split_dim] = shape[self.split_dim] / self.sharded_by
        return tuple(shape)

    @cached_property  # a frozen term's product, built once (a derivation asks for it many times)
    def elements(self) -> Expr:
        return _product(self.local_shape)

    @cached_property
    def bytes(self) -> Expr:
        return self.elements * self.bytes_per_element

    def shard(self, ways: Expr) -> "SavedTensor":
        return replace(self, sharded_by=self.sharded_by * sympify(ways))


@dataclass(frozen=True)
class Parameter:
    """A trainable parameter tensor. ``scope`` says where it sits in the model:
    ``layer`` (repeated L times), ``embedding`` or ``output``."""

    name: str
    shape: tuple[Expr, ...]
    scope: str
    source: str
    note: str = ""

    @property
    def count(self) -> Expr:
        return _product(self.shape)


@dataclass(frozen=True)
class Matmul:
    """A matrix multiply ``(M x K) @ (K x N)``, repeated ``batch`` times.

    Forward FLOPs are ``2·batch·M·K·N`` (one multiply and one add per
    multiply-accumulate). Backward computes two matmuls of the same size — the
    gradient with respect to each operand — so it costs twice the forward
    (Narayanan et al. 2021, §5.1). ``weight`` tells a parameter matmul from an
    activation-activation one (Q·Kᵀ, scores·V); ``scope`` is as for parameters.
    """

    name: str
    batch: Expr
    M: Expr
    K: Expr
    N: Expr
    weight: bool
    scope: str
    source: str
    note: str = ""
    group: Group = Group.BODY
    #: the backward's FLOPs when they are not the two gradients' 2 × forward (None): a product whose one operand
    #: needs no gradient (1 ×), one whose output nothing reads (0 ×), or one whose backward also runs another
    #: kernel's matmul (Qwen3-Next's triangular solves): the number, stated where the term is made
    backward: Expr | None = None

    @property
    def forward_flops(self) -> Expr:
        return 2 * self.batch * self.M * self.K * self.N

    @property
    def backward_flops(self) -> Expr:
        return 2 * self.forward_flops if self.backward is None else self.backward


@dataclass(frozen=True)
class Inventory:
    """An ordered, immutable collection of terms, addressable by name."""

    terms: tuple
    applied: tuple[str, ...] = ()

    def __hash__(self) -> int:
        # computed once and kept: inventories key the ledgers' memoised functions, and hashing one
        # walks every term's fields (a derivation hashes the same inventory dozens of times)
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash((self.terms, self.applied))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)  # a str's hash differs between processes: recomputed where it is read
        return state

    def __iter__(self) -> Iterator:
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def __getitem__(self, name: str):
        for term in self.terms:
            if term.name == name:
                return term
        raise KeyError(name)

    def names(self) -> list[str]:
        return [term.name for term in self.terms]

    def select(self, patterns) -> "Inventory":
        """Terms matching any of ``patterns``: a name, a prefix (``attention``
        keeps ``attention/...``) or a glob (``*/layernorm_input``)."""
        wanted = [patterns] if isinstance(patterns, str) else list(patterns)

        def keep(name: str) -> bool:
            return any(fnmatchcase(name, w) if any(c in w for c in "*?[") else
                       name == w or name.startswith(w.rstrip("/") + "/") for w in wanted)

        return Inventory(tuple(t for t in self.terms if keep(t.name)), self.applied)

    def map(self, fn, label: str) -> "Inventory":
        kept = []
        for term in self.terms:
            new = fn(term)
            if new is not None:
                kept.append(new)
        return Inventory(tuple(kept), self.applied + (label,))
