"""Megatron-Core's MoE terms: the alltoall dispatcher's saved tensors, the layernorm recompute
module and the capacity padding's FLOPs, each against an independent count.

* The dispatcher: a CPU run of Megatron-Core's own unfused code path (NVIDIA/Megatron-LM at
  d98e8a6: ``moe_utils.permute``/``unpermute``/``sort_chunks_by_idxs`` and ``TEGroupedMLP``'s
  ``bias_act_func`` GLU, copied below with the branches this configuration takes), traced by
  ``symbolic.trace`` (saved_tensors_hooks, one record per storage) with a fixed routing, on one
  rank (the all-to-all and the expert-TP gathers are identities there and save nothing).
* The layernorm module: the real HF Mixtral decoder layer with its two norms run as Megatron's
  ``CheckpointWithoutOutput`` runs them (no_grad, input saved, output storage freed once the
  consumers ran), the bytes autograd still holds at the end of forward counted by storage.
* The padding FLOPs: a hand count of Megatron's capacity rule per rank.
"""
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy import Integer

from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.core.dims import SYMBOLS, C_f
from symbolic.layout.layout import Layout
from symbolic.layout.strategies import (HF_DISPATCH_TERMS, expert_activation_recompute, expert_dispatch,
                                        fused_expert_activation, megatron_alltoall_dispatch, norm_recompute)
from symbolic.ledgers import activations
from symbolic.models.architectures import moe
from symbolic.models.builtin import preset
from symbolic.models.config import ModelConfig

from _tracing import require


def _at(expr, **values) -> int:
    value = expr.subs({SYMBOLS[name]: v for name, v in values.items()})
    assert value.is_Integer, (expr, values, value)
    return int(value)


def _megatron_single_rank(pad: bool = False):
    """The routed MLP's single-rank inventory with Megatron's dispatcher (router side: the HF router's);
    with ``pad``, every expert's rows at C_f × the balanced share (``expert_dispatch`` at e = e_t = t = 1)."""
    inventory = megatron_alltoall_dispatch(moe.saved_tensors(shared_experts=0), pad_to_capacity=pad)
    return expert_dispatch(inventory, Integer(1), Integer(1), Integer(1), C_f) if pad else inventory


# --- Megatron-Core's unfused path, as d98e8a6 writes it (one rank: ep = tp = 1) -------------------

def _permute(torch, tokens, routing_map, probs, num_out_tokens, drop_and_pad):
    """``moe_utils.permute`` (fused=False, return_batch_invariant_inverse_map=False)."""
    num_tokens, hidden = tokens.shape
    num_experts = routing_map.shape[1]
    if drop_and_pad:
        capacity = num_out_tokens // num_experts
        routing_map = routing_map.to(dtype=torch.int8).T.contiguous()
        sorted_indices = routing_map.argsort(dim=-1, descending=True, stable=True)[:, :capacity].contiguous()
        sorted_indices = sorted_indices.view(-1)
        probs_T_1D = probs.T.contiguous().view(-1)
        indices_dim0 = torch.arange(num_experts).unsqueeze(-1)
        indices_dim1 = sorted_indices.view(num_experts, capacity)
        indices_1D = (indices_dim0 * num_tokens + indices_dim1).view(-1)
        permuted_probs = probs_T_1D.index_select(0, indices_1D)
    else:
        routing_map = routing_map.bool().T.contiguous()
        flat_sorted = routing_map.reshape(-1).argsort(descending=True, stable=True)
        flat_sorted = flat_sorted[:num_out_tokens]
        sorted_indices = flat_sorted % num_tokens
        permuted_probs = probs.T.contiguous().reshape(-1)[flat_sorted]
    permuted_input = tokens.index_select(0, sorted_indices)
    return permuted_input, permuted_probs, sorted_indices


