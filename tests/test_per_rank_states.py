"""One rank's model states after one AdamW step, run as rank r of N on the fake backend, against the bill
(symbolic/per_rank_states.py). Every row is exact or names a mechanism whose size, computed apart, is
the difference; the exact rows are asserted equal here, computed live."""
from tests._tracing import require

torch = require("torch")
require("transformers")
require("peft")

from symbolic.per_rank_states import (  # noqa: E402
    UNEXPLAINED, StatesLayout, combination_rows, config, measure_states)

#: One model of each family at each dimension set, under the layouts whose rows are exact: FSDP2 over
#: a world of 1 (torchtitan's mixed precision on one process: fp32-adam's blocks at rest), ZeRO-1's
#: replicated parameters and gradients, PEFT LoRA on one process, the adapters of LoRA under FSDP2 over 2.
GRID = (("llama", "first"), ("qwen3", "second"))


def _rows(family, dims, layout):
    return {row.quantity: row for row in combination_rows(family, dims, layout)}


def test_one_process_fsdp2_holds_fp32_adam_blocks_exactly():
    for family, dims in GRID:
        rows = _rows(family, dims, StatesLayout())
        for name in ("fp32 parameters", "fp32 gradients", "Adam m (fp32)", "Adam v (fp32)", "total"):
            row = rows[f"model states/{name}"]
            assert row.measured == row.billed, row


def test_lora_one_process_exact_term_by_term():
    for family, dims in GRID:
        rows = _rows(family, dims, StatesLayout(lora=6, plain=True))
        states = [row for quantity, row in rows.items() if quantity.startswith("model states/")]
        assert len(states) == 7  # frozen weights, frozen rest, 4 adapter blocks, total
        for row in states:
            assert row.measured == row.billed, row


def test_peft_upcasts_adapters_to_fp32():
    found = measure_states(config("llama"), StatesLayout(lora=4, plain=True))
    assert {name for name in found.terms if name.startswith("LoRA")} == {
        f"LoRA adapters (all-linear, rank r): {block}"
        for block in ("fp32 parameters", "fp32 gradients", "Adam m (fp32)", "Adam v (fp32)")}


def test_zero1_replicates_parameters_and_gradients_exactly():
    rows = _rows("qwen3", "first", StatesLayout(kind="zero1", d=2))
    for name in ("fp32 parameters", "fp32 gradients"):
        assert rows[f"model states/{name}"].exact
    assert rows["model states/Adam m (fp32)"].reason.startswith("ZeroRedundancyOptimizer assigns whole parameters")


def test_fsdp2_rank_rows_differ_only_by_named_padding():
    rows = combination_rows("llama", "second", StatesLayout(d=4, rank=3))
    assert rows and all(UNEXPLAINED not in row.reason for row in rows)
    by = {row.quantity: row for row in rows}
    assert by["model states/fp32 parameters"].measured > by["model states/fp32 parameters"].billed  # padded
    assert by["model states/Adam m (fp32)"].measured < by["model states/Adam m (fp32)"].billed  # the short chunk


def test_lora_adapters_under_fsdp2_exact_where_dim0_divides():
    rows = _rows("llama", "first", StatesLayout(lora=6, d=2, lora_targets="attention"))
    for block in ("fp32 parameters", "fp32 gradients", "Adam m (fp32)", "Adam v (fp32)"):
        row = rows[f"model states/LoRA adapters (attention, rank r): {block}"]
        assert row.measured == row.billed, row


def test_no_reshard_keeps_the_whole_gathered_model():
    rows = _rows("llama", "first", StatesLayout(d=2, reshard=False))
    row = rows["gathered bf16 parameters, forward to backward"]
    assert row.reason and UNEXPLAINED not in row.reason
    # the whole padded model in bf16: twice the fp32 shard's elements over d = 2
    assert row.measured == rows["model states/fp32 parameters"].measured


def test_torchtitan_preset_bills_what_fsdp2_holds():
    # one process: exact; over 2 ranks: the difference is FSDP2's dim-0 padding, sized apart
    one = _rows("qwen3", "first", StatesLayout())["model states/total, --framework torchtitan (fp32-adam)"]
    assert one.measured == one.billed, one
    two = _rows("qwen3", "first", StatesLayout(d=2))["model states/total, --framework torchtitan (fp32-adam)"]
    assert two.measured > two.billed and two.reason.startswith("the preset's fp32-adam blocks, as held")


def test_tp_by_fsdp_differs_by_replicated_norms_and_padding():
    # 2-D: torchtitan's TP plan on t = 3, FSDP2 over d = 2; the norms stay whole on each TP rank, which the
    # bill's first-order blocks split t ways: (2L + 1)·h norm weights, 4 B each, held (1 − 1/t)/d too many
    from fractions import Fraction

    cfg = config("llama", "tp")
    rows = _rows("llama", "tp", StatesLayout(d=2, tp=3))
    norms = (2 * cfg["num_hidden_layers"] + 1) * cfg["hidden_size"]
    excess = Fraction(4 * norms * 2, 3 * 2)
    row = rows["model states/fp32 parameters"]
    assert f"first order): +{excess} B" in row.reason and UNEXPLAINED not in row.reason
    assert row.measured > row.billed + excess   # and FSDP2's padding of the TP-local shards on top


def test_every_row_of_one_model_is_exact_or_named():
    from symbolic.per_rank_states import LAYOUTS, rows

    grid = rows(families=("qwen3",), dims=("second",), layouts=LAYOUTS, tp_layouts=())
    assert len(grid) > 70 and not [row for row in grid if not row.exact and (not row.reason or UNEXPLAINED in row.reason)]
    assert sum(row.exact for row in grid) >= 40
