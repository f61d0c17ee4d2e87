"""The LLaMA inventory: its coefficients, its parameter counts, and HF's LlamaDecoderLayer."""
import pytest
from sympy import Add, expand

from _tracing import at, declared, require, traced
from symbolic.models.architectures import ARCHITECTURES, llama, output
from symbolic.core.dims import V, a, b, f, g, h, s, t
from symbolic.ledgers import activations, params
from symbolic.claims.quantities import evaluate


def coefficients(expr):
    return dict(expand(expr).as_coefficients_dict())


def test_llama_is_registered_and_callable_without_arguments():
    assert ARCHITECTURES["llama"] is llama
    assert evaluate("activations.per_layer", arch="llama") == activations.total_bytes(llama.saved_tensors())


def test_fused_attention_coefficients_come_from_the_inventory():
    """Per layer, FlashAttention/SDPA, HF RMSNorm, SwiGLU, GQA: not 34 and 5."""
    assert coefficients(activations.total_bytes(llama.saved_tensors())) == {
        s * b * h: 20,        # norms: 2·(4 fp32 copy + 2 normalised); Q/K/V/O input 2; Q 2; output 2; MLP input 2
        s * b * f: 8,         # gate out, SiLU out, up out, down in: 4 × 2 B
        s * b * g * h / a: 4,  # K and V at g heads, 2 B each
        a * s * b: 4,         # fp32 log-sum-exp per row and head
        s * b: 8,             # two fp32 rstd per row
    }


def test_explicit_attention_keeps_the_score_matrices_and_repeats_kv():
    assert coefficients(activations.total_bytes(llama.saved_tensors(attention="explicit"))) == {
        s * b * h: 24,         # K and V repeated to a heads (repeat_kv): 2 + 2 more sbh, no g term
        s * b * f: 8,
        a * s**2 * b: 6,       # softmax in fp32 (4) + probabilities in bf16 (2)
        s * b: 8,
    }


def test_gqa_shrinks_only_kv_storage_and_only_with_the_fused_kernel():
    """Seed 001 §07: GQA makes the K/V storage smaller, not the score term."""
    mha = activations.total_bytes(llama.saved_tensors(kv_heads=a))
    gqa = activations.total_bytes(llama.saved_tensors())
    assert expand(mha - gqa) == expand(4 * s * b * h - 4 * s * b * g * h / a)
    explicit = lambda kv: activations.total_bytes(llama.saved_tensors(kv_heads=kv, attention="explicit"))  # noqa
    assert expand(explicit(a) - explicit(g)) == 0


def test_fused_rmsnorm_keeps_its_input_and_an_fp32_rstd():
    eager = activations.total_bytes(llama.saved_tensors())
    fused = activations.total_bytes(llama.saved_tensors(norm="fused"))
    assert expand(eager - fused) == 2 * (6 - 2) * s * b * h
    with pytest.raises(ValueError, match="norm must be one of eager, fused"):
        llama.saved_tensors(norm="apex")


def test_tensor_and_sequence_parallel_divide_every_term_by_t():
    per_gpu = evaluate("activations.per_layer", arch="llama", tensor_parallel=True, sequence_parallel=True)
    assert expand(per_gpu * t - activations.total_bytes(llama.saved_tensors())) == 0


def test_parameter_counts_of_published_llamas():
    """Llama-2-7B (6,738,415,616) and Llama-3-8B (8,030,261,248) parameters, as HF counts them."""
    n = params.count(llama.parameters())
    assert at(n, L=32, h=4096, a=32, g=32, f=11008, V=32000) == 6_738_415_616
    assert at(n, L=32, h=4096, a=32, g=8, f=14336, V=128256) == 8_030_261_248
    tied = params.count(llama.parameters(tied=True))
    assert expand(n - tied) == V * h
    with pytest.raises(ValueError, match="rotary"):
        llama.parameters(positions="learned")


def test_layer_flops_with_gqa():
    fwd = Add(*(mm.forward_flops for mm in llama.matmuls().select("layer")))
    assert coefficients(fwd) == {b * s * h**2: 4, b * s * g * h**2 / a: 4, b * s * h * f: 6, b * s**2 * h: 4}
    # FlashAttention's backward recomputes Q·Kᵀ: 2bs²h more
    assert llama.fused_backward_recompute(llama.matmuls()) == 2 * b * s**2 * h


def test_output_side_is_its_own_line_and_large_for_a_128k_vocabulary():
    out = activations.total_bytes(output.saved_tensors())
    assert coefficients(out) == {s * b * h: 8, s * b * V: 4, s * b: 12, 1: 4}
    # one 8192-token sequence, Llama-3 vocabulary: the fp32 log-softmax alone
    assert at(output.saved_tensors()["output/log_softmax"].bytes, s=8192, b=1, V=128256) == 4_202_692_608


# --- traced: HF transformers LlamaDecoderLayer, CPU, bf16 ---------------------------

# (s, b, h, a, g, f): GQA (g < a), MQA (g = 1) and MHA (g = a); never b = g = 1, see below.
LLAMA_DIMS = [(6, 2, 32, 4, 2, 48), (5, 3, 48, 6, 3, 40), (7, 2, 24, 4, 1, 20), (4, 2, 32, 2, 2, 24)]