def _sort_chunks_by_idxs(torch, input, split_sizes, sorted_idxs, probs=None):
    """``moe_utils.sort_chunks_by_idxs`` (fused=False)."""
    input = torch.split(input, split_sizes, dim=0)
    output = torch.cat([input[i] for i in sorted_idxs], dim=0)
    if probs is not None:
        probs = torch.split(probs, split_sizes, dim=0)
        probs = torch.cat([probs[i] for i in sorted_idxs], dim=0)
    return output, probs


def _unpermute(torch, permuted_tokens, sorted_indices, restore_shape):
    """``moe_utils.unpermute`` (fused=False, probs=None: the alltoall dispatcher's combine)."""
    _, hidden = restore_shape
    input_dtype = permuted_tokens.dtype
    output_tokens = torch.zeros(restore_shape, dtype=permuted_tokens.dtype)
    output_tokens.scatter_add_(0, sorted_indices.unsqueeze(1).expand(-1, hidden), permuted_tokens)
    return output_tokens.to(dtype=input_dtype)


def _megatron_moe_module(torch, E, h, f_e, k, capacity_factor=None):
    """One rank's routed MLP: permute, sort by local expert, the grouped experts (fc1, the GLU of
    ``bias_act_func`` with ``glu_linear_offset`` 0.0, the probabilities multiply, fc2), unsort,
    unpermute. The all-to-all and the expert-TP gathers are identities at ep = tp = 1."""
    nn = torch.nn

    class Experts(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Parameter(torch.randn(E, h, 2 * f_e, dtype=torch.bfloat16) * 0.1)
            self.fc2 = nn.Parameter(torch.randn(E, f_e, h, dtype=torch.bfloat16) * 0.1)

        def forward(self, x, tokens_per_expert, probs):
            # TE GroupedLinear: one GEMM per expert over its rows, the rows' storage kept for wgrad
            fc1 = torch.cat([xs @ self.fc1[i] for i, xs in enumerate(torch.split(x, tokens_per_expert))])
            x_glu, x_linear = torch.chunk(fc1, 2, dim=-1)
            inter = torch.nn.functional.silu(x_glu) * (x_linear + 0.0)  # glu_linear_offset = 0.0
            original_dtype = inter.dtype
            inter = (inter * probs.unsqueeze(-1)).to(original_dtype)
            return torch.cat([ys @ self.fc2[i] for i, ys in enumerate(torch.split(inter, tokens_per_expert))])

    class MegatronMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = Experts()

        def forward(self, hidden, probs, routing_map):
            num_tokens = hidden.shape[0]
            if capacity_factor is None:
                num_out, drop_and_pad = num_tokens * k, False
                per_expert = routing_map.sum(dim=0).tolist()
            else:  # preprocess: get_capacity(num_tokens·k, E, C_f)
                capacity = -(-(num_tokens * k * capacity_factor.numerator) // (E * capacity_factor.denominator))
                num_out, drop_and_pad = capacity * E, True
                per_expert = [capacity] * E
            x, p, sorted_indices = _permute(torch, hidden, routing_map, probs, num_out, drop_and_pad)
            # permutation 2 (num_local_experts > 1): dropless sorts chunks, drop-and-pad views
            if not drop_and_pad:
                x, p = _sort_chunks_by_idxs(torch, x, per_expert, list(range(E)), p)
            else:
                x = x.view(1, E, per_expert[0], h).transpose(0, 1).contiguous().flatten(start_dim=0, end_dim=2)
                p = p.view(1, E, per_expert[0]).transpose(0, 1).contiguous().flatten(start_dim=0, end_dim=2)
            out = self.experts(x, per_expert, p)
            if not drop_and_pad:
                out, _ = _sort_chunks_by_idxs(torch, out, per_expert, list(range(E)))
            else:
                out = out.view(E, 1, per_expert[0], h).transpose(0, 1).contiguous().flatten(start_dim=0, end_dim=2)
            return _unpermute(torch, out, sorted_indices, (num_tokens, h))

    return MegatronMoE()


def _fixed_routing(torch, tokens, E, k):
    """Token j goes to experts (j·k + i) mod E, i < k: balanced when E divides tokens·k."""
    routing_map = torch.zeros(tokens, E, dtype=torch.bool)
    for j in range(tokens):
        for i in range(k):
            routing_map[j, (j * k + i) % E] = True
    return routing_map


@pytest.mark.parametrize("S,B,E,K,H,FE,capacity", [
    (8, 2, 4, 2, 32, 24, None),
    (6, 1, 3, 1, 16, 40, None),
    (8, 2, 8, 2, 24, 16, None),
    (8, 2, 4, 2, 32, 24, Fraction(3, 2)),   # drop-and-pad: every expert's rows at capacity C_f·N·k/E
    (12, 1, 4, 1, 16, 8, Fraction(4, 3)),
])
def test_megatron_dispatcher_terms_equal_what_autograd_saves(S, B, E, K, H, FE, capacity):
    torch = require("torch")
    from symbolic import trace as tr

    torch.manual_seed(0)
    N = S * B
    module = _megatron_moe_module(torch, E, H, FE, K, capacity)
    hidden = torch.randn(N, H, dtype=torch.bfloat16, requires_grad=True)
    routing_map = _fixed_routing(torch, N, E, K)
    probs = (torch.rand(N, E, dtype=torch.bfloat16) * routing_map).requires_grad_()  # Megatron: probs.type_as(logits)
    got = tr.trace_module(module, (hidden, probs, routing_map))
    inventory = _megatron_single_rank(pad=capacity is not None)
    terms = [term for term in inventory if term.name.startswith(("moe/dispatch/", "moe/expert/"))]
    values = dict(s=S, b=B, E=E, k=K, h=H, f_e=FE, C_f=capacity or 1)
    declared = sorted(_at(term.bytes, **values) for term in terms)
    # one traced record per storage; the layer's input (hidden) is saved by nothing of the dispatcher
    assert sorted(record.bytes for record in got.saved) == declared
    assert got.saved_bytes == sum(declared)


def test_megatron_dispatcher_replaces_the_hf_loops_own_terms():
    hf, megatron = moe.saved_tensors(shared_experts=0), _megatron_single_rank()
    assert set(HF_DISPATCH_TERMS) <= set(hf.names()) and not set(HF_DISPATCH_TERMS) & set(megatron.names())
    added = set(megatron.names()) - set(hf.names())
    assert added == {"moe/dispatch/argsort", "moe/dispatch/sorted_indices", "moe/expert/up_offset",
                     "moe/expert/permuted_probs", "moe/expert/act_up_product"}
    # the non-MoE terms are untouched: the HF-trace equality of the default dispatcher is not at stake
    assert [t for t in hf if not t.name.startswith("moe/")] == [t for t in megatron if not t.name.startswith("moe/")]


def test_fused_swiglu_and_moe_act_under_megatrons_dispatcher():
    """WeightedSwiGLUFunction saves (fc1 output, probs) and returns fc2's input; moe_act's
    CheckpointWithoutOutput keeps the same two inputs and discards its output (fused_bias_swiglu.py,
    experts.py at d98e8a6)."""
    inv = _megatron_single_rank()
    fused = set(inv.names()) - set(fused_expert_activation(inv).names())
    recomputed = set(inv.names()) - set(expert_activation_recompute(inv).names())
    assert fused == {"moe/expert/act_output", "moe/expert/up_offset", "moe/expert/act_up_product"}
    assert recomputed == fused | {"moe/expert/down_input"}
    assert "moe/expert/permuted_probs" in fused_expert_activation(inv).names()


# --- layernorm recompute: the real HF Mixtral layer under Megatron's CheckpointWithoutOutput ------

def _checkpoint_without_output(torch):
    """A CheckpointWithoutOutput as ``tensor_parallel/random.py`` (d98e8a6) runs its forward: the
    function under no_grad, its tensor inputs saved; ``discard`` frees the output's storage."""
    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, run, x):
            with torch.no_grad():
                out = run(x)
            ctx.save_for_backward(x)
            return out

        @staticmethod
        def backward(ctx, grad):  # the count runs forward only; a backward here would be a test bug
            raise NotImplementedError("forward-only stand-in: the test counts what forward saves")

    class Checkpoint:
        def __init__(self, module):
            self.module, self.outputs = module, []
            self.forward = module.forward

        def __call__(self, x):
            out = Function.apply(self.forward, x)
            self.outputs.append(out)
            return out

        def discard(self, *_):
            for out in self.outputs:
                out.untyped_storage().resize_(0)
            self.outputs.clear()

    return Checkpoint


def _live_saved_bytes(torch, module, args, kwargs) -> int:
    """Bytes of the storages autograd holds at the end of forward, by storage, at their size then
    (a discarded output counts 0); parameters and inputs that need no gradient (the rotary tables,
    shared by all layers) are left out, as ``symbolic.trace`` leaves them out of a layer's bytes."""
    import gc
    import weakref

    inputs = [x for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)]
    inputs += [y for x in kwargs.values() if isinstance(x, (tuple, list)) for y in x if isinstance(y, torch.Tensor)]
    own = {p.untyped_storage().data_ptr() for p in module.parameters()}
    own |= {x.untyped_storage().data_ptr() for x in inputs if not x.requires_grad}
    packed = []

    def pack(tensor):
        alias = tensor.detach()
        packed.append(weakref.ref(alias))
        return alias

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        out = module(*args, **kwargs)
    gc.collect()
    storages = {}
    for ref in packed:
        alias = ref()
        if alias is None:
            continue
        storage = alias.untyped_storage()
        if storage.data_ptr() not in own:
            storages[storage.data_ptr()] = max(storages.get(storage.data_ptr(), 0), storage.nbytes())
    del out
    return sum(storages.values())


