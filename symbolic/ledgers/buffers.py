"""The communication buffers' settings as plain data (no sympy): a plan's cold path reads them
without loading the ledgers' expressions (:mod:`symbolic.ledgers.transients` re-exports them)."""
from __future__ import annotations

from dataclasses import dataclass

from ..layout.experts import expert_groups
from ..layout.layout import Layout

MiB = 2**20


@dataclass(frozen=True)
class CommSettings:
    """Communication buffers, from named settings (seed 004 §02.4, §05.4).

    nccl_buffsize: ``NCCL_BUFFSIZE``, the Simple-protocol staging per channel
    (NCCL's default, 4 MiB). channels: NCCL channels per communicator (NCCL
    chooses it per topology; 16 is an assumed typical value, not a seed
    number). A communicator is counted for every parallel group wider than
    one (TP, DP, PP send/recv, the CP ring). bucket_bytes: one gradient bucket staged for
    the data-parallel all-reduce (PyTorch DDP's default ``bucket_cap_mb`` =
    25 MiB), counted when d > 1.
    """

    nccl_buffsize: int = 4 * MiB
    channels: int = 16
    bucket_bytes: int = 25 * MiB

    def items(self, layout: Layout) -> list[tuple[str, int]]:
        per_communicator = self.nccl_buffsize * self.channels
        out = []
        groups = (("tensor-parallel", layout.tp), ("data-parallel", layout.dp),
                  ("pipeline send/recv", layout.pp), ("context-parallel ring", layout.cp)) + expert_groups(layout)
        for group, size in groups:
            if size > 1:
                out.append((f"communication/nccl staging ({group})", per_communicator))
        if layout.dp > 1 and self.bucket_bytes:
            out.append(("communication/gradient bucket (data-parallel)", self.bucket_bytes))
        return out
