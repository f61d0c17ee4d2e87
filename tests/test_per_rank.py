"""Proved per rank: combinations run as one rank of PyTorch's own parallel code equal the bill, to the byte.

Each row is measured live (``symbolic.per_rank``: a fake process group, transformers' model parallelised by
``torch.distributed.tensor.parallel`` with torchtitan's placements, checkpointed as torchtitan's full AC,
adapted by PEFT) and billed. The whole grid is ``benchmarks/per_rank.py``; these are its exact rows on one
dimension set per family, each kind of combination at least once.
"""
from __future__ import annotations

import warnings

import pytest

from _tracing import require

require("torch")
require("transformers")
require("peft")

from symbolic import per_rank  # noqa: E402
from symbolic.per_rank import Combination  # noqa: E402

warnings.filterwarnings("ignore")

#: Each kind of combination once or more: TP with and without SP at 2 and 4 ranks, full recompute under SP,
#: the vocabulary-parallel loss, LoRA with fp32 and bf16 adapters, on the three families.
CASES = [
    Combination("llama", "first"),
    Combination("llama", "first", 2, rank=1),
    Combination("llama", "first", 2, True, rank=1),
    Combination("llama", "first", 4, True, "full", rank=1),
    Combination("llama", "second", 4, rank=3),
    Combination("llama", "first", lora=4, lora_dtype="fp32"),
    Combination("llama", "first", lora=4, lora_dtype="bf16"),
    Combination("qwen3", "first", 2, rank=0),
    Combination("qwen3", "second", 4, True, rank=2),
    Combination("qwen3", "first", recompute="full", lora=4),
    Combination("deepseek_v3", "first", 2, True, rank=1),
    Combination("deepseek_v3", "second", 2, rank=1),
    Combination("deepseek_v3", "first", lora=4, lora_dtype="bf16"),
    Combination("deepseek_v3", "second", 4, True, "full", rank=1),
]


@pytest.mark.parametrize("combination", CASES, ids=lambda c: c.words().replace(" ", "_"))
def test_the_rank_saves_what_the_bill_says(combination):
    rows = per_rank.rows([combination])
    assert [(row.quantity, row.measured) for row in rows] == [(row.quantity, row.billed) for row in rows]


def test_pytorchs_loss_parallel_is_the_bills_loss_parallel_kernel():
    """loss_parallel keeps nll_loss's targets and total weight beside the shard's log-softmax; Megatron's
    vocab-parallel kernel a bool mask and int64 masked targets beside its softmax: b·s − 4 bytes apart."""
    combination = Combination("llama", "first", 2, True, loss="loss-parallel", rank=1)
    assert all(row.exact for row in per_rank.rows([combination]))
    s, b = per_rank.TOKENS["first"]
    megatron = per_rank.billed(Combination("llama", "first", 2, True, loss="vocab-parallel", rank=1))
    assert megatron.output_side - per_rank.measure(combination).output_side == s * b - 4


def test_every_rank_of_an_even_split_holds_the_same():
    first, last = (per_rank.measure(Combination("qwen3", "first", 4, True, rank=rank)) for rank in (0, 3))
    assert first == last


def test_the_reference_is_the_bill_itself_where_the_cpu_kernel_is_the_bills():
    """For llama and qwen3 the bill's own make_bill equals its strategy on the CPU kernel's inventory, so the
    rows above compare with the bill a user gets; an MLA runs SDPA's math path on the CPU (named)."""
    for combination in (Combination("llama", "first", 2, True), Combination("qwen3", "second", 4),
                        Combination("llama", "first", lora=4)):
        assert per_rank.billed(combination).layer == per_rank.declared_layer(combination)
    mla = Combination("deepseek_v3", "first")
    assert per_rank.billed(mla).layer != per_rank.declared_layer(mla)


def test_dtensor_sequence_parallelism_keeps_the_gathered_linear_inputs():
    """Under SP a DTensor rank keeps the all-gathered Q/K/V and MLP inputs: 2·2·b·s·h·(1 − 1/t) bytes per layer
    more than Megatron's sharded inputs (``--sp-inputs sharded``)."""
    from dataclasses import replace

    from symbolic.bill.derive import make_bill
    from symbolic.layout.layout import Layout
    from symbolic.models import hf

    combination = Combination("llama", "first", 4, True, rank=1)
    s, b = per_rank.TOKENS["first"]
    h = per_rank.CONFIGS["llama"]["first"]["hidden_size"]
    model = hf.from_hf_dict(per_rank.config("llama", "first"), "llama")
    layout = Layout(micro_batch=b, seq=s, tp=4, sp=True, sp_inputs="gathered")
    gathered = make_bill(model, layout).totals["activation_bytes"] // per_rank.LAYERS
    sharded = make_bill(model, replace(layout, sp_inputs="sharded")).totals["activation_bytes"] // per_rank.LAYERS
    assert per_rank.measure(combination).layer == gathered
    assert gathered - sharded == 2 * 2 * b * s * h * 3 // 4


def test_grid_covers_at_least_a_hundred_combinations():
    grid = per_rank.grid()
    assert len(grid) >= 100
    assert len(set(grid)) == len(grid)