@pytest.mark.parametrize("S,B,H,A,G,FE,EE,K", [(6, 2, 32, 4, 2, 24, 4, 2), (5, 3, 48, 6, 3, 16, 3, 1)])
def test_layernorm_recompute_equals_the_real_layer_under_checkpoint_without_output(S, B, H, A, G, FE, EE, K):
    torch = require("torch")
    require("transformers")
    from symbolic import trace as tr
    cfg = tr.hf_config({"model_type": "mixtral", "hidden_size": H, "num_attention_heads": A,
                        "num_key_value_heads": G, "intermediate_size": FE, "num_local_experts": EE,
                        "num_experts_per_tok": K}, "sdpa")
    layer, args, kwargs = tr.hf_layer_factory(cfg)(s=S, b=B)
    values = dict(s=S, b=B, h=H, a=A, g=G, f_e=FE, E=EE, k=K)
    saved = tr.hf_declared(cfg)[0]
    plain = _live_saved_bytes(torch, layer, args, kwargs)
    assert plain == _at(activations.total_bytes(saved), **values)  # the counter agrees with the trace tests

    Checkpoint = _checkpoint_without_output(torch)
    hooks = []
    for norm, consumer in ((layer.input_layernorm, layer.self_attn), (layer.post_attention_layernorm, layer.mlp)):
        checkpoint = Checkpoint(norm)
        norm.forward = checkpoint
        hooks.append(consumer.register_forward_hook(lambda *_, c=checkpoint: c.discard()))
    try:
        recomputed = _live_saved_bytes(torch, layer, args, kwargs)
    finally:
        for hook in hooks:
            hook.remove()
        for norm in (layer.input_layernorm, layer.post_attention_layernorm):
            del norm.forward
    assert recomputed == _at(activations.total_bytes(norm_recompute(saved)), **values)
    assert recomputed < plain


