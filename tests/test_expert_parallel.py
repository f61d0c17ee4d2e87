"""Expert parallelism (--ep) and expert tensor parallelism (--etp) of a mixture of experts.

The routed experts' activations are checked against an independent count: a
pure-Python dispatch of a routed batch over the ranks of one pipeline stage,
laid out as Megatron-Core lays them (dense grid tp-cp-dp, expert grid
etp-ep-edp over the same ranks), with a fixed balanced routing. It counts the
assignments each rank's local experts receive and the bytes each saved tensor
takes there; the inventory under ``Layout.strategy()`` must give the same.
"""
import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.core.numeric import exact
from symbolic.core.tensors import Axis
from symbolic.layout.experts import expert_data_parallel
from symbolic.layout.layout import Layout
from symbolic.layout.strategies import Strategy
from symbolic.ledgers import activations
from symbolic.models.architectures import moe
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError, ModelConfig
from symbolic.search.plan import exact_totals, plan

MIXTRAL = preset("mixtral-8x7b")


def _small_moe(experts=8, top_k=2, expert_ffn=48, layers=4):
    return ModelConfig("tiny-moe", layers, 64, 8, 1000, 64, ffn=expert_ffn, tied=False, positions="rope", arch="moe",
                       kv_heads=4, mlp="swiglu", norm="rmsnorm", experts=experts, experts_per_token=top_k,
                       expert_ffn=expert_ffn)


# --- the independent count: a routed batch dispatched over the ranks -------------------------

