"""The communication ledger against an independent count: a toy ring of n ranks that runs
each collective step by step and counts the bytes every rank sends."""
from fractions import Fraction

import pytest

from symbolic.bill.derive import architecture_inventories
from symbolic.models.structure import Structure
from symbolic.core.dims import SYMBOLS
from symbolic.core.numeric import exact
from symbolic.ledgers import communication as comm
from symbolic.ledgers.communication import COLLECTIVES, ring_factor


class Ring:
    """n ranks in a ring. A buffer is n chunks (size in bytes, value); sending a chunk
    counts its size against the sender. Values check that the collective is the right one."""

    def __init__(self, n: int):
        self.n = n
        self.sent = [0] * n

    def _send(self, src: int, size) -> None:
        self.sent[src] += size

    def reduce_scatter(self, buffers):
        """Ring reduce-scatter: n−1 steps; at step k rank r passes its partial sum of chunk
        (r − k) mod n to rank r + 1, which adds its own. Returns each rank's reduced chunk."""
        n = self.n
        partial = [list(buf) for buf in buffers]
        for step in range(n - 1):
            moves = []
            for r in range(n):
                idx = (r - step) % n
                size, value = partial[r][idx]
                self._send(r, size)
                moves.append(((r + 1) % n, idx, value))
            for dst, idx, value in moves:
                size, own = partial[dst][idx]
                partial[dst][idx] = (size, own + value)
        return [partial[r][(r + 1) % n] for r in range(n)]

    def all_gather(self, owned):
        """Ring all-gather: n−1 steps; rank r forwards the chunk it received last step."""
        n = self.n
        held = [{(r + 1) % n: owned[r]} for r in range(n)]
        last = [(r + 1) % n for r in range(n)]
        for _ in range(n - 1):
            moves = []
            for r in range(n):
                chunk = held[r][last[r]]
                self._send(r, chunk[0])
                moves.append(((r + 1) % n, last[r], chunk))
            for dst, idx, chunk in moves:
                held[dst][idx] = chunk
                last[dst] = idx
        return held

    def all_reduce(self, buffers):
        return self.all_gather(self.reduce_scatter(buffers))

    def all_to_all(self, buffers):
        """Rank r sends chunk j to rank j (its own chunk stays)."""
        out = [[None] * self.n for _ in range(self.n)]
        for r, buf in enumerate(buffers):
            for j, chunk in enumerate(buf):
                if j != r:
                    self._send(r, chunk[0])
                out[j][r] = chunk
        return out

    def send_recv(self, buffers):
        """Each rank sends its whole message to the next."""
        for r, buf in enumerate(buffers):
            self._send(r, sum(size for size, _ in buf))
        return buffers


def _buffers(n: int, size: int):
    """Rank r's buffer: n chunks of size/n bytes with value r + 1 (so sums are checkable)."""
    return [[(Fraction(size, n), r + 1)] * n for r in range(n)]


def run(collective: str, n: int, size: int):
    ring = Ring(n)
    buffers = _buffers(n, size)
    result = {"all-reduce": ring.all_reduce, "all-gather": lambda b: ring.all_gather([x[0] for x in b]),
              "reduce-scatter": ring.reduce_scatter, "all-to-all": ring.all_to_all,
              "send-recv": ring.send_recv}[collective](buffers)
    return ring, result


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_ring_factor_is_what_a_simulated_ring_sends(collective, n):
    size = 840  # divisible by every n here
    ring, result = run(collective, n, size)
    assert all(sent == ring_factor(collective, n) * size for sent in ring.sent)
    total = n * (n + 1) // 2
    if collective == "all-reduce":   # every rank ends with every chunk summed over the ranks
        assert all(chunk[1] == total for held in result for chunk in held.values()) and all(len(x) == n for x in result)
    if collective == "reduce-scatter":
        assert [chunk[1] for chunk in result] == [total] * n
    if collective == "all-gather":   # every rank ends with all n chunks
        assert all(len(held) == n for held in result)


# --- every term of the ledger, counted by the ring ---------------------------------------------