def test_layernorm_recompute_term_by_term_on_the_llama_and_gpt_layers():
    from symbolic.core.dims import b, h, s
    from symbolic.models.architectures import gpt, llama
    inv = llama.saved_tensors()
    after = norm_recompute(inv)
    gone = set(inv.names()) - set(after.names())
    assert gone == {"attention/norm_input_fp32", "attention/norm_rstd", "attention/norm_normalized",
                    "attention/qkv_input", "mlp/norm_input_fp32", "mlp/norm_rstd", "mlp/norm_normalized",
                    "mlp/gate_up_input"}
    assert after["attention/norm_input"].bytes == 2 * s * b * h == after["mlp/norm_input"].bytes
    # GPT (LayerNorm keeps its bf16 input): the inputs stay, the outputs kept by QKV and fc1 go
    g = gpt.saved_tensors()
    assert set(g.names()) - set(norm_recompute(g).names()) == {"attention/qkv_input", "mlp/fc1_input"}


def test_layernorm_recompute_in_the_bill_adds_no_flops(capsys):
    base = Layout(seq=4096, tp=2, sp=True, dp=8, ep=8, recompute="selective", recompute_modules=("core_attn",))
    more = Layout(seq=4096, tp=2, sp=True, dp=8, ep=8, recompute="selective",
                  recompute_modules=("core_attn", "layernorm"))
    one, two = (make_bill(preset("mixtral-8x7b"), layout) for layout in (base, more))
    assert one.totals["flops_per_iteration"] == two.totals["flops_per_iteration"]
    # per layer: RMSNorm's fp32 copy 4sbh, x·rstd 2sbh, rstd 4sb, the output kept by the consumer
    # 2sbh, for both norms, against the bf16 input the checkpoint keeps 2sbh; all /t under SP
    s_, b_, h_, t_, L_ = 4096, 1, 4096, 2, 32
    saved = 2 * L_ * (4 * s_ * b_ * h_ + 2 * s_ * b_ * h_ + 4 * s_ * b_ + 2 * s_ * b_ * h_ - 2 * s_ * b_ * h_) // t_
    assert one.totals["activation_bytes"] - two.totals["activation_bytes"] == saved


