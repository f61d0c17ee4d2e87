"""symbolic.trace against real modules: the GPT inventory (Korthikanti §4.1) is what PyTorch saves.

Every comparison is exact: declared saved bytes == traced bytes, declared
FLOPs == FlopCounterMode's count, forward and backward, at several dimension
sets. CPU, bf16, torch 2.13.0, conventions ``cpu`` (see
``symbolic.models.architectures.conventions``).
"""
import pytest
from sympy import expand

from _tracing import at, declared, require, traced
from symbolic.models.architectures import conventions, gpt
from symbolic.core.dims import a, b, h, s
from symbolic.ledgers import activations

torch = require("torch")
nn = torch.nn
F = torch.nn.functional

from symbolic import trace as tr  # noqa: E402  (needs torch)


class MegatronLayer(nn.Module):
    """A GPT layer written as Megatron-LM writes it, (s, b, h) layout, following
    Korthikanti §4.1: pre-LayerNorm, fused QKV linear whose output Q, K and V are
    views of, baddbmm for Q·Kᵀ, softmax, dropout on the probabilities, bmm
    with V, output projection, dropout; LayerNorm, h->f linear, GeLU, f->h
    linear, dropout. The causal mask is a buffer (not an activation)."""

    def __init__(self, hidden, heads, ffn, dropout=0.1, max_seq=16):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.p = dropout
        self.register_buffer("causal", torch.ones(max_seq, max_seq, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x):
        s, b, h = x.shape
        n, d = self.heads, self.head_dim
        qkv = self.qkv(self.ln1(x)).view(s, b * n, 3 * d)
        q, k, v = qkv.split(d, dim=-1)  # views of one storage: Q, K, V, 2sbh each
        scores = torch.baddbmm(torch.empty(b * n, s, s, dtype=x.dtype), q.transpose(0, 1),
                               k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=d ** -0.5)
        scores = scores.view(b, n, s, s).masked_fill(self.causal[:s, :s], float("-inf"))
        probs = F.dropout(F.softmax(scores, dim=-1), self.p, self.training)
        context = torch.bmm(probs.view(b * n, s, s), v.transpose(0, 1))
        context = context.view(b, n, s, d).permute(2, 0, 1, 3).reshape(s, b, h)
        x = x + F.dropout(self.proj(context), self.p, self.training)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x + F.dropout(y, self.p, self.training)


# (s, b, h, a, f): distinct small values; f = 4h and f != 4h both appear.
MEGATRON_DIMS = [(6, 2, 32, 4, 128), (5, 3, 48, 6, 96), (7, 2, 24, 2, 72)]


@pytest.mark.parametrize("S,B,H,A,FF", MEGATRON_DIMS)
def test_megatron_layer_saves_and_counts_what_the_gpt_inventory_declares(S, B, H, A, FF):
    from symbolic.core.dims import f
    torch.manual_seed(0)
    layer = MegatronLayer(H, A, FF).to(torch.bfloat16)
    x = torch.randn(S, B, H, dtype=torch.bfloat16, requires_grad=True)
    got = tr.trace_module(layer, (x,))
    inventory = conventions.with_conventions(gpt.saved_tensors(ffn=f), "cpu")
    assert traced(got) == declared(inventory, gpt.matmuls(ffn=f), s=S, b=B, h=H, a=A, f=FF)


GPT2_DIMS = [(6, 2, 32, 4), (5, 3, 48, 6), (4, 2, 40, 5)]


@pytest.mark.parametrize("S,B,H,A", GPT2_DIMS)
def test_hf_gpt2_block_eager_dropout_training_matches_the_gpt_inventory(S, B, H, A):
    """HF GPT2Block, eager attention, dropout 0.1 everywhere, training mode.
    Activation ``gelu_pytorch_tanh`` (one kernel saving its input, as the
    paper's GeLU); the default ``gelu_new`` is a Python formula that keeps
    its intermediates — see the next test."""
    require("transformers")
    cfg = tr.hf_config({"model_type": "gpt2", "n_embd": H, "n_head": A,
                        "activation_function": "gelu_pytorch_tanh"}, "eager")
    assert cfg.attn_pdrop == cfg.resid_pdrop == 0.1
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=S, b=B)
    got = tr.trace_module(layer, args, kwargs)
    saved, mms, extra = tr.hf_declared(cfg)
    assert traced(got) == declared(saved, mms, extra, s=S, b=B, h=H, a=A)


