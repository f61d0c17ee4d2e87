"""Hybrid models: layers of other kinds than full attention as shares of the layer's terms (LFM2's short
convolutions, L_c), their mix in the bill's first lines, the GPU kernel's difference from the traced path, and
FlopCounterMode's count of a grouped conv's weight gradient."""
from __future__ import annotations

import pytest
from sympy import Add, expand

from _families import SECOND, declared_layer, tiny
from _tracing import at, require
from symbolic.core.dims import SYMBOLS, K_c, L, L_c, b, f, h
from symbolic.ledgers import activations
from symbolic.models import hf
from symbolic.models.architectures import composed
from symbolic.models.config import ConfigError
from symbolic.models.layer_kinds import layer_mix


def _lfm2(dims: str, **changes) -> dict:
    return tiny("lfm2", **(SECOND["lfm2"] if dims == "second" else {}), **changes)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims", ["first", "second"])
def test_lfm2_attention_layer_of_a_hybrid_is_the_traced_layer(attention, dims):
    """The attention kind of a model with conv layers (L_c = 0 at the measured layer): layer 1 of three, after an
    attention layer, so the rotary tables are kept by both models and cancel (the conv kind is the family trace)."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _lfm2(dims, num_hidden_layers=3, layer_types=["full_attention", "full_attention", "conv"])
    s, b_ = (5, 2) if dims == "first" else (7, 3)
    saved, layer, extra, values = declared_layer(raw, attention)
    assert values["L_c"] == 0 and hf.from_hf_dict(raw, "t").recipe.short_conv
    values.update(s=s, b=b_)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b_) == want


def test_lfm2_layer_kinds_are_shares_of_the_layer():
    """Each kind's terms carry its share: the attention's (L − L_c)/L, the conv's L_c/L, so over L layers the
    parameters are L_c conv blocks and L − L_c attention blocks, exactly; the MLP is every layer's."""
    model = hf.from_hf_dict(_lfm2("first", num_hidden_layers=16, layer_types=None,
                                  full_attn_idxs=[2, 5, 8, 10, 12, 14]), "t")
    assert dict(model.dims)["L_c"] == 10
    params = {p.name: p for p in composed.parameters(model.recipe)}
    assert expand(L * params["layer/conv/in_proj_weight"].count - 3 * L_c * h ** 2) == 0
    assert expand(L * params["layer/conv/conv_weight"].count - L_c * h * K_c) == 0
    assert params["layer/attention/output_weight"].shape[0] == (L - L_c) / L
    assert params["layer/mlp/down_weight"].shape == (f, h)  # every layer's MLP: no share


