"""LoRA, a quantised base and offload on Megatron-Core's expert grid (--ep/--etp): the levers' model-state
terms compose with the routed experts' sharding (issue 15, left-overs of the closing note)."""
from fractions import Fraction

from sympy import Add, expand

from symbolic.bill.derive import inventories, make_bill
from symbolic.cli import main
from symbolic.core.dims import E, L, e, f_e, h, p, t
from symbolic.layout.layout import Layout
from symbolic.ledgers import states
from symbolic.models.builtin import preset

MIXTRAL = preset("mixtral-8x7b")
PARAMS, _, _ = inventories(MIXTRAL)
# the layout: 16 GPUs, t = 2, d = 8, experts over e = 8 (edp = t·d/(e·e_t) = 2 with e_t = t)
GRID = dict(seq=4096, tp=2, dp=8, ep=8, recompute="full")


def lines(bill, ledger):
    return {line.name: Fraction(line.value) for line in bill.ledger(ledger)}


def test_without_a_lever_the_grid_terms_are_expert_blocks():
    """state_terms on the expert grid, full training, equals states.expert_blocks block by block."""
    for zero in (0, 1, 3):
        recipe = states.RECIPES["bf16-adam"]
        terms, trainable = states.state_terms(recipe, zero, PARAMS, expert_parallel=e, expert_tensor_parallel=t)
        experts = Add(*(L * x.count for x in PARAMS if x.name.startswith("layer/moe/experts_")))
        expected = states.expert_blocks(recipe, zero, experts, expert_parallel=e, expert_tensor_parallel=t)
        assert {x.name: expand(x.bytes) for x in terms} == {k: expand(v) for k, v in expected.items()}
        assert trainable == states.Psi


def test_offload_with_ep_moves_each_parts_states_to_the_cpu():
    """ZeRO-Offload with --ep: the GPU keeps the parameters of both parts, the CPU the gradients and optimizer
    states of both, and together they are the model states of the same layout without offload."""
    plain = make_bill(MIXTRAL, Layout(**GRID, zero=1))
    offloaded = make_bill(MIXTRAL, Layout(**GRID, zero=1, offload="optimizer"))
    gpu, cpu = lines(offloaded, "model_states"), lines(offloaded, "cpu_memory")
    assert set(gpu) == {"bf16 parameters (dense part)", "bf16 parameters (routed experts)"}
    assert sum(gpu.values()) + sum(cpu.values()) == sum(lines(plain, "model_states").values())
    # the routed experts' optimizer states: 12 B per expert parameter over e·e_t·p·edp = t·d·p (ZeRO-1)
    experts = offloaded.totals["params_routed_experts"]
    assert sum(v for k, v in cpu.items() if k.endswith("(routed experts)") and "gradients" not in k) == \
        Fraction(12 * experts, 2 * 8)
    assert offloaded.totals["cpu_bytes"] == sum(cpu.values())


def test_lora_with_ep_freezes_the_experts_on_the_expert_grid():
    """LoRA with --ep: the experts' banks are frozen (bf16, no gradients or states) and split over e·e_t·p;
    the adapters sit on the linear modules of the dense part, so they are the same with and without --ep."""
    with_ep = make_bill(MIXTRAL, Layout(**GRID, lora=16))
    without = make_bill(MIXTRAL, Layout(**dict(GRID, ep=1), lora=16))
    grid, dense = lines(with_ep, "model_states"), lines(without, "model_states")
    experts = with_ep.totals["params_routed_experts"]
    assert grid["frozen base weights (bf16) (routed experts)"] == Fraction(2 * experts, 8 * 2)  # e·e_t, p = 1
    assert dense["frozen base weights (bf16)"] == grid["frozen base weights (bf16) (dense part)"] + Fraction(
        2 * experts, 2)
    adapters = {k: v for k, v in grid.items() if k.startswith("LoRA adapters")}
    assert adapters and adapters == {k: v for k, v in dense.items() if k.startswith("LoRA adapters")}
    assert not any(("gradients" in k or "Adam" in k) and "experts" in k for k in grid)


def test_the_adapters_skip_the_expert_banks_and_the_router():
    """PEFT's all-linear adapts nn.Linear modules; transformers 5.24.0's fused experts and router are
    nn.Parameters: no adapter on them (LoRA's r(d_in + d_out) has no E or f_e)."""
    adapted = states.weight_matrices(PARAMS, "all-linear")
    assert [x.name for x in adapted] == ["layer/attention/query_weight", "layer/attention/key_weight",
                                         "layer/attention/value_weight", "layer/attention/output_weight"]
    terms, trainable = states.state_terms(states.RECIPES["bf16-adam"], 0, PARAMS, lora=True)
    assert not trainable.free_symbols & {E, f_e}


def test_a_quantised_base_leaves_the_expert_banks_in_bf16():
    """bitsandbytes quantises nn.Linear modules only (transformers 5.24.0): with --base-dtype nf4 the
    attention weights are NF4, the experts and the router stay bf16 — on the expert grid with --ep."""
    bill = make_bill(MIXTRAL, Layout(**GRID, lora=16, base_dtype="nf4"))
    state = lines(bill, "model_states")
    experts = bill.totals["params_routed_experts"]
    assert state["frozen expert banks and router (bf16, not quantised) (routed experts)"] == Fraction(2 * experts, 16)
    attention = 32 * (2 * 4096**2 + 2 * 4096 * 1024)  # q, o: h², k, v: h·g·h/a with g = 8 KV heads of 128
    assert state["frozen base weights (NF4, 4 bit) (dense part)"] == Fraction(attention, 2 * 2)  # ½ B over t = 2
    terms, _ = states.state_terms(states.RECIPES["bf16-adam"], 0, PARAMS, lora=True, base_dtype="nf4")
    kept = {x.name: x.bytes for x in terms}["frozen expert banks and router (bf16, not quantised)"]
    assert expand(kept - 2 * L * (3 * E * f_e * h + E * h) / (p * t)) == 0


def test_the_levers_with_ep_run_from_the_command_line(capsys):
    for extra in (["--lora", "16"], ["--lora", "16", "--base-dtype", "nf4"], ["--offload", "optimizer"]):
        assert main(["bill", "mixtral-8x7b", "--seq", "4096", "--tp", "2", "--dp", "8", "--ep", "8", "--zero", "1",
                     "--recompute", "full", *extra]) == 0
        assert "(routed experts)" in capsys.readouterr().out
