"""LoRA's FLOPs (issue 15's left-over): a frozen weight's backward computes the input gradient only, the
adapters' matmuls train in full (Hu et al. 2021 §4.1)."""
from symbolic.bill.derive import make_bill
from symbolic.layout.layout import Layout
from symbolic.models.builtin import preset

LLAMA = preset("llama-2-7b")
TOKENS = 4096  # b = 1, s = 4096, one micro-batch
MATRICES = 32 * (4 * 4096**2 + 3 * 4096 * 11008)   # the layers' weights: q, k, v, o and gate, up, down
OUTPUT = 32000 * 4096                              # the untied output layer
ADAPTERS_R16 = 32 * 16 * (4 * 2 * 4096 + 3 * (4096 + 11008))


def test_frozen_weights_skip_their_weight_gradients_and_the_adapters_train():
    full = make_bill(LLAMA, Layout(seq=4096))
    lora = make_bill(LLAMA, Layout(seq=4096, lora=16))
    # each frozen weight matmul loses its weight gradient (2 FLOPs per weight per token); each adapter
    # weight adds forward, input and weight gradients (6 FLOPs per weight per token)
    saved = 2 * TOKENS * (MATRICES + OUTPUT) - 6 * TOKENS * ADAPTERS_R16
    assert full.totals["flops_per_iteration"] - lora.totals["flops_per_iteration"] == saved
    assert full.totals["model_flops_per_iteration"] - lora.totals["model_flops_per_iteration"] == saved
    adapters = {line.name: line.value for line in lora.ledger("flops") if line.name.startswith("lora/")}
    assert sum(adapters.values()) == 6 * TOKENS * ADAPTERS_R16 and len(adapters) == 7
    # the step time prices the same GEMMs (tests/test_lora_step.py), and says so
    assert any("the step time too, its optimizer step and data-parallel reduce over the adapters only" in note
               for note in lora.notes)


def test_full_recompute_repeats_the_adapters_forward_too():
    plain = make_bill(LLAMA, Layout(seq=4096, lora=16))
    redone = make_bill(LLAMA, Layout(seq=4096, lora=16, recompute="full"))
    layers_forward = 2 * TOKENS * MATRICES + 4 * 32 * TOKENS**2 * 4096  # weights + Q·Kᵀ and scores·V
    adapters_forward = 2 * TOKENS * ADAPTERS_R16
    fused = sum(line.value for line in plain.ledger("flops") if "fused kernel" in line.name)
    fused_redone = sum(line.value for line in redone.ledger("flops") if "fused kernel" in line.name)
    assert redone.totals["flops_per_iteration"] - plain.totals["flops_per_iteration"] == \
        layers_forward + adapters_forward + fused_redone - fused