# --- capacity padding: the experts' FLOPs on the padded rows -------------------------------------

@pytest.mark.parametrize("seq,tp,sp,cp,capacity", [(4096, 2, True, 1, "5/4"), (4096, 1, False, 1, "3/2"),
                                                   (1000, 2, True, 2, "11/10"), (4096, 4, False, 1, "5/4")])
def test_padding_flops_follow_megatrons_capacity_rule(seq, tp, sp, cp, capacity):
    """Per rank: N = s·b/(c·t under SP) tokens, every expert gets ceil(N·k/E·C_f) rows from it."""
    model = preset("mixtral-8x7b")
    kw = dict(seq=seq, tp=tp, sp=sp, cp=cp, dp=8 // (tp * cp) or 1, ep=4 if tp * cp <= 2 else 2,
              moe_capacity=Fraction(capacity), moe_dispatcher="alltoall")
    dropless, padded = (make_bill(model, Layout(**kw, moe_pad_to_capacity=pad)) for pad in (False, True))
    lines = {line.name: line.value for line in padded.lines if line.ledger == "flops"}
    E, k, h, f_e, L = model.experts, model.experts_per_token, model.hidden, model.expert_ffn, model.layers
    ranks = cp * (tp if sp else 1)
    tokens = seq // ranks
    rows = ranks * -(-tokens * k * Fraction(capacity).numerator // (E * Fraction(capacity).denominator))
    extra_rows = rows * E - seq * k  # per micro-batch, all experts
    micro_batches = kw["dp"]
    want = {"layer/moe/experts_gate_up (padding to capacity)": 3 * 2 * extra_rows * h * 2 * f_e * L * micro_batches,
            "layer/moe/experts_down (padding to capacity)": 3 * 2 * extra_rows * f_e * h * L * micro_batches}
    assert {name: lines[name] for name in want} == want
    assert padded.totals["flops_per_iteration"] - dropless.totals["flops_per_iteration"] == sum(want.values())
    assert padded.totals["model_flops_per_iteration"] == dropless.totals["model_flops_per_iteration"]


def test_padding_flops_recomputed_under_full_recompute():
    kw = dict(seq=4096, dp=8, ep=8, moe_capacity=Fraction(5, 4), moe_dispatcher="alltoall", moe_pad_to_capacity=True)
    none, full = (make_bill(preset("mixtral-8x7b"), Layout(**kw, recompute=r)) for r in ("none", "full"))
    name = "layer/moe/experts_down (padding to capacity)"
    a, z = ({line.name: line.value for line in bill.lines}[name] for bill in (none, full))
    assert Fraction(z, a) == Fraction(4, 3)  # forward + backward (3×) plus the recomputed forward


@pytest.mark.parametrize("argv,message", [
    (["--moe-pad-to-capacity", "--moe-capacity-factor", "5/4"], "add --moe-dispatcher alltoall"),
    (["--moe-pad-to-capacity", "--moe-dispatcher", "alltoall"], "set --moe-capacity-factor above 1"),
])
def test_padding_without_its_conditions_is_one_line(capsys, argv, message):
    assert main(["bill", "mixtral-8x7b", "--seq", "4096", "--ep", "8", "--dp", "8", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_dispatcher_on_a_dense_model_is_refused(capsys):
    assert main(["bill", "llama-3-8b", "--moe-dispatcher", "alltoall"]) == 2
    assert "has none" in capsys.readouterr().err


def test_layernorm_recompute_refused_on_a_post_norm_layer(tmp_path, capsys):
    import json
    config = {"model_type": "olmo2", "hidden_size": 256, "num_attention_heads": 4, "num_hidden_layers": 2,
              "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 512}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert main(["bill", str(tmp_path / "config.json"), "--recompute", "selective",
                 "--recompute-modules", "layernorm"]) == 2
    assert "post-norm" in capsys.readouterr().err


# --- properties ----------------------------------------------------------------------------------

def _tiny():
    return ModelConfig("tiny-moe", 4, 64, 8, 1000, 64, ffn=48, tied=False, positions="rope", arch="moe",
                       kv_heads=4, mlp="swiglu", norm="rmsnorm", experts=8, experts_per_token=2, expert_ffn=48)


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2]), dp=st.sampled_from([2, 4, 8]), zero=st.sampled_from([0, 1, 3]),
       sp=st.booleans(), pad=st.booleans(), modules=st.sampled_from([(), ("layernorm",), ("moe_act", "layernorm")]))
