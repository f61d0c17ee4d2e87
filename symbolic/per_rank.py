"""Proved per rank: PyTorch's own parallel code, run as one rank of N on the CPU, against the bill.

Optional extra ``torch`` (pinned ``torch==2.13.0``, ``transformers==5.24.0``, ``peft``).

:mod:`symbolic.trace` proves one decoder layer on one process. What a user runs is a *combination* —
tensor parallel × sequence parallel × recompute × FSDP/ZeRO × LoRA × loss kernel — and each term's
shard axis is a claim about what one rank of the framework holds. This module runs the framework's
own code as rank ``r`` of a world of ``N``:

* a **fake process group** (``torch.testing._internal.distributed.fake_pg.FakeStore`` with the
  ``"fake"`` backend, the one torchtitan's ``--comm.mode fake_backend`` dry runs use): every
  collective returns a tensor of the right shape and moves no data, so one CPU process *is* rank r —
  its shards, its gathered buffers, its saved tensors — without the other N − 1;
* the model is transformers' own (``AutoModelForCausalLM.from_config``, tiny, at dimensions no other
  test uses), parallelised by ``torch.distributed.tensor.parallel`` with the placements torchtitan
  gives its decoder (``models/common/decoder_sharding.py`` at pytorch/torchtitan b5bcd76c: Q/K/V and
  gate/up colwise, output and down rowwise, RMSNorms ``SequenceParallel`` under SP with the
  rowwise outputs reduce-scattered to a sequence shard), checkpointed by
  ``torch.distributed.algorithms._checkpoint.checkpoint_wrapper`` as torchtitan's full AC wraps
  each block (``distributed/activation_checkpoint.py``, same commit);
* what the rank saves for backward is :func:`symbolic.trace.trace_module` (storages, de-duplicated,
  still held when the forward returns; a DTensor counted by its local shard), one layer as the
  model of 2 layers less the model of 1; the output side (final norm, output layer, loss) by the
  modules that saved it.

Each measurement is a :class:`RankRow` against the same layout's bill (:func:`symbolic.bill.derive.make_bill`
on the same ``config.json``): exact to the byte, or named with its reason.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

#: pytorch/torchtitan at the commit read for the placements and the checkpoint wrapper.
TORCHTITAN = "pytorch/torchtitan b5bcd76c"


@dataclass(frozen=True)
class Combination:
    """One layout of one tiny model, as a rank runs it.

    family: the ``model_type`` (:data:`CONFIGS`). dims: which of the family's two dimension sets.
    tp: tensor-parallel ranks (1 means off). sp: sequence parallel (needs tp > 1). recompute:
    ``none`` or ``full`` (every decoder layer checkpointed). loss: ``eager`` (HF's loss inside the
    model, on replicated logits) or ``vocab-parallel`` (the output layer's logits left vocabulary-
    sharded and ``loss_parallel``'s cross entropy). lora: the LoRA rank (0: off; PEFT's ``LoraConfig``
    on :data:`LORA_TARGETS`). rank: which rank of the world this process is.
    """

    family: str
    dims: str = "first"
    tp: int = 1
    sp: bool = False
    recompute: str = "none"
    loss: str = "eager"
    lora: int = 0
    rank: int = 0

    def words(self) -> str:
        parts = [f"{self.family}/{self.dims}", f"t={self.tp}" + ("+SP" if self.sp else "")]
        if self.recompute != "none":
            parts.append(f"{self.recompute} recompute")
        if self.loss != "eager":
            parts.append(f"{self.loss} loss")
        if self.lora:
            parts.append(f"LoRA r={self.lora}")
        return " ".join(parts)


@dataclass(frozen=True)
class RankRow:
    """One quantity one rank holds, measured and billed, in bytes.

    quantity: what is compared (``activations/layer``, ``output side``, ``model states/...``).
    reason: empty when the two agree; otherwise why they differ — a mechanism the bill does not
    model, named, never a tolerance.
    """

    combination: str
    quantity: str
    measured: int
    billed: int
    reason: str = ""

    @property
    def exact(self) -> bool:
        return self.measured == self.billed


@contextlib.contextmanager
def fake_world(size: int, rank: int = 0):
    """This process as rank ``rank`` of a world of ``size`` on the fake backend (collectives of the
    right shapes, no data moved), and the 1-D CPU device mesh over it; torn down on exit."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=size)
    try:
        yield init_device_mesh("cpu", (size,))
    finally:
        dist.destroy_process_group()