VALUES = dict(s=64, b=2, h=16, a=4, L=8, V=32, t=2, p=2, d=4, c=2, v=2, f=64, B=16)
LAYOUTS = [
    dict(),
    dict(sequence_parallel=True),
    dict(recompute="full"),
    dict(sequence_parallel=True, recompute="full", pipeline=True, interleaved=True, context_parallel=True),
    dict(zero=1, pipeline=True),
    dict(zero=2),
    dict(zero=3, recompute="full"),
    dict(context_parallel=True, zero=1),
]


def _terms(**layout):
    parameters, saved, matmuls = architecture_inventories(Structure("gpt"))
    return comm.terms(parameters, saved, matmuls, **layout)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda x: ",".join(f"{k}={v}" for k, v in x.items()) or "tp")
def test_each_term_moves_what_the_simulated_ring_moves(layout):
    parameters, _, _ = architecture_inventories(Structure("gpt"))
    from symbolic.ledgers import params
    values = dict(VALUES)
    values["Psi"] = int(exact(params.count(parameters), values))
    for term in _terms(**layout):
        n = int(exact(term.size, values))
        size = exact(term.bytes, values)
        calls = exact(term.calls, values)
        ring, _ = run(term.collective, n, Fraction(int(size.p), int(size.q)))
        counted = Fraction(ring.sent[0]) * Fraction(int(calls.p), int(calls.q))
        assert exact(term.traffic, values) == counted, term.name


def test_tp_terms_follow_the_blocks_of_the_inventory():
    """Two blocks (attention, MLP) → two g and two f per layer; a LLaMA layer has the same two blocks."""
    for arch, structure in (("gpt", Structure("gpt")), ("llama", Structure("llama", False, False, "rope", False))):
        parameters, saved, matmuls = architecture_inventories(structure)
        assert comm.layer_blocks(matmuls) == ["attention", "mlp"]
        names = [x.name for x in comm.terms(parameters, saved, matmuls) if x.group == "t"]
        assert names == ["tp/attention/forward_all_reduce", "tp/attention/backward_all_reduce",
                         "tp/mlp/forward_all_reduce", "tp/mlp/backward_all_reduce"]


def test_selective_recompute_repeats_no_collective_full_repeats_the_forward_ones():
    tp = lambda **kw: [x for x in _terms(**kw) if x.group == "t"]  # noqa: E731
    assert len(tp(recompute="selective")) == len(tp()) == 4
    assert [x.phase for x in tp(recompute="full")].count("recompute") == 2


def test_pipeline_sends_scale_with_the_interleaved_chunks():
    b, d, B, v = (SYMBOLS[x] for x in "bdBv")
    plain = {x.name: x.calls for x in _terms(pipeline=True)}
    inter = {x.name: x.calls for x in _terms(pipeline=True, interleaved=True)}
    assert plain["pp/forward_send"] == B / (b * d) and inter["pp/forward_send"] == v * B / (b * d)


def test_zero_stages_change_the_data_parallel_collectives():
    kinds = {z: sorted({(x.collective, x.phase) for x in _terms(zero=z) if x.group == "d"}) for z in range(4)}
    assert kinds[0] == [("all-reduce", "backward")]
    assert kinds[1] == kinds[2] == [("all-gather", "optimizer"), ("reduce-scatter", "backward")]
    assert kinds[3] == [("all-gather", "backward"), ("all-gather", "forward"), ("reduce-scatter", "backward")]
    M = SYMBOLS["B"] / (SYMBOLS["b"] * SYMBOLS["d"])
    calls = {x.name: x.calls for x in _terms(zero=2)}
    assert calls["dp/gradient_reduce_scatter"] == M  # ZeRO-2: every micro-batch
    assert {x.name: x.calls for x in _terms(zero=1)}["dp/gradient_reduce_scatter"] == 1