def test_gelu_new_keeps_more_than_the_paper_counts():
    require("transformers")
    cfg = tr.hf_config({"model_type": "gpt2", "n_embd": 32, "n_head": 4}, "eager")
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=6, b=2)
    got = tr.trace_module(layer, args, kwargs)
    saved, mms, _ = tr.hf_declared(cfg)
    extra = got.saved_bytes - at(activations.total_bytes(saved), s=6, b=2, h=32, a=4)
    # gelu_new = 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))) keeps x (the paper's GeLU input),
    # and three more (s, b, 4h) bf16 tensors: tanh's output, 0.5·x and 1 + tanh(...)
    assert extra == 3 * 2 * 6 * 2 * 4 * 32
    assert sorted(r.op for r in got.saved if r.module == "mlp.act") == ["mul", "mul", "pow", "tanh"]


def test_paper_form_is_the_cuda_inventory_without_the_backend_terms():
    cuda = conventions.with_conventions(gpt.saved_tensors(), "cuda")
    cpu = conventions.with_conventions(gpt.saved_tensors(), "cpu")
    paper = conventions.paper_form(cuda)
    assert paper.names() == gpt.saved_tensors().names()
    coeff = lambda inv: dict(expand(activations.total_bytes(inv)).as_coefficients_dict())  # noqa: E731
    assert coeff(paper) == {s * b * h: 34, a * s**2 * b: 5}
    # CUDA adds LayerNorm's fp32 mean and rstd: 2 norms × 2 × 4 B per row
    assert coeff(cuda) == {s * b * h: 34, a * s**2 * b: 5, s * b: 16}
    # CPU: dropout keeps a bf16 noise tensor (2 B, not 1) and bf16 statistics
    assert coeff(cpu) == {s * b * h: 36, a * s**2 * b: 6, s * b: 8}
    assert [t.name for t in cuda if t.source == conventions.BACKEND] == [
        "attention/layernorm_mean", "attention/layernorm_rstd", "mlp/layernorm_mean", "mlp/layernorm_rstd"]


def test_unknown_conventions_are_refused():
    with pytest.raises(ValueError, match="known: cuda, cpu"):
        conventions.conventions("tpu")


def test_saved_storages_are_deduplicated_and_parameters_excluded():
    layer = MegatronLayer(32, 4, 128).to(torch.bfloat16)
    x = torch.randn(6, 2, 32, dtype=torch.bfloat16, requires_grad=True)
    got = tr.trace_module(layer, (x,))
    qkv = [r for r in got.saved if r.module == "MegatronLayer" and r.op == "baddbmm"]
    assert len(qkv) == 1 and qkv[0].bytes == 3 * 2 * 6 * 2 * 32  # Q, K, V: one storage, counted once
    weights = {tuple(p.shape) for p in layer.parameters()}
    assert not any(r.shape in weights and r.op == "linear" for r in got.saved)
    assert {r.op for r in got.saved} == {"layer_norm", "linear", "baddbmm", "softmax", "dropout", "bmm", "gelu"}


class Cube(nn.Module):
    """Keeps a (b, s, s, h) tensor: outside an s·b·h basis."""

    def forward(self, x):
        b, s, h = x.shape
        pair = x.view(b, s, 1, h) * x.view(b, 1, s, h)
        return pair * x.view(b, s, 1, h)


def test_fit_reports_what_the_basis_cannot_express():
    def factory(s, b, h):
        return Cube(), (torch.randn(b, s, h, requires_grad=True),)
    basis = [s * b * h]
    points = tr.design_points(basis, {s: [2, 3, 5], b: [1, 2], h: [4, 6]}, check=3)
    fitted = tr.fit(factory, points, basis)
    assert fitted.saved == {"Cube/mul#0": 4 * s * b * h}
    assert [u.key for u in fitted.unfitted] == ["Cube/mul#1"]
    assert fitted.saved_total is None


def test_fit_recovers_the_gpt_inventory_exactly():
    """Fitted from runs at distinct (s, b, h, a): zero residual, the declared
    CPU-convention inventory term by term."""
    def factory(s, b, h, a):
        torch.manual_seed(0)
        return MegatronLayer(h, a, 4 * h).to(torch.bfloat16), (
            torch.randn(s, b, h, dtype=torch.bfloat16, requires_grad=True),)
    inventory = conventions.with_conventions(gpt.saved_tensors(), "cpu")
    want = activations.total_bytes(inventory)
    layer_mm = gpt.matmuls().select("layer")
    fwd = sum(mm.forward_flops for mm in layer_mm)
    basis = tr.basis_of(want, fwd)
    points = tr.design_points(basis, {s: [3, 4, 5], b: [1, 2, 3], h: [16, 24, 48], a: [2, 4, 8]},
                              lambda pt: pt[h] % pt[a] == 0)
    fitted = tr.fit(factory, points, basis)
    assert fitted.unfitted == []
    assert tr.compare(fitted.saved_total, want) == {}
    assert tr.compare(fitted.forward_flops, fwd) == {}
    assert tr.compare(fitted.backward_flops, 2 * fwd) == {}
    assert tr.compare(fitted.saved_total, want + s * b) == {s * b: (8, 9)}


