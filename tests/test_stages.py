"""Which layers each pipeline stage and chunk holds (symbolic.layout.stages), against Megatron-Core's own
rules, and what a stage keeps alive under Megatron-LM's schedule."""
import json
import re

import pytest

from symbolic.bill.derive import inventories, make_bill
from symbolic.cli import main
from symbolic.core.numeric import exact
from symbolic.layout.layout import Layout, in_flight, stage_layers
from symbolic.layout.stages import (balanced_layout, chunk_ranges, parse_pipeline_layout, schedule, stage_mix,
                                    stage_parameters)
from symbolic.ledgers.params import count
from symbolic.models.builtin import presets
from symbolic.models.config import ConfigError


# --- Megatron-Core's rules, transcribed (NVIDIA/Megatron-LM d98e8a6) as the reference ---------------------

def megatron_num_layers_to_build(num_layers, pp, vp, first, last, pp_rank):
    """megatron/core/transformer/transformer_block.py get_num_layers_to_build (uneven branch and even
    branch), with TransformerConfig's checks (transformer_config.py: counts > 0, divisible by vp)."""
    if first is not None or last is not None:
        for n in (first, last):
            if n is not None and (n <= 0 or (vp is not None and n % vp)):
                raise ValueError("first/last stage")
        layers_to_distribute, stages_left = num_layers, pp
        if first is not None:
            layers_to_distribute -= first
            stages_left -= 1
        if last is not None:
            layers_to_distribute -= last
            stages_left -= 1
        if bool(layers_to_distribute) != bool(stages_left):
            raise ValueError("Mismatch")
        if stages_left > 0:
            if layers_to_distribute % stages_left:
                raise ValueError("With uneven pipelineing the left over layers must be divisible by left over stages")
            per_rank = layers_to_distribute // stages_left
        else:
            per_rank = 0
        if pp_rank == 0 and first is not None:
            per_rank = first
        if pp_rank == pp - 1 and last is not None:
            per_rank = last
    else:
        if num_layers % pp:
            raise ValueError("even")
        per_rank = num_layers // pp
    if vp is not None and pp > 1:
        if per_rank % vp:
            raise ValueError("vp")
        return per_rank // vp
    return per_rank


def megatron_layer_offset(num_layers, pp, vp, first, last, pp_rank, vp_stage):
    """megatron/core/transformer/transformer_layer.py get_transformer_layer_offset (the uneven branch
    with and without virtual stages, and the even branch)."""
    if first is not None or last is not None:
        middle_stages = pp - sum(1 for x in (first, last) if x is not None)
        f = 0 if first is None else first
        la = 0 if last is None else last
        middle_num_layers = num_layers - f - la
        middle_rank = pp_rank if first is None else pp_rank - 1
        if vp is not None:
            first_chunk = 0 if first is None else first // vp
            last_chunk = 0 if last is None else last // vp
            middle_chunk = middle_num_layers // vp
            total_virtual = first_chunk + middle_chunk + last_chunk
            if pp_rank == 0:
                return vp_stage * total_virtual
            return vp_stage * total_virtual + first_chunk + middle_rank * (middle_chunk // middle_stages)
        per_rank = middle_num_layers // middle_stages if middle_stages > 0 else 0
        return 0 if pp_rank == 0 else middle_rank * per_rank + f
    per_rank = num_layers // pp
    if vp is not None:
        per_chunk = per_rank // vp
        return vp_stage * (num_layers // vp) + pp_rank * per_chunk
    return pp_rank * per_rank


def megatron_layout_ranges(layout, pp):
    """PipelineParallelLayerLayout: the 1-D layout to 2-D [pp_rank][vpp_rank], get_layer_offset and
    get_num_layers_to_build for decoders (pipeline_parallel_layer_layout.py)."""
    flat = layout.replace(",", "")
    for pattern in (r'\(([^)]+)\)\*(\d+)', r'(.)\*(\d+)'):
        flat = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), flat)
    stages = flat.split("|")
    vp = len(stages) // pp
    grid = [[stages[v * pp + r] for v in range(vp)] for r in range(pp)]
    out = []
    for r in range(pp):
        row = []
        for v in range(vp):
            offset = sum(grid[rr][vv].count("t") for vv in range(v + 1) for rr in range(pp if vv < v else r))
            row.append(range(offset, offset + grid[r][v].count("t")))
        out.append(tuple(row))
    return tuple(out)