def test_context_parallel_ring_passes_kv_c_minus_1_times_per_layer():
    terms = {x.name: x for x in _terms(context_parallel=True)}
    forward = terms["cp/forward_kv_exchange"]
    c, t, b, s, h = (SYMBOLS[x] for x in "ctbsh")
    assert forward.bytes == 2 * b * (s / c) * h * 2 / t  # K and V of s/c tokens, 2 B each, heads split by t
    assert forward.calls == (c - 1) * SYMBOLS["L"] / SYMBOLS["p"] * SYMBOLS["B"] / (b * SYMBOLS["d"])
    assert terms["dp/gradient_all_reduce"].size == SYMBOLS["d"] * c


def test_expert_parallel_adds_the_dispatchers_all_to_alls_over_e():
    parameters, saved, matmuls = architecture_inventories(Structure("moe", False, False, "rope"))
    terms = [x for x in comm.terms(parameters, saved, matmuls, expert_parallel=True) if x.group == "ep"]
    assert {x.collective for x in terms} == {"all-to-all"} and len(terms) == 4
    assert all(x.size == SYMBOLS["e"] for x in terms)
    full = [x for x in comm.terms(parameters, saved, matmuls, expert_parallel=True, recompute="full")
            if x.group == "ep"]
    assert len(full) == 6                         # the recomputed forward dispatches and combines again
    # A dense layer routes nothing: no expert-parallel term at all.
    assert not [x for x in _terms(expert_parallel=True) if x.group == "ep"]


def _simulated_dispatch(ranks: int, experts: int, tokens: int, top_k: int, row_bytes: int) -> list[int]:
    """Bytes each rank sends in one dispatch: every token of every rank picks top_k experts in a fixed,
    balanced rotation; experts are split evenly over the ranks (rank r holds experts
    r·E/e … (r+1)·E/e − 1); a row for an expert on another rank crosses the network."""
    local = experts // ranks
    sent = [0] * ranks
    for rank in range(ranks):
        for token in range(tokens):
            for j in range(top_k):
                expert = (rank * tokens * top_k + token * top_k + j) % experts
                if expert // local != rank:
                    sent[rank] += row_bytes
    return sent


@pytest.mark.parametrize("ranks, experts, top_k", [(2, 8, 2), (4, 8, 2), (8, 8, 1), (4, 16, 4)])
def test_the_dispatch_all_to_all_sends_what_a_simulated_routing_sends(ranks, experts, top_k):
    """Each call's traffic (ring factor (e−1)/e × b·s·k·h bytes) equals the bytes that leave a rank
    when a fixed, balanced routing sends its tokens' rows to the experts' owners."""
    parameters, saved, matmuls = architecture_inventories(Structure("moe", False, False, "rope"))
    dispatch = next(x for x in comm.terms(parameters, saved, matmuls, expert_parallel=True, tensor_parallel=False)
                    if x.name == "ep/forward_dispatch_all_to_all")
    values = dict(VALUES, e=ranks, E=experts, k=top_k, t=1, c=1)
    per_call = exact(dispatch.ring_factor * dispatch.bytes, values)
    row_bytes = values["h"] * 2
    sent = _simulated_dispatch(ranks, experts, values["b"] * values["s"], top_k, row_bytes)
    assert all(x == per_call for x in sent)
    # Calls per iteration: the MoE layers a GPU holds × micro-batches per pipeline.
    assert exact(dispatch.calls, values) == Fraction(values["L"], values["p"]) * Fraction(
        values["B"], values["b"] * values["d"])


def test_only_the_moe_layers_dispatch():
    """Dense layers first (DeepSeek's first_k_dense_replace): the router repeats (L − L_d)/L times."""
    from symbolic.models.builtin import preset
    from symbolic.bill.derive import inventories
    model = preset("deepseek-v3")
    parameters, saved, matmuls = inventories(model)
    share = comm.moe_share(matmuls)
    values = dict(model.values(), **dict(model.dims))
    assert exact(share, values) == Fraction(58, 61)


def test_a_bad_term_is_refused():
    with pytest.raises(ValueError, match="group"):
        comm.Collective("x", "q", SYMBOLS["t"], "all-reduce", 1, 1, "forward", "none", "")
    with pytest.raises(ValueError, match="collective"):
        comm.Collective("x", "t", SYMBOLS["t"], "broadcast", 1, 1, "forward", "none", "")