def dispatch(s, b, k, E, t, c, d, ep, etp, sp):
    """Assignments each rank's local experts hold after dispatch: {rank: {expert: count}}, and each
    rank's own routed tokens {rank: count}.

    Ranks of one pipeline stage: dense coordinates tp fastest, then cp, then dp; expert coordinates
    etp fastest, then ep, then edp (Megatron-Core's RankGenerator order tp-cp-ep-dp). A rank holds
    positions of its cp chunk of each of its replica's b sequences; under SP only its tp share, without
    SP the whole chunk (the same tokens on the t ranks). Routing: token number j (within the rank)
    goes to experts (j·k + i) mod E, i < k. Dispatch: an assignment to expert x goes to the rank of
    the sender's EP group (same etp and edp coordinates) whose ep coordinate owns x; then the ETP
    group all-gathers what its ranks received, when their tokens differ (SP, or t = 1).
    """
    ranks = t * c * d
    own = {}
    for r in range(ranks):
        tp_rank, cp_rank, dp_rank = r % t, (r // t) % c, r // (t * c)
        chunk = range(cp_rank * s // c, (cp_rank + 1) * s // c)
        if sp or t == 1:
            share = len(chunk) // t
            chunk = chunk[tp_rank * share:(tp_rank + 1) * share] if sp else chunk
        own[r] = [(dp_rank, seq, pos) for seq in range(b) for pos in chunk]
    per_rank_experts = E // ep

    def expert_coords(r):
        return r % etp, (r // etp) % ep, r // (etp * ep)

    received = {r: {} for r in range(ranks)}
    for r, tokens in own.items():
        e_tp, _, e_dp = expert_coords(r)
        for j, _token in enumerate(tokens):
            for i in range(k):
                x = (j * k + i) % E
                owner_ep = x // per_rank_experts
                dest = e_tp + etp * (owner_ep + ep * e_dp)
                received[dest][x] = received[dest].get(x, 0) + 1
    distinct = sp or t == 1
    local = {}
    for r in range(ranks):
        e_tp, e_ep, e_dp = expert_coords(r)
        peers = [q + etp * (e_ep + ep * e_dp) for q in range(etp)] if distinct else [r]
        counts = {}
        for q in peers:
            for x, n in received[q].items():
                counts[x] = counts.get(x, 0) + n
        local[r] = counts
    return local, {r: len(tokens) for r, tokens in own.items()}


def _width_elements(term, h, f_e, etp):
    """The per-assignment elements of an expert-side term, from its name (the simulation's own table)."""
    widths = {"token_index": 2, "input": h, "gate_up_output": 2 * f_e // etp, "act_output": f_e // etp,
              "down_input": f_e // etp, "routing_weight": 1, "down_output": h, "combine_input": h,
              # Megatron-Core's dispatcher and grouped experts (strategies.megatron_alltoall_dispatch)
              "up_offset": f_e // etp, "permuted_probs": 1, "act_up_product": f_e // etp}
    return widths[term.rsplit("/", 1)[-1]]


LAYOUTS = [  # (t, c, d, ep, etp, sp)
    (1, 1, 8, 8, 1, False),   # the layout: one expert per rank
    (2, 1, 4, 4, 1, True),    # EP across TP and DP ranks, experts not TP-split
    (2, 1, 4, 2, 2, True),    # etp = t
    (2, 2, 2, 4, 2, True),    # context parallel folded in
    (4, 1, 2, 2, 4, False),   # TP without SP: tokens replicated, etp = t
    (1, 2, 2, 2, 2, False),   # t = 1, expert TP over data/context ranks
    (2, 1, 2, 1, 2, True),    # no EP: only the /t of the experts' width
]


@pytest.mark.parametrize("dispatcher", ["hf", "alltoall"])
@pytest.mark.parametrize("t,c,d,ep,etp,sp", LAYOUTS)
def test_expert_terms_equal_a_simulated_dispatch(t, c, d, ep, etp, sp, dispatcher):
    from symbolic.layout.strategies import megatron_alltoall_dispatch
    S, B, K, E, H, FE = 16, 2, 2, 8, 64, 48
    local, own = dispatch(S, B, K, E, t, c, d, ep, etp, sp)
    model = _small_moe(E, K, FE)
    layout = Layout(seq=S, micro_batch=B, tp=t, cp=c, dp=d, ep=ep, etp=etp, sp=sp,
                    moe_dispatcher=dispatcher).validate(model)
    values = layout.values(model)
    single = moe.saved_tensors(shared_experts=0)
    single = megatron_alltoall_dispatch(single) if dispatcher == "alltoall" else single
    inventory = layout.strategy().shard(moe.saved_tensors(shared_experts=0))
    # every rank holds E/ep experts, and balanced routing gives each the same load
    assert {len(counts) for counts in local.values()} == {E // ep}
    assert len({n for counts in local.values() for n in counts.values()}) == 1
    for term in inventory:
        got = exact(term.bytes, values)
        if term.split is Axis.EXPERT:
            for r, counts in local.items():
                want = sum(counts.values()) * _width_elements(term.name, H, FE, etp) * term.bytes_per_element
                assert got == want, (term.name, r)
        elif term.name.startswith("moe/"):  # router and dispatcher side: one row per token the rank routes
            per_token = exact(single[term.name].bytes, values) / (S * B)
            assert {got} == {per_token * own[r] for r in own}, term.name


def test_capacity_factor_scales_the_busiest_experts_tokens():
    model = _small_moe()
    base, padded = (Layout(seq=16, micro_batch=2, tp=2, sp=True, dp=4, ep=4, moe_capacity=Fraction(cf))
                    for cf in (1, Fraction(5, 4)))
    one, more = (layout.strategy().shard(moe.saved_tensors(shared_experts=0)) for layout in (base, padded))
    for a, z in zip(one, more):
        ratio = exact(z.bytes, padded.values(model)) / exact(a.bytes, base.values(model))
        assert ratio == (Fraction(5, 4) if a.split is Axis.EXPERT else 1), a.name


# --- the done-when ---------------------------------------------------------------------

def test_params_per_gpu_is_one_expert_per_layer_plus_the_dense_part(capsys):
    assert main(["bill", "mixtral-8x7b", "--tp", "1", "--ep", "8", "--dp", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    L, h, f_e, E = 32, 4096, 14336, 8
    one_expert = 3 * h * f_e                       # gate, up (h×2f_e) and down (f_e×h)
    dense = data["params"] - L * E * one_expert    # attention, norms, router, embeddings, output
    attention = L * (2 * h * h + 2 * h * 1024)     # q, o: h×h; k, v: h×(g·h/a) with g = 8
    assert dense == attention + L * (2 * h + h * E) + 2 * 32000 * h + h
    assert data["params_per_gpu"] == dense + L * one_expert == 7_242_780_672
    states = {line["name"]: line["value"] for line in data["lines"] if line["ledger"] == "model_states"}
    assert states["bf16 parameters (routed experts)"] == 2 * L * one_expert
    assert states["bf16 parameters (dense part)"] == 2 * dense


def test_under_tp_sp_every_expert_line_has_its_split(capsys):
    assert main(["bill", "mixtral-8x7b", "--tp", "2", "--sp", "--seq", "4096", "--json"]) == 0
    lines = {line["name"]: line for line in json.loads(capsys.readouterr().out)["lines"]
             if line["ledger"] == "activations"}
    for name in ("moe/expert/gate_up_output", "moe/expert/act_output", "moe/expert/down_input"):
        assert lines[name]["formula"].endswith("/t") and "width /t" in lines[name]["condition"]
    for name in ("moe/expert/input", "moe/expert/down_output", "moe/expert/combine_input"):
        assert "/t" not in lines[name]["formula"] and "tokens ×1·t/t" in lines[name]["condition"]
    assert lines["moe/router_input"]["formula"].endswith("/t")  # the rank's own s/t tokens under SP
    # 4 B per element-pair of fc1's output, s·b·k rows of 2f_e / t: the issue's 15.03 GB → /t
    assert lines["moe/expert/gate_up_output"]["value"] == 32 * 4 * 4096 * 2 * 14336 // 2


def test_expert_grid_states_follow_megatron():
    """Experts: e·e_t·p ways, ZeRO kinds also over edp = t·d·c/(e·e_t); the dense part t·p, ZeRO over d·c."""
    model, L, h, f_e, E = MIXTRAL, 32, 4096, 14336, 8
    layout = Layout(tp=2, sp=True, dp=8, cp=2, ep=4, etp=1, zero=1, seq=4096)
    assert expert_data_parallel(layout) == 2 * 8 * 2 // 4
    bill = make_bill(model, layout)
    states = {line.name: line.value for line in bill.ledger("model_states")}
    experts = L * E * 3 * h * f_e
    dense = bill.totals["params"] - experts
    assert states["bf16 parameters (routed experts)"] == 2 * experts // 4
    assert states["fp32 master parameters (routed experts)"] == Fraction(4 * experts, 4 * 8)
    assert states["bf16 parameters (dense part)"] == Fraction(2 * dense, 2)
    assert states["Adam m (fp32) (dense part)"] == Fraction(4 * dense, 2 * 8 * 2)


def test_default_expert_grid_keeps_the_moe_totals():
    """ep = 1, etp = t: the states are the old Psi/(t·p) sum, split in two."""
    layout = Layout(tp=4, sp=True, dp=2, zero=1, seq=4096)
    bill = make_bill(MIXTRAL, layout)
    assert bill.totals["model_states_bytes"] == bill.totals["params"] * 4 // 4 + bill.totals["params"] * 12 // 8


# --- properties -----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]),
       st.sampled_from([0, 1, 2, 3]), st.booleans(), st.sampled_from(["none", "selective", "full"]))
def test_states_and_activations_per_gpu_do_not_grow_with_ep(tp, dp, ep, zero, sp, recompute):
    model = MIXTRAL
    sp = sp and tp > 1
    layouts = [Layout(tp=tp, dp=dp, ep=e, zero=zero, sp=sp, recompute=recompute, seq=4096) for e in (ep, 2 * ep)]
    if not all(layout.is_valid(model) for layout in layouts):
        return
    few, many = (exact_totals(model, layout) for layout in layouts)
    assert many["model_states_bytes"] <= few["model_states_bytes"]
    assert many["activation_bytes"] <= few["activation_bytes"]


@pytest.mark.parametrize("layout", [Layout(tp=2, sp=True, dp=4, ep=8, etp=1, seq=4096, zero=1),
                                    Layout(tp=2, sp=True, dp=4, pp=2, ep=2, etp=2, seq=4096, recompute="full",
                                           moe_capacity=Fraction(5, 4)),
                                    Layout(tp=2, sp=True, dp=4, ep=4, seq=4096, recompute="selective",
                                           recompute_modules=("moe_act", "layernorm"))])
def test_plan_expressions_equal_the_bill(layout):
    bill = make_bill(MIXTRAL, layout)
    totals = exact_totals(MIXTRAL, layout)
    for key in ("model_states_bytes", "activation_bytes", "total_bytes", "flops_per_iteration"):
        assert totals[key] == bill.totals[key], key


def test_plan_sweeps_ep_and_etp():
    result = plan(MIXTRAL, 16, 80 * 10**9, seq=4096, fixed={"zero": 1, "tp": 8})
    grids = {(int(e), int(et)) for e, et in zip(result.table["ep"], result.table["etp"])}
    assert {(1, 8), (2, 4), (8, 1)} <= grids
    assert all(e * et <= 16 and 16 % (e * et) == 0 for e, et in grids)
    best = result.ranked(1)[0]
    assert best.totals["total_bytes"] == make_bill(MIXTRAL, best.layout).totals["total_bytes"]
    fixed = plan(MIXTRAL, 16, 80 * 10**9, seq=4096, fixed={"ep": 4})
    assert set(fixed.table["ep"]) == {4}


# --- refusals -------------------------------------------------------------------------------

@pytest.mark.parametrize("layout, message", [
    (Layout(dp=3, ep=3), "ep \\(3\\) must divide the routed experts \\(8\\)"),
    (Layout(tp=2, sp=True, dp=2, ep=4, etp=2, seq=4096), "ep×etp \\(4×2\\) must divide tp×dp×cp"),
    (Layout(tp=4, dp=2, etp=2, seq=4096), "without sequence parallelism"),
    (Layout(dp=2, moe_capacity=Fraction(0)), "capacity factor must be positive"),
])
def test_invalid_expert_grids_are_refused(layout, message):
    with pytest.raises(ConfigError, match=message):
        layout.validate(MIXTRAL)


def test_ep_on_a_dense_model_is_refused(capsys):
    assert main(["bill", "gpt-7b", "--ep", "2", "--dp", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no routed experts" in err[0]


def test_capacity_factor_is_read_exactly(capsys):
    assert main(["bill", "mixtral-8x7b", "--moe-capacity-factor", "5/4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["values"]["C_f"] == "5/4"
    assert main(["bill", "mixtral-8x7b", "--moe-capacity-factor", "1e3"]) == 2


@pytest.mark.parametrize("name, size", [("h100", 80 * 10**9), ("H200", 141 * 10**9), ("b200", 180 * 10**9)])
def test_gpu_memory_by_name(capsys, name, size):
    assert main(["bill", "mixtral-8x7b", "--tp", "8", "--sp", "--gpu-memory", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu_memory_bytes"] == size


def test_derive_prints_the_expert_grid(capsys):
    assert main(["derive", "states", "--arch", "moe", "--ep", "--zero", "1"]) == 0
    out = capsys.readouterr().out
    assert "states.experts_per_gpu" in out and "/(e*p*t)" in out
    assert main(["derive", "activations", "--arch", "moe", "--tp", "--sp", "--ep", "--etp"]) == 0
    assert "e_t*k" in capsys.readouterr().out


def test_single_rank_inventory_is_unchanged():
    """No parallelism: the dispatch is the identity, so the traced single-rank inventory holds."""
    inv = moe.saved_tensors(shared_experts=0)
    dispatched = Strategy().shard(inv)
    assert [x.bytes for x in dispatched] == [x.bytes for x in inv]
    assert activations.total_bytes(dispatched) == activations.total_bytes(inv)
    at_one_rank = Layout().strategy().shard(inv)  # t a symbol: its width /t is 1 at t = 1
    values = Layout().values(MIXTRAL)
    assert [exact(x.bytes, values) for x in at_one_rank] == [exact(x.bytes, values) for x in inv]


# --- the experts' activation: fused SwiGLU, Megatron-Core's moe_act recompute -----------------

def _expert_lines(layout):
    bill = make_bill(MIXTRAL, layout)
    return bill, {line.name: line.value for line in bill.ledger("activations")}


def test_fused_swiglu_keeps_only_its_input():
    base = Layout(tp=8, sp=True, seq=4096)
    plain, before = _expert_lines(base)
    fused, after = _expert_lines(Layout(tp=8, sp=True, seq=4096, fused_swiglu=True))
    assert set(before) - set(after) == {"moe/expert/act_output"}
    # SiLU(gate): s·b·k rows of f_e/t, 2 B, L layers
    assert plain.totals["activation_bytes"] - fused.totals["activation_bytes"] == 32 * 4096 * 2 * 14336 // 8 * 2
    assert after["moe/expert/gate_up_output"] == before["moe/expert/gate_up_output"]


def test_moe_act_recompute_frees_the_activation_and_costs_no_matmul():
    plain, before = _expert_lines(Layout(tp=8, sp=True, seq=4096, recompute="selective"))
    moe_act, after = _expert_lines(Layout(tp=8, sp=True, seq=4096, recompute="selective",
                                          recompute_modules=("moe_act",)))
    assert set(before) - set(after) == {"moe/expert/act_output", "moe/expert/down_input"}
    assert moe_act.totals["flops_per_iteration"] == plain.totals["flops_per_iteration"]
    layout = Layout(tp=8, sp=True, seq=4096, recompute="selective", recompute_modules=("core_attn", "moe_act"),
                    fused_swiglu=True, dp=2, ep=2, etp=4)
    assert exact_totals(MIXTRAL, layout)["total_bytes"] == make_bill(MIXTRAL, layout).totals["total_bytes"]


def test_gpt_selective_without_core_attn_recomputes_nothing():
    gpt = preset("gpt-7b")
    modules_only, selective = (make_bill(gpt, Layout(tp=8, sp=True, recompute="selective", recompute_modules=m))
                               for m in (("core_attn",), ()))
    assert modules_only.totals == selective.totals


@pytest.mark.parametrize("argv, message", [
    (["--recompute-modules", "moe_act"], "add --recompute selective"),
    (["--recompute", "selective", "--recompute-modules", "mlp"], "'mlp' is not modelled"),
])
def test_recompute_modules_refused_with_one_line(capsys, argv, message):
    assert main(["bill", "mixtral-8x7b", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_hand_filled_count_below_the_experts_is_refused(capsys):
    assert main(["bill", "mixtral-8x7b", "--params", "40B"]) == 2
    assert "below the routed experts" in capsys.readouterr().err
    assert main(["bill", "mixtral-8x7b", "--params", "47B", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["params_routed_experts"] == 32 * 8 * 3 * 4096 * 14336


# --- the timeline on the expert grid -----------------------------------------------------------

@pytest.mark.parametrize("layout", [
    Layout(seq=4096, tp=2, sp=True, dp=4, ep=4, etp=1, zero=1),
    Layout(seq=4096, tp=8, sp=True, dp=2, ep=2, zero=1, recompute="selective", recompute_modules=("moe_act",),
           fused_swiglu=True),
    Layout(seq=4096, tp=4, sp=True, dp=2, pp=2, ep=8, etp=1, moe_capacity=Fraction(5, 4)),
])
def test_timeline_on_the_expert_grid_agrees_with_the_bill(layout):
    from symbolic.step import timeline as T

    built = T.build(MIXTRAL, layout)
    result = built.evaluate()
    rows = dict(result.rows)
    bill = make_bill(MIXTRAL, layout)
    at_loss = rows["loss" if layout.pp == 1 else "bwd layer 16 (mlp)"]
    assert at_loss["constant"] == bill.totals["model_states_bytes"]
    if layout.pp == 1:
        # the loss phase holds the output side too (its fp32 log-softmax, the final norm and logits inputs)
        assert at_loss["activations"] == bill.totals["activation_bytes"] + bill.totals["output_side_bytes"]
    groups = [name for name, _ in T.CommSettings().items(layout)]
    assert "communication/nccl staging (expert-parallel all-to-all)" in groups


def test_expert_gradients_in_the_backward_window_are_split_as_their_activations():
    """seed 004 §05.3/§07: dH, the gradient of the experts' [C_local, 2f_e] fc1 output, beside it in backward."""
    from symbolic.step import timeline as T

    layout = Layout(seq=4096, tp=8, sp=True)
    rows = dict(T.build(MIXTRAL, layout).evaluate().rows)
    mlp = rows["bwd layer 32 (mlp)"]["transients"]
    s, b, h, k, f_e, t = 4096, 1, 4096, 2, 14336, 8
    expert_grads = 2 * s * b * k * (2 * f_e + f_e + f_e) // t        # d(gate|up), d(SiLU), d(down input): /t
    hidden = 2 * 2 * s * b * h // t                                    # dY, dX under SP
    routing_weight = 4 * s * b * k                                     # d(routing weight), fp32, s·b·k rows
    assert mlp == hidden + expert_grads + routing_weight


@pytest.mark.parametrize("ep, buffers", [(1, 1), (2, 2)])
def test_dispatch_buffers_in_the_forward_window(ep, buffers):
    """The permuted tokens [s·b·k, h] (/t under SP), and with EP the all-to-all's output as large."""
    from symbolic.step import timeline as T

    def forward_transients(layout):
        return dict(T.build(MIXTRAL, layout).evaluate().rows)["fwd layer 32"]["transients"]
    layout = Layout(seq=4096, tp=4, sp=True, dp=2, ep=ep)
    assert forward_transients(layout) == buffers * 2 * 4096 * 2 * 4096 // 4


def test_plan_refuses_ep_on_a_dense_model():
    with pytest.raises(ConfigError, match="has none"):
        plan(preset("gpt-7b"), 8, 80 * 10**9, fixed={"ep": 2})


def test_params_per_gpu_under_tp_keeps_norms_and_router_whole():
    """Mixtral at t = 2, e = 4, e_t = 1: attention, embedding and output layer /2 (column/row/vocab-parallel);
    norms and the router whole; each GPU holds two whole experts per layer."""
    L, h, a, g, f_e, E, V = 32, 4096, 32, 8, 14336, 8, 32000
    bill = make_bill(MIXTRAL, Layout(tp=2, sp=True, dp=4, ep=4, etp=1, seq=4096))
    attention = L * (2 * h * h + 2 * h * (g * h // a))
    whole = L * (2 * h + h * E) + h                      # two RMSNorms and the router per layer, the final norm
    assert bill.totals["params_per_gpu"] == (attention + 2 * V * h) // 2 + whole + L * (E // 4) * 3 * h * f_e
    piped = make_bill(MIXTRAL, Layout(tp=2, sp=True, dp=4, pp=2, ep=4, etp=1, seq=4096))
    # first of two stages: half the layers and the embedding, no output layer nor final norm
    assert piped.totals["params_per_gpu"] == ((attention // 2 + V * h) // 2 + L // 2 * (2 * h + h * E)
                                              + L // 2 * (E // 4) * 3 * h * f_e)