def test_cpu_flash_attention_is_missing_from_the_flop_registry():
    """torch 2.13.0's FlopCounterMode counts 0 FLOPs for CPU SDPA
    (https://github.com/pytorch/pytorch/issues/195460, fixed upstream by
    pull 195801). The trace tests add the missing formulas through
    ``custom_mapping`` (``symbolic.trace.cpu_sdpa_flops``) rather than weaken
    the comparison; when this test fails, the pin moved past the fix."""
    from torch.utils.flop_counter import FlopCounterMode, flop_registry
    assert torch.ops.aten._scaled_dot_product_flash_attention_for_cpu not in flop_registry
    q = torch.randn(1, 2, 8, 4)
    with FlopCounterMode(display=False) as plain:
        F.scaled_dot_product_attention(q, q, q)
    with FlopCounterMode(display=False, custom_mapping=tr.cpu_sdpa_flops()) as fixed:
        F.scaled_dot_product_attention(q, q, q)
    assert plain.get_total_flops() == 0
    assert fixed.get_total_flops() == 2 * (2 * 1 * 2 * 8 * 8 * 4)  # Q·Kᵀ and P·V


# --- the command ---------------------------------------------------------------------

def test_trace_command_fits_an_hf_config_and_finds_no_difference(tmp_path, capsys):
    require("transformers")
    import json

    from symbolic.cli import main
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "num_attention_heads": 4,
                                "num_key_value_heads": 2, "intermediate_size": 40, "vocab_size": 100,
                                "num_hidden_layers": 2, "architectures": ["LlamaForCausalLM"]}))
    assert main(["trace", "--hf", str(path), "--seqs", "3,4,5,6", "--batches", "2,3", "--degree", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("fitted == declared, term by term") == 3
    assert "saved bytes, declared: 1048*b*s" in out  # 20·32 + 8·40 + 4·2·32/4 + 4·4 + 8: h=32, f=40, g=2, a=4


def test_trace_command_factory_reports_its_fit(tmp_path, capsys, monkeypatch):
    from symbolic.cli import main
    (tmp_path / "my_layers.py").write_text(
        "import torch\n"
        "def make(s, b):\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU()), (torch.randn(b, s, 8),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["trace", "--factory", "my_layers:make", "--dims", "s=2,3,4,5", "--dims", "b=1,2,3",
                 "--degree", "2"]) == 0
    out = capsys.readouterr().out
    # Linear's input needs no gradient (a leaf without requires_grad): only GELU's input is kept
    assert "saved bytes, fitted:     64*b*s B" in out
    assert "forward FLOPs, fitted:   256*b*s" in out


@pytest.mark.parametrize("argv,message", [
    (["trace", "--hf", "/nonexistent/config.json"], "no such file"),
    (["trace", "--factory", "nomodule"], "MODULE:FUNCTION"),
    (["trace", "--factory", "json:dumps"], "needs --dims"),
    (["trace", "--factory", "json:dumps", "--dims", "zz=1,2"], "NAME one of"),
])
def test_trace_command_bad_input_is_one_line(argv, message, capsys):
    from symbolic.cli import main
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_tensors_saved_on_a_dead_branch_are_not_counted():
    """A branch that never reaches the output (a router's choice of experts) is freed by autograd
    as soon as the forward returns: what it saved is not kept, and is not counted."""
    torch = require("torch")
    from symbolic.trace import trace_module

    class Router(torch.nn.Module):
        def forward(self, x):
            scores = x.sigmoid()                   # kept: sigmoid's output (on the path)
            dead = (x * 3.0).exp()                 # exp keeps its output: a dead branch
            choice = dead.topk(2, dim=-1).indices  # topk keeps its indices: dead too
            return scores.gather(-1, choice)       # gather keeps the index (on the path)

    x = torch.randn(4, 8, requires_grad=True)
    trace = trace_module(Router(), (x,))
    kept = sorted((r.op, r.dtype, r.bytes) for r in trace.saved)
    assert kept == [("gather", "int64", 4 * 2 * 8), ("sigmoid", "float32", 4 * 8 * 4)]