def _llama(attention, S, B, H, A, G, FF):
    require("transformers")
    from symbolic import trace as tr
    cfg = tr.hf_config({"model_type": "llama", "hidden_size": H, "num_attention_heads": A,
                        "num_key_value_heads": G, "intermediate_size": FF}, attention)
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=S, b=B)
    return tr, cfg, tr.trace_module(layer, args, kwargs, custom_flops=tr.cpu_sdpa_flops())


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("S,B,H,A,G,FF", LLAMA_DIMS)
def test_llama_decoder_layer_matches_the_declared_inventory(attention, S, B, H, A, G, FF):
    require("torch")
    tr, cfg, got = _llama(attention, S, B, H, A, G, FF)
    saved, mms, extra = tr.hf_declared(cfg)
    assert traced(got) == declared(saved, mms, extra, s=S, b=B, h=H, a=A, g=G, f=FF)
    assert sum(r.bytes for r in got.shared) == 2 * 2 * (S * B * H // A)  # RoPE cos/sin: per model, not per layer


def test_sdpa_flops_are_missing_without_the_cpu_formulas():
    """pytorch/pytorch#195460: without ``cpu_sdpa_flops`` FlopCounterMode misses
    exactly the attention core — Q·Kᵀ and P·V forward, and the kernel's backward."""
    torch = require("torch")
    require("transformers")
    from symbolic import trace as tr
    cfg = tr.hf_config({"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
                        "num_key_value_heads": 2, "intermediate_size": 48}, "sdpa")
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=6, b=2)
    got = tr.trace_module(layer, args, kwargs)
    core = [mm for mm in llama.matmuls() if mm.name in ("layer/attention/scores", "layer/attention/context")]
    _, fwd, bwd = declared(llama.saved_tensors(), llama.matmuls(), llama.fused_backward_recompute(llama.matmuls()),
                           s=6, b=2, h=32, a=4, g=2, f=48)
    core_fwd = at(Add(*(mm.forward_flops for mm in core)), s=6, b=2, h=32, a=4)
    assert got.forward_total == fwd - core_fwd
    assert got.backward_total == bwd - at(2 * Add(*(mm.forward_flops for mm in core)) + 2 * b * s**2 * h,
                                          s=6, b=2, h=32, a=4)
    assert torch.__version__.startswith("2.13.0")


def test_mqa_with_one_sequence_repeats_kv_as_a_view():
    """b = 1 and g = 1: ``repeat_kv``'s expand-then-reshape is a view, so the
    eager layer keeps K and V at one head, not a — the only shape where the
    declared explicit inventory (K, V repeated) is not what is saved."""
    require("torch")
    tr, cfg, got = _llama("eager", 7, 1, 24, 4, 1, 20)
    saved, mms, extra = tr.hf_declared(cfg)
    want = declared(saved, mms, extra, s=7, b=1, h=24, a=4, g=1, f=20)[0]
    assert want - got.saved_bytes == 2 * 2 * 7 * 1 * (4 - 1) * 6


def test_fit_recovers_the_llama_inventory_term_by_term():
    """Fit the sdpa layer from runs at distinct (s, b, h, a, g, f): zero residual."""
    require("torch")
    require("transformers")
    from symbolic import trace as tr
    problem = tr.llama_layer_fit_problem()
    assert problem.saved == activations.total_bytes(llama.saved_tensors())
    fitted = tr.fit(problem.factory, problem.points, problem.basis, custom_flops=tr.cpu_sdpa_flops())
    assert fitted.unfitted == []
    assert tr.compare(fitted.saved_total, problem.saved) == {}
    assert tr.compare(fitted.forward_flops, problem.forward) == {}
    assert tr.compare(fitted.backward_flops, problem.backward) == {}
    assert fitted.saved["self_attn/scaled_dot_product_attention#3"] == 4 * b * a * s  # the fp32 log-sum-exp


# --- traced: the output side ---------------------------------------------------------

def test_final_norm_logits_and_loss_match_the_output_inventory():
    torch = require("torch")
    require("transformers")
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from symbolic import trace as tr

    class Head(torch.nn.Module):
        """HF LlamaForCausalLM's tail: final RMSNorm, lm_head, loss on fp32 logits."""

        def __init__(self, hidden, vocab):
            super().__init__()
            self.norm = LlamaRMSNorm(hidden)
            self.lm_head = torch.nn.Linear(hidden, vocab, bias=False)

        def forward(self, x, targets):
            logits = self.lm_head(self.norm(x)).float()
            return torch.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    for S, B, H, VV in ((6, 2, 32, 100), (5, 3, 24, 77)):
        head = Head(H, VV).to(torch.bfloat16)
        x = torch.randn(B, S, H, dtype=torch.bfloat16, requires_grad=True)
        targets = torch.randint(0, VV, (B, S))
        got = tr.trace_module(head, (x, targets))
        inv = output.saved_tensors()
        want = at(activations.total_bytes(inv), s=S, b=B, h=H, V=VV)
        # the targets are an input without gradient: the trace files them as shared
        assert got.saved_bytes + sum(r.bytes for r in got.shared) == want
        assert [r.bytes for r in got.shared] == [at(inv["output/targets"].bytes, s=S, b=B)]
        assert got.forward_total == at(output.matmuls()["output/logits"].forward_flops, s=S, b=B, h=H, V=VV)


def test_the_bill_itemises_a_llama_model_with_the_llama_inventory():
    from symbolic.bill.derive import make_bill
    from symbolic.layout.layout import Layout
    from symbolic.models.config import ModelConfig
    model = ModelConfig("llama-2-7b-test", 32, 4096, 32, 32000, 4096, ffn=11008, tied=False, positions="rope",
                        arch="llama", mlp="swiglu", norm="rmsnorm")
    bill = make_bill(model, Layout(tp=2, sp=True))
    assert bill.totals["params"] == 6_738_415_616
    per_layer = activations.total_bytes(llama.saved_tensors())
    assert bill.totals["activation_bytes"] == at(32 * per_layer / t, s=4096, b=1, h=4096, a=32, g=32, f=11008, t=2)
    recompute = [line for line in bill.lines if "backward recompute" in line.name]
    assert len(recompute) == 1 and recompute[0].value == 32 * 2 * 4096**2 * 4096
