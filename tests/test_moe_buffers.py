"""The expert-parallel all-to-all's staging buffers in the timeline (seed 004 §05.4), against a
simulated dispatch over the ranks of an EP group."""
import random
from fractions import Fraction
from dataclasses import replace

import pytest

from symbolic.claims.quantities import evaluate
from symbolic.core.numeric import exact
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset
from symbolic.step import timeline as T


def simulated_dispatch(tokens_per_rank, ranks, experts, top_k, seed=0, balanced=True):
    """Rows each rank sends and receives in one dispatch: every token picks top_k distinct experts
    (balanced: a round-robin that gives every expert the same load), experts laid out E/e per rank."""
    rng = random.Random(seed)
    local = experts // ranks
    sent = [0] * ranks
    received = [0] * ranks
    for rank in range(ranks):
        for token in range(tokens_per_rank):
            if balanced:
                start = (rank * tokens_per_rank + token) * top_k
                chosen = [(start + j) % experts for j in range(top_k)]
            else:
                chosen = rng.sample(range(experts), top_k)
            for expert in chosen:
                sent[rank] += 1
                received[expert // local] += 1
    return sent, received


@pytest.mark.parametrize("ranks, experts, top_k", [(4, 8, 2), (8, 64, 6), (2, 16, 4)])
def test_rows_against_a_simulated_dispatch(ranks, experts, top_k):
    tokens = 96
    sent, received = simulated_dispatch(tokens, ranks, experts, top_k)
    staged = dict(T.all_to_all_staging())
    at = {"s": tokens, "b": 1, "k": top_k, "h": 1}
    # bf16 rows of width 1: bytes / 2 = rows
    assert exact(staged["communication/EP all-to-all staging, dispatch send (bf16)"], at) == 2 * max(sent)
    assert exact(staged["communication/EP all-to-all staging, dispatch receive (bf16)"], at) == 2 * max(received)
    assert exact(staged["communication/EP all-to-all staging, combine send (bf16; backward reuses it)"], at) == \
        2 * max(received)
    # Unbalanced routing: the busiest rank receives C_f × the balanced share; the send side is unchanged.
    sent_u, received_u = simulated_dispatch(tokens, ranks, experts, top_k, seed=3, balanced=False)
    capacity = Fraction(max(received_u), tokens * top_k)  # the busiest rank over the balanced share
    imbalanced = dict(T.all_to_all_staging(capacity=True))
    receive = imbalanced["communication/EP all-to-all staging, dispatch receive (bf16)"]
    assert exact(receive, dict(at, C_f=capacity)) == 2 * max(received_u)
    assert max(sent_u) == tokens * top_k


def test_fp8_dispatch_rows_carry_their_tile_scales():
    at = {"s": 4096, "b": 1, "k": 8, "h": 7168}
    fp8 = evaluate("communication.ep_all_to_all_staging", fp8=True)
    per_tensor = evaluate("communication.ep_all_to_all_staging", fp8=True, fp8_tile=0)
    bf16 = evaluate("communication.ep_all_to_all_staging")
    rows = 4096 * 8
    assert exact(fp8, at) == rows * (7168 + 4 * 7168 // 128)  # 231.0 MiB: seed 004 §05.4's ≈ 230 MiB
    assert exact(per_tensor, at) == rows * 7168
    assert exact(bf16, at) == rows * 7168 * 2
    assert exact(evaluate("communication.ep_all_to_all_staging", buffer="all", fp8=True), at) == \
        2 * rows * (7168 + 224) + 2 * rows * 7168 * 2
    with pytest.raises(ValueError):
        evaluate("communication.ep_all_to_all_staging", buffer="sideways")


def test_staging_splits_by_sp_and_cp():
    plain = dict(T.all_to_all_staging())
    split = dict(T.all_to_all_staging(sequence_parallel=True, context_parallel=True))
    at = {"s": 4096, "b": 2, "k": 2, "h": 4096, "t": 4, "c": 2}
    for name, size in plain.items():
        assert exact(size, at) == 8 * exact(split[name], at)


def test_timeline_counts_the_staging_only_under_expert_parallelism():
    model = preset("mixtral-8x7b")
    layout = Layout(seq=4096, ep=8, dp=8, zero=1, recompute="full")
    names = [x.name for x in T.build(model, layout).families[0].items if x.cls == "communication"]
    assert sum("EP all-to-all staging" in n for n in names) == 4
    without = T.build(model, replace(layout, ep=1)).families[0].items
    assert not any("EP all-to-all staging" in x.name for x in without)
    dense = T.build(preset("gpt-7b"), Layout(dp=8)).families[0].items
    assert not any("EP all-to-all staging" in x.name for x in dense)
    # 4 buffers of s·b·k rows × h × 2 B: 4 × 4096 × 2 × 4096 × 2 B = 256 MiB more communication than ep = 1
    # has (its own NCCL communicators aside).
    with_ep = T.build(model, layout).evaluate().peak_by_class()["communication"]
    staged = sum(exact(size, layout.values(model)) for _, size in T.expert_all_to_all_staging(model, layout))
    assert staged == 4 * 4096 * 2 * 4096 * 2
    assert with_ep >= staged


def test_fp8_activations_put_the_dispatch_in_fp8_with_its_scales():
    model = preset("mixtral-8x7b")
    layout = Layout(seq=4096, ep=8, dp=8, zero=1, fp8_activations=True)
    staged = dict(T.expert_all_to_all_staging(model, layout))
    values = layout.values(model)
    send = staged["communication/EP all-to-all staging, dispatch send (fp8 + fp32 scale per 1×128 tile)"]
    assert exact(send, values) == 4096 * 2 * (4096 + 4 * 4096 // 128)
    combine = staged["communication/EP all-to-all staging, combine send (bf16; backward reuses it)"]
    assert exact(combine, values) == 4096 * 2 * 4096 * 2
