"""The paper GPT and the LLaMA layers are recipes of the parts every composed family is made of."""
from dataclasses import replace

import pytest
from sympy import expand

from symbolic.core.dims import V, a, b, f, g, h, s
from symbolic.core.tensors import Axis, Group
from symbolic.ledgers import activations
from symbolic.models.architectures import composed, expert_parts, gpt, llama, output, parts
from symbolic.models.config import Recipe

S, T, LI, BODY, CORE = Axis.SEQUENCE, Axis.TENSOR, Group.LAYER_INPUT, Group.BODY, Group.ATTENTION_CORE


def calls(monkeypatch, build):
    """The part functions ``build()`` calls, in order (each wrapped to record its name)."""
    seen = []
    for module, name in [*((parts, name) for name in ("norm", "attention_projections", "qk_norm", "attention_core",
                                                       "attention_output", "mlp", "block_dropout", "embeddings")),
                         (expert_parts, "moe")]:
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            seen.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, name, spy)
    build()
    return seen


def test_the_gpt_layer_is_composed_from_the_parts(monkeypatch):
    """LayerNorm, fused Q|K|V, the paper's attention core, its output projection, dropout, LayerNorm,
    the GeLU MLP, dropout: the wiring of composed.layer, no inventory of its own."""
    assert calls(monkeypatch, gpt.saved_tensors) == [
        "norm", "attention_projections", "qk_norm", "attention_core", "attention_output", "block_dropout",
        "norm", "mlp", "block_dropout"]
    assert calls(monkeypatch, gpt.parameters)[-1] == "embeddings"
    assert gpt.RECIPE == Recipe("gpt", norm="layernorm", qkv_bias=True, o_bias=True, fused_qkv=True, mlp="plain",
                                activation="gelu", mlp_bias=True)


def test_the_llama_layer_is_composed_from_the_parts(monkeypatch):
    assert calls(monkeypatch, llama.saved_tensors) == [
        "norm", "attention_projections", "qk_norm", "attention_core", "attention_output", "norm", "mlp"]
    assert llama.RECIPE == Recipe("llama")


def test_the_gpt_inventory_is_the_papers_terms():
    """Korthikanti §4.1's terms, with the shape, dtype, split and recompute group the parts give them."""
    per_head, scores, hidden = (s, b, a, h / a), (b, a, s, s), (s, b, h)
    expected = [
        ("attention/layernorm_input", hidden, "bf16", S, LI),
        ("attention/qkv_input", hidden, "bf16", S, BODY),
        ("attention/query", per_head, "bf16", T, BODY),
        ("attention/key", per_head, "bf16", T, BODY),
        ("attention/softmax_output", scores, "bf16", T, CORE),
        ("attention/softmax_dropout_mask", scores, "mask", T, CORE),
        ("attention/softmax_dropout_output", scores, "bf16", T, CORE),
        ("attention/value", per_head, "bf16", T, BODY),
        ("attention/projection_input", per_head, "bf16", T, BODY),
        ("attention/dropout_mask", hidden, "mask", S, BODY),
        ("mlp/layernorm_input", hidden, "bf16", S, BODY),
        ("mlp/fc1_input", hidden, "bf16", S, BODY),
        ("mlp/gelu_input", (s, b, 4 * h), "bf16", T, BODY),
        ("mlp/fc2_input", (s, b, 4 * h), "bf16", T, BODY),
        ("mlp/dropout_mask", hidden, "mask", S, BODY),
    ]
    got = [(x.name, x.shape, x.dtype, x.split, x.group) for x in gpt.saved_tensors()]
    assert got == expected
    assert {x.source for x in gpt.saved_tensors()} == {gpt.KORTHIKANTI}
    assert [(p.name, p.shape) for p in gpt.parameters()][:6] == [
        ("layer/attention/layernorm_weight", (h,)), ("layer/attention/layernorm_bias", (h,)),
        ("layer/attention/qkv_weight", (h, 3 * h)), ("layer/attention/qkv_bias", (3 * h,)),
        ("layer/attention/projection_weight", (h, h)), ("layer/attention/projection_bias", (h,))]
    assert [(m.name, m.K, m.N) for m in gpt.matmuls()] == [
        ("layer/attention/qkv", h, 3 * h), ("layer/attention/scores", h / a, s),
        ("layer/attention/context", s, h / a), ("layer/attention/projection", h, h),
        ("layer/mlp/fc1", h, 4 * h), ("layer/mlp/fc2", 4 * h, h), ("output/logits", h, V)]