def test_megatron_bytes_do_not_grow_with_ep(tp, dp, zero, sp, pad, modules):
    sp = sp and tp > 1
    model = _tiny()
    kw = dict(seq=16, micro_batch=2, tp=tp, sp=sp, dp=dp, zero=zero, moe_dispatcher="alltoall",
              moe_capacity=Fraction(5, 4) if pad else Fraction(1), moe_pad_to_capacity=pad,
              recompute="selective" if modules else "none", recompute_modules=modules)
    previous = None
    for ep in (1, 2, 4, 8):
        layout = Layout(ep=ep, **kw)
        if not layout.is_valid(model):
            continue
        totals = make_bill(model, layout).totals
        now = (totals["model_states_bytes"], totals["activation_bytes"])
        if previous is not None:
            assert now[0] <= previous[0] and now[1] <= previous[1], (ep, now, previous)
        previous = now


def test_mixtral_at_one_layout_the_readme_figures():
    """The README's note: mixtral-8x7b at --tp 2 --sp --ep 8 --dp 8 --seq 4096, one GPU, 32 layers.
    A rank routes N = s·b/t = 2048 tokens; its one expert receives N·k = 4096 rows from each of the
    8 EP ranks, /t·e_t = 1: 8192 rows of width f_e/e_t = 7168 (e_t = t = 2)."""
    L, N, E, k, rows, narrow, h = 32, 2048, 8, 2, 8192, 7168, 4096
    megatron = make_bill(preset("mixtral-8x7b"), Layout(seq=4096, tp=2, sp=True, dp=8, ep=8, moe_dispatcher="alltoall"))
    hf = make_bill(preset("mixtral-8x7b"), Layout(seq=4096, tp=2, sp=True, dp=8, ep=8))
    m = {line.name: line.value for line in megatron.lines if line.ledger == "activations"}
    f = {line.name: line.value for line in hf.lines if line.ledger == "activations"}
    assert m["moe/dispatch/argsort"] == 8 * E * N * L == 4_194_304
    assert m["moe/dispatch/sorted_indices"] == 8 * N * k * L == 1_048_576
    assert m["moe/expert/up_offset"] == m["moe/expert/act_up_product"] == 2 * rows * narrow * L == 3_758_096_384
    assert m["moe/expert/down_input"] == f["moe/expert/down_input"]
    assert m["moe/expert/permuted_probs"] == 2 * rows * L
    assert f["moe/expert/down_output"] == f["moe/expert/combine_input"] == 2 * rows * h * L == 2_147_483_648
    assert f["moe/expert/token_index"] == 16 * rows * L and f["moe/expert/routing_weight"] == 4 * rows * L
    added = 4_194_304 + 1_048_576 + 2 * 3_758_096_384 + 2 * rows * L
    removed = 2 * 2_147_483_648 + 16 * rows * L + 4 * rows * L
    assert megatron.totals["activation_bytes"] - hf.totals["activation_bytes"] == added - removed