#: (L, p, v, first, last): valid in Megatron-Core and refused by it, each checked against the reference.
CASES = [(8, 2, 4, 0, 0), (8, 2, 2, 0, 0), (32, 4, 2, 0, 0), (61, 16, 1, 0, 1), (61, 16, 1, 1, 0),
         (61, 16, 1, 3, 2), (62, 4, 2, 14, 16), (60, 4, 3, 12, 12), (40, 4, 2, 8, 0), (40, 4, 2, 0, 8),
         (64, 4, 4, 12, 20), (61, 4, 4, 13, 0), (61, 4, 4, 0, 0), (30, 4, 2, 6, 6), (24, 3, 2, 0, 10),
         (12, 2, 3, 6, 6), (12, 2, 3, 3, 9), (10, 2, 1, 0, 0), (9, 3, 3, 0, 0), (61, 4, 1, 16, 0)]


@pytest.mark.parametrize("L,p,v,first,last", CASES)
def test_chunk_layers_follow_megatron_core(L, p, v, first, last):
    vp = v if v > 1 else None
    f, la = first or None, last or None
    try:
        expected = tuple(tuple(range(megatron_layer_offset(L, p, vp, f, la, r, c),
                                     megatron_layer_offset(L, p, vp, f, la, r, c)
                                     + megatron_num_layers_to_build(L, p, vp, f, la, r))
                               for c in range(v)) for r in range(p))
    except (ValueError, AssertionError, ZeroDivisionError):  # ZeroDivisionError: Megatron's p = 2 crash, below
        expected = None
    if expected is None:
        with pytest.raises(ConfigError) as error:
            chunk_ranges(L, p, v, first, last)
        assert "\n" not in str(error.value) and "Megatron-Core" in str(error.value)
        return
    assert chunk_ranges(L, p, v, first, last) == expected
    assert sorted(i for row in expected for r in row for i in r) == list(range(L))  # each layer once
    assert stage_layers(L, p, v, first, last) == tuple(sum(len(r) for r in row) for row in expected)


LAYOUTS = [("Et*3|(tt|)*29,|L", 16), ("Et|t|(t*2|)*29tL", 8), ("Et*3|t*3|(t*4|)*13t*3L", 4),
           ("Et*4|(t*4|)*14t*4L", 4), ("E|t*61|L", 3), ("Ett|tt||ttL", 2)]


@pytest.mark.parametrize("layout,pp", LAYOUTS)
def test_pipeline_layout_chunks_follow_megatron_core(layout, pp):
    expected = megatron_layout_ranges(layout, pp)
    layers = sum(len(r) for row in expected for r in row)
    v = len(expected[0])
    assert chunk_ranges(layers, pp, v, layout=layout) == expected
    assert sorted(i for row in expected for r in row for i in r) == list(range(layers))


def test_megatron_docs_example_rank_map():
    """docs/user-guide/features/pipeline_parallel_layout.md: 'Et*3|(tt|)*29,m|L' on PP16 × VPP2 puts
    embedding + 3 decoders on rank 0's first chunk, 2 on its second, 2 + 2 on ranks 1-13, 2 + mtp on 14,
    2 + loss on 15. The engine does not bill MTP: with the m dropped (an empty stage) the decoders are the same."""
    ranges = chunk_ranges(61, 16, 2, layout="Et*3|(tt|)*29,|L")
    assert [len(r) for r in ranges[0]] == [3, 2]
    assert all([len(r) for r in ranges[k]] == [2, 2] for k in range(1, 14))
    assert [len(r) for r in ranges[14]] == [2, 0] and [len(r) for r in ranges[15]] == [2, 0]
    with pytest.raises(ConfigError, match="MTP"):
        chunk_ranges(61, 16, 2, layout="Et*3|(tt|)*29,m|L")