def test_the_bill_shows_the_layer_mix_first(capsys, tmp_path):
    import json

    from symbolic.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_lfm2("first", num_hidden_layers=16, layer_types=None,
                                     full_attn_idxs=[2, 5, 8, 10, 12, 14])))
    assert main(["bill", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "layer mix: 10 short-convolution + 6 full-attention layers"


def test_layer_mix_phrases():
    assert layer_mix(16, {"L_c": 10, "K_c": 3}) == "10 short-convolution + 6 full-attention layers"
    assert layer_mix(4, {"L_c": 4}) == "4 short-convolution layers"
    assert layer_mix(4, {"L_d": 1}) is None


def test_lfm2_default_layers_are_attention_and_other_kinds_are_refused():
    """Lfm2Config without layer_types or full_attn_idxs makes every layer attention; a kind Lfm2Model's mask
    mapping does not know is refused in one line."""
    model = hf.from_hf_dict(_lfm2("first", layer_types=None), "t")
    assert not model.recipe.short_conv and "L_c" not in dict(model.dims)
    with pytest.raises(ConfigError, match="layer_types .*sliding_attention"):
        hf.from_hf_dict(_lfm2("first", layer_types=["full_attention", "sliding_attention"]), "t")


def test_the_causal_conv1d_kernel_keeps_the_stated_difference_less():
    """On GPU the conv is causal-conv1d's CausalConv1dFn (an output of s positions); the traced CPU path keeps
    F.conv1d's padded output: 2·b·h·(K_c − 1) bytes more per conv layer, the size the reader's note states."""
    model = hf.from_hf_dict(_lfm2("second"), "t")

    def total(backend):
        return Add(*(t.bytes for t in composed.saved_tensors(model.recipe, "fused", backend)))

    assert expand(L * (total("cpu") - total("cuda")) - L_c * 2 * b * h * (K_c - 1)) == 0
    note = next(n for n in model.approximations if "causal-conv1d" in n)
    assert "2·b·h·(K_c − 1) bytes more per conv layer (360 B per sequence)" in note  # 2·60·3


def test_grouped_conv_weight_gradient_is_counted_per_group():
    """torch 2.13.0's conv_backward_flop counts a depthwise conv's weight gradient over every channel pair
    (h times its multiply-adds); symbolic.trace.grouped_conv_flops counts it per group, as the forward."""
    torch = require("torch")
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    from symbolic.trace import grouped_conv_flops

    channels, kernel, seq, batch = 6, 3, 5, 2
    x = torch.randn(batch, channels, seq, requires_grad=True)
    w = torch.randn(channels, 1, kernel, requires_grad=True)
    forward = 2 * batch * channels * kernel * (seq + kernel - 1)
    for mapping, weight_grad in (({}, channels * forward), (grouped_conv_flops(), forward)):
        with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
            F.conv1d(x, w, padding=kernel - 1, groups=channels).sum().backward()
        assert counter.get_total_flops() == forward + forward + weight_grad


def _qwen3_next(dims: str, **changes) -> dict:
    return tiny("qwen3_next", **(SECOND["qwen3_next"] if dims == "second" else {}), **changes)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims", ["first", "second"])
def test_qwen3_next_gated_attention_layer_of_a_hybrid_is_the_traced_layer(attention, dims):
    """Qwen3-Next's gated attention (Q doubled for the gate, sigmoid(gate) × output, (1 + w) per-head norms,
    partial rotary by cat) in a model with linear-attention layers: L_l = 0 at the measured layer."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _qwen3_next(dims, num_hidden_layers=3, layer_types=["full_attention", "full_attention", "linear_attention"])
    s, b_ = (5, 2) if dims == "first" else (7, 3)
    saved, layer, extra, values = declared_layer(raw, attention)
    assert values["L_l"] == 0
    values.update(s=s, b=b_)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b_) == want


@pytest.mark.parametrize("dims, s", [("first", 64), ("first", 70), ("second", 130), ("first", 200)])
def test_qwen3_next_gated_deltanet_over_several_chunks_is_the_traced_layer(dims, s):
    """torch_chunk_gated_delta_rule pads to 64·⌈s/64⌉ and scans the chunks: one chunk (exactly 64), two, three
    and four; from two chunks on the states read and the decayed q are kept; the last chunk's state update is
    HF's cache's (its config's use_cache, true): what it reads is kept, it has no backward."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _qwen3_next(dims)
    saved, layer, extra, values = declared_layer(raw, "sdpa")
    assert values["L_l"] == 1
    values.update(s=s, b=2)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, "sdpa", s, 2) == want


def test_qwen3_next_kernel_note_is_the_inventories_difference():
    """On GPU the gated DeltaNet is FLA's chunk_gated_delta_rule and causal-conv1d; the note states what HF's
    torch path keeps more, per linear-attention layer at s = 4096 (the position table allows it), b = 1: the
    CPU and CUDA inventories' difference."""
    model = hf.from_hf_dict(_qwen3_next("first", max_position_embeddings=8192), "t")
    L_l = SYMBOLS["L_l"]

    def total(backend):
        return Add(*(t.bytes for t in composed.saved_tensors(model.recipe, "fused", backend)))

    gap = (total("cpu") - total("cuda")) * L / L_l
    values = {SYMBOLS[k]: v for k, v in {**dict(model.dims), "h": 48, "s": 4096, "b": 1}.items()}
    note = next(n for n in model.approximations if "chunk_gated_delta_rule" in n)
    assert f"{int(gap.subs(values)):,} B per linear-attention layer more at s = 4,096, b = 1" in note
    names = {t.name for t in composed.saved_tensors(model.recipe, "fused", "cuda")}
    assert "linear_attention/ut_inverse" in names and "linear_attention/ut_system" not in names


def test_qwen3_next_layer_mix_and_refusals(capsys, tmp_path):
    import json

    from symbolic.cli import main

    raw = _qwen3_next("first", num_hidden_layers=8, layer_types=None)  # every 4th layer full attention
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main(["bill", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "layer mix: 6 linear-attention + 2 full-attention layers"
    with pytest.raises(ConfigError, match="linear_num_value_heads 3 .*multiple of linear_num_key_heads"):
        hf.from_hf_dict(_qwen3_next("first", linear_num_value_heads=3), "t")
    with pytest.raises(ConfigError, match="layer_types"):
        hf.from_hf_dict(_qwen3_next("first", layer_types=["full_attention", "mamba"]), "t")


@pytest.mark.parametrize("changes", [{"use_cache": False}, {"num_hidden_layers": 8, "layer_types": None}])
def test_qwen3_next_without_a_cache_keeps_no_final_state(changes):
    """use_cache false — or a model of linear-attention layers only, which the trace builds without a cache
    (HF's fails there; the published files' first three layers): no final state is held, so at one chunk the
    last state update keeps nothing, 4·b·H_v·(64·(D_k + 1) + 1) bytes per linear-attention layer less; exact."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _qwen3_next("first", **changes)
    saved, layer, extra, values = declared_layer(raw, "sdpa")
    values.update(s=5, b=2)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, "sdpa", 5, 2) == want
    cached = declared_layer(_qwen3_next("first"), "sdpa")[0]
    assert at(activations.total_bytes(cached), **values) - want[0] == 4 * 2 * 4 * (64 * (8 + 1) + 1)


@pytest.mark.parametrize("family", ["lfm2", "qwen3_next"])
def test_lora_adapts_each_kind_of_layer_as_peft_does(family):
    """PEFT's all-linear LoRA on a hybrid: the attention layers' projections and the other kind's (LFM2's
    in_proj/out_proj, Qwen3-Next's in_proj_qkvz/in_proj_ba/out_proj), each on its share of the layers; the
    depthwise convs (nn.Conv1d) are not adapted. LFM2: the whole count. Qwen3-Next: the mixers' adapters (PEFT
    0.x leaves its MLP and MoE blocks unadapted or adapts its router, as for Qwen2-MoE: not this test's)."""
    require("peft")
    from peft import LoraConfig, get_peft_model

    from symbolic.bill.derive import inventories, make_bill
    from symbolic.layout.layout import Layout
    from symbolic.ledgers import states
    from symbolic.trace import hf_model

    raw = tiny(family)
    model = get_peft_model(hf_model(raw, "sdpa"), LoraConfig(r=4, target_modules="all-linear"))
    trained = [(name, p.numel()) for name, p in model.named_parameters() if p.requires_grad]
    mixers = sum(n for name, n in trained if any(m in name for m in ("self_attn.", "linear_attn.", "conv.")))
    ours = hf.from_hf_dict(raw, "t")
    if family == "lfm2":
        bill = make_bill(ours, Layout(lora=4))
        line = next(x for x in bill.lines if x.name == "LoRA adapters (all-linear, rank r): bf16 parameters")
        assert line.value == 2 * sum(n for _, n in trained)
    adapted = [term for term in states.weight_matrices(inventories(ours)[0], "all-linear")
               if term.name.startswith(("layer/attention/", "layer/linear_attention/", "layer/conv/"))]
    assert at(Add(*(L * states.matrices_of(x) * 4 * (x.shape[-2] + x.shape[-1]) for x in adapted)),
              **ours.values()) == mixers