def test_the_papers_form_drops_only_the_layernorm_statistics_the_kernels_keep():
    """The composed layer keeps LayerNorm's mean and rstd (backend terms); the paper's inventory is it
    without them, and 34 and 5 are the sum of what is left."""
    kernels = gpt.layer().saved
    dropped = [x.name for x in kernels if x.name not in gpt.saved_tensors().names()]
    assert dropped == ["attention/norm_mean", "attention/norm_rstd", "mlp/norm_mean", "mlp/norm_rstd"]
    assert dict(expand(activations.total_bytes(gpt.saved_tensors())).as_coefficients_dict()) == {
        s * b * h: 34, a * s**2 * b: 5}


def test_the_llama_inventory_is_the_hf_llama_family_composed_in_its_own_words():
    """llama.saved_tensors() and the composed family Recipe('llama') (what an HF llama config with
    a head_dim of its own gets) are one code path: the same terms, bytes, splits and groups, only the
    names of two MLP tensors, the notes, the citations and the per-head shape differ."""
    names = {"mlp/input": "mlp/gate_up_input", "mlp/act_output": "mlp/silu_output"}
    for kernel in ("fused", "explicit"):
        family = composed.saved_tensors(Recipe("llama"), kernel)
        ours = llama.saved_tensors(attention=kernel)
        assert [names.get(x.name, x.name) for x in family] == ours.names()
        for mine, theirs in zip(ours, family):
            assert (expand(mine.bytes - theirs.bytes), mine.split, mine.group) == (0, theirs.split, theirs.group)
    assert composed.parameters(Recipe("llama")).names() == llama.parameters().names()
    assert composed.matmuls(Recipe("llama")).names() == llama.matmuls().names()


def test_the_fused_rmsnorm_part():
    fused = parts.norm("x/norm", "rmsnorm_fused")
    assert [(t.name, t.shape, t.dtype) for t in fused.saved] == [("x/norm_input", (s, b, h), "bf16"),
                                                                  ("x/norm_rstd", (s, b), "fp32")]
    assert llama.rmsnorm("x/norm", "fused") == fused.saved  # its own source: the fused kernel, not HF
    with pytest.raises(ValueError, match="norm must be one of eager, fused"):
        llama.rmsnorm("x/norm", "apex")


def test_block_dropout_follows_the_backend_and_any_placement():
    """Dropout on each block's output is a part of the wiring: 1-byte masks on CUDA, the activation
    dtype on CPU; a sandwich-norm recipe with dropout drops each block's output after its post-norm."""
    cpu = composed.layer(gpt.RECIPE, "paper", "cpu", dropout=True).saved
    assert {x.dtype for x in cpu if x.name.endswith("dropout_mask")} == {"bf16"}
    sandwich = composed.layer(replace(Recipe("gemma2"), placement="sandwich"), dropout=True).saved
    names = [x.name for x in sandwich]
    assert names.index("attention/dropout_mask") == names.index("attention/post_norm_normalized") + 1
    assert names[-1] == "mlp/dropout_mask"


def test_a_wording_renames_and_recites_but_keeps_specific_sources():
    """The LLaMA wording cites the generic HF terms as LLaMA does, and keeps FlashAttention's."""
    fused = llama.saved_tensors()
    assert fused["attention/logsumexp"].source == parts.FLASH
    assert fused["attention/norm_rstd"].source == llama.HF_LLAMA
    assert parts.cite(parts.mlp("gated", f), parts.HF_WORDING) == parts.mlp("gated", f)


def test_the_output_side_final_layernorm_is_the_norm_part():
    cpu = output.saved_tensors("layernorm", backend="cpu")
    assert [(x.name, x.dtype) for x in cpu][:3] == [("output/final_norm_input", "bf16"),
                                                    ("output/final_norm_mean", "bf16"),
                                                    ("output/final_norm_rstd", "bf16")]


def test_kv_heads_reach_the_attention_parts():
    """MQA: K and V at one head, in the projections and the kernel."""
    mqa = llama.saved_tensors(kv_heads=1)
    assert mqa["attention/key"].shape == (s, b, 1, h / a)
    assert llama.parameters(kv_heads=1)["layer/attention/key_weight"].shape == (h, h / a)
    assert llama.saved_tensors(kv_heads=g)["attention/value"].shape == (s, b, g, h / a)