@pytest.mark.parametrize("layout,message", [
    ("Et*3|t*3|(t*4|)*13t*3", "loss"), ("t*3|Et*3|(t*4|)*13t*3L", "embedding"), ("Et*61|L", "stages"),
    ("Et*3|t*3|(t*4|)*13t*2L", "decoder layers"), ("Ex*3|t*3|(t*4|)*13t*3L", "not a layer"),
    ("Et*99999999999|L", "unrolls"), ("(t*100000|)*100000", "unrolls"), ("Et*3|t*3|(t*4|)*13t*3||||L", "interleave 5")])
def test_bad_layouts_are_refused_in_one_line(layout, message):
    with pytest.raises(ConfigError, match=message) as error:
        chunk_ranges(61, 4, 4, layout=layout)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("L,p,v", [(61, 4, 4), (61, 16, 1), (61, 8, 4), (64, 4, 4), (7, 2, 2), (5, 1, 1)])
def test_the_suggested_layout_is_valid_and_balanced(L, p, v):
    layout = balanced_layout(L, p, v)
    sizes = [len(r) for row in chunk_ranges(L, p, v, layout=layout) for r in row]
    assert sum(sizes) == L and max(sizes) - min(sizes) <= 1
    assert len(parse_pipeline_layout(layout, p)) == p * v


# --- the schedule --------------------------------------------------------------------------------------

@pytest.mark.parametrize("p,v,m", [(4, 4, 8), (4, 4, 4), (4, 2, 12), (2, 3, 6), (8, 1, 16), (4, 1, 2), (16, 1, 64)])
def test_the_simulated_schedule_holds_the_layout_rule_in_flight(p, v, m):
    """layout.in_flight (Narayanan's count, capped) is the most chunk instances alive in the simulation."""
    for rank, stage in ((0, "first"), (p - 1, "last")):
        alive, most = set(), 0
        ops = schedule(p, v, m, rank)
        assert sorted(op[1:] for op in ops if op[0] == "F") == sorted(op[1:] for op in ops if op[0] == "B")
        for op, micro_batch, chunk in ops:
            if op == "F":
                assert (micro_batch, chunk) not in alive
                alive.add((micro_batch, chunk))
                most = max(most, len(alive))
            else:
                alive.remove((micro_batch, chunk))
        assert most == in_flight(p, v, m, stage), (rank, stage)


def test_more_micro_batches_add_no_moment():
    model = presets()["deepseek-v3"]
    base = Layout(pp=4, interleave=4, ep=64, dp=64, seq=4096, pipeline_layout="Et*3|t*3|(t*4|)*13t*3L")
    for stage in ("first", "last"):
        eight = stage_mix(model, Layout(**{**base.__dict__, "global_batch": 64 * 32}), stage).moments
        twelve = stage_mix(model, Layout(**{**base.__dict__, "global_batch": 64 * 48}), stage).moments
        assert set(eight) == set(twelve)


# --- DeepSeek-V3: dense-first layers on their stage ---------------------------------------------------

SEED_004 = Layout(pp=4, interleave=4, ep=64, dp=64, seq=4096, global_batch=15360, zero=1,
                  pipeline_layout="Et*3|t*3|(t*4|)*13t*3L")


def test_deepseek_v3_stages_hold_their_own_layers():
    model = presets()["deepseek-v3"]
    first, last = stage_mix(model, SEED_004, "first"), stage_mix(model, SEED_004, "last")
    assert first.chunks[0] == ("dense",) * 3 and first.layers("dense") == 3 and first.layers("moe") == 12
    assert last.layers("dense") == 0 and last.layers("moe") == 15 and last.loss and not last.embedding
    # 3 + 3 + 4 × 13 + 3: the stages' layers are the model's
    assert sum(SEED_004.stage_layer_counts(model)) == 61