# --- mla_up_proj: MLA's up projections and RoPE under CheckpointWithoutOutput --------------------

def test_mla_up_proj_recompute_term_by_term():
    """The kernel's Q, K, V go; the checkpoint's inputs stay (the two latents, declared) and the
    rotary key is added: a view of the kv down projection's output without SP, all-gathered to
    (s, b, d_r) on every TP rank with SP (multi_latent_attention.py at d98e8a6)."""
    from symbolic.bill.derive import inventories
    from symbolic.core.dims import b, d_r, r_kv, s
    from symbolic.layout.strategies import mla_up_proj_recompute
    saved = inventories(preset("deepseek-v3"))[1]
    for sp, kept in ((False, 2 * s * b * (r_kv + d_r)), (True, 2 * s * b * d_r)):
        after = mla_up_proj_recompute(saved, sequence_parallel=sp)
        assert set(saved.names()) - set(after.names()) == {"attention/query", "attention/key", "attention/value"}
        assert set(after.names()) - set(saved.names()) == {"attention/k_pos_emb"}
        assert after["attention/k_pos_emb"].bytes == kept
        assert {"attention/q_b_input", "attention/kv_b_input"} <= set(after.names())
    # in the bill: the three go per GPU, /t by heads; the gathered rotary key stays whole
    kw = dict(seq=4096, tp=2, sp=True, dp=8, ep=8, recompute="selective")
    base, up = (make_bill(preset("deepseek-v3"), Layout(**kw, recompute_modules=modules))
                for modules in (("core_attn",), ("core_attn", "mla_up_proj")))
    lines = {line.name: line.value for line in base.lines if line.ledger == "activations"}
    gone = sum(lines[name] for name in ("attention/query", "attention/key", "attention/value"))
    assert base.totals["activation_bytes"] - up.totals["activation_bytes"] == gone - 2 * 4096 * 64 * 61
    assert base.totals["flops_per_iteration"] == up.totals["flops_per_iteration"]


def test_mla_up_proj_refused_without_mla(capsys):
    assert main(["bill", "mixtral-8x7b", "--recompute", "selective", "--recompute-modules", "mla_up_proj"]) == 2
    assert "multi-head latent attention" in capsys.readouterr().err