def test_two_stages_hold_every_parameter_once():
    """pp = 2: the first stage's layers and embedding plus the last's layers and output side are the model."""
    model = presets()["deepseek-v3"]
    param_inv = inventories(model)[0]
    for layout in (Layout(pp=2, first_stage_layers=31), Layout(pp=2, interleave=2, global_batch=2,
                                                               pipeline_layout="Et*15|t*15|t*15|t*16L")):
        total = sum(exact(stage_parameters(param_inv, stage_mix(model, layout, s), pipeline=True)
                    , layout.values(model)) for s in ("first", "last"))
        assert total == exact(count(param_inv), model.values())


def test_deepseek_v3_bill_at_seed_004_layout(capsys):
    code = main(["bill", "deepseek-v3", "--pp", "4", "--interleave", "4", "--ep", "64", "--dp", "64", "--seq", "4096",
                 "--micro-batch", "1", "--global-batch", "15360", "--zero", "1",
                 "--pipeline-layout", "Et*3|t*3|(t*4|)*13t*3L", "--framework", "none", "--json"])  # make_bill's
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    bill = make_bill(presets()["deepseek-v3"], SEED_004)
    # every stage is a candidate: here stage 2 of 4 (15 MoE layers, 60 MoE copies held) is the busiest
    assert data["total_bytes"] == bill.totals["total_bytes"] == max(data["peak_first_stage_bytes"],
                                                                    data["peak_middle_stage_bytes"],
                                                                    data["peak_last_stage_bytes"])
    assert data["verdict_stage"] == "rank1" and data["verdict_stage_words"] == "stage 2 of 4"
    # the first stage: 3 dense + 12 MoE layers and the embedding, its own parameters
    model = presets()["deepseek-v3"]
    from symbolic.bill.derive import stage_params_per_gpu
    assert data["params_per_gpu"] == exact(stage_params_per_gpu(inventories(model)[0], stage_mix(model, SEED_004),
                                                                SEED_004), SEED_004.values(model))


def test_deepseek_v3_timeline_at_seed_004_layout(capsys):
    code = main(["timeline", "deepseek-v3", "--pp", "4", "--interleave", "4", "--ep", "64", "--dp", "64", "--seq",
                 "4096", "--global-batch", "15360", "--zero", "1", "--pipeline-layout", "Et*3|t*3|(t*4|)*13t*3L",
                 "--stage", "last", "--brief"])
    out = capsys.readouterr().out
    assert code == 0 and "GB" in out


def test_seed_004_layout_without_a_per_chunk_layout_is_refused_with_megatrons_rule(capsys):
    code = main(["bill", "deepseek-v3", "--pp", "4", "--interleave", "4", "--ep", "64", "--dp", "64", "--seq", "4096",
                 "--global-batch", "15360"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "Megatron-Core" in err and "--pipeline-layout 'Et*3|t*3|(t*4|)*13t*3L'" in err


def test_the_derivation_cache_keys_each_layout_apart(tmp_path, monkeypatch):
    """The derived text holds a stage's layer counts as integers: two layouts of the same kind (the same
    letters, other chunks) get their own entries, each equal to the bill derived afresh."""
    from symbolic.bill.cache import derivation
    from symbolic.bill.evaluate import evaluate
    monkeypatch.setenv("SYMBOLIC_CACHE_DIR", str(tmp_path))
    model = presets()["deepseek-v3"]
    other = Layout(**{**SEED_004.__dict__, "pipeline_layout": "Et*4|t*4|(t*4|)*13t*1L"})
    for layout in (SEED_004, other, SEED_004):
        cached = evaluate(derivation(model, layout), model, layout).totals["total_bytes"]
        assert cached == make_bill(model, layout).totals["total_bytes"]
    assert len(list(tmp_path.glob("*/*.json"))) == 2
    assert make_bill(model, other).totals["total_bytes"] != make_bill(model, SEED_004).totals["total_bytes"]
