"""Sliding-window attention (symbolic.models.windows): the windowed layers read, their FLOPs priced.

The bill's kernel on CUDA (flash-attn's native window) multiplies only within the window's band; HF's
eager and SDPA paths apply the window as a mask — traced here with the window cutting (s > w), to the
byte and the FLOP, eager and SDPA, for every family whose windows are priced.
"""
from __future__ import annotations

import pytest
from sympy import Add, Integer

from _families import declared_layer, tiny
from _tracing import at, require
from symbolic.ledgers import activations
from symbolic.models import hf, windows
from symbolic.models.architectures import composed, parts
from symbolic.models.config import ConfigError


def _executed(s: int, w: int) -> int:
    """The score entries a causal kernel with a window of w keys executes (flash-attn's
    hopper/benchmark_attn.py ``flops``: per row, the keys from max(0, i − (w − 1)) to i)."""
    return sum(i - max(0, i - (w - 1)) + 1 for i in range(s))


@pytest.mark.parametrize("s, w", [(5, 3), (7, 2), (9, 9), (4, 10), (4096, 4096), (100, 1), (31, 8)])
def test_the_band_is_the_executed_window_mirrored_as_the_causal_triangle_is(s, w):
    """The engine bills causal attention at s² = 2·(the executed triangle) − s; the window's band is the
    same rule on the window's executed entries, and s² whenever the window does not cut."""
    band = parts.window_band(Integer(s), Integer(w))
    assert band == 2 * _executed(s, w) - s
    assert _executed(s, s) * 2 - s == s * s
    if w >= s:
        assert band == s * s


def _mistral(**changes):
    return {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "vocab_size": 32000, "intermediate_size": 14336,
            "max_position_embeddings": 32768, "sliding_window": 4096, **changes}


def test_the_bill_counts_the_window_on_the_fused_kernel_and_the_full_square_where_it_is_a_mask():
    model = hf.from_hf_dict(_mistral(), "Mistral-7B-v0.1")
    values = {**model.values(), "s": 32768, "b": 1}
    bill = composed.matmuls(model.recipe)            # fused kernel, CUDA: flash-attn's window
    traced = composed.matmuls(model.recipe, "fused", "cpu")  # the CPU path: the mask, the full s×s
    names = bill.names()
    assert "layer/attention/scores_window" in names and "layer/attention/context_window" in names
    core = lambda inv: at(Add(*(mm.forward_flops for mm in inv if "attention/" in mm.name and not mm.weight)),  # noqa: E731
                          **values)
    band = 32768 * (2 * 4096 - 1) - 4096 * 4095
    assert core(bill) == 2 * 2 * 32 * 128 * band                 # Q·Kᵀ and ·V over the band, per head
    assert core(traced) == 2 * 2 * 32 * 128 * 32768 ** 2
    # at s ≤ w the window cuts nothing: the same FLOPs as full attention
    assert core(bill) != core(traced) and at(Add(*(mm.forward_flops for mm in bill)), **{**values, "s": 4096}) == \
        at(Add(*(mm.forward_flops for mm in traced)), **{**values, "s": 4096})


def test_windowed_layers_are_read_from_layer_types_and_the_families_patterns():
    def dims(raw):
        return dict(hf.from_hf_dict(raw, "t").dims)

    gemma3 = tiny("gemma3_text", num_hidden_layers=12, sliding_window=512)
    assert (dims(gemma3)["L_w"], dims(gemma3)["w"]) == (10, 512)              # five sliding, one full
    assert dims(dict(gemma3, sliding_window_pattern=4))["L_w"] == 9
    assert dims(tiny("gemma2", num_hidden_layers=5))["L_w"] == 3
    qwen2 = tiny("qwen2", num_hidden_layers=6, use_sliding_window=True, sliding_window=64, max_window_layers=4)
    assert dims(qwen2)["L_w"] == 2                                              # i >= max_window_layers
    assert "L_w" not in dims(dict(qwen2, use_sliding_window=False))
    assert dims(dict(qwen2, layer_types=["sliding_attention"] * 5 + ["full_attention"]))["L_w"] == 5
    moe = tiny("qwen2_moe", num_hidden_layers=6, use_sliding_window=True, sliding_window=64, max_window_layers=4)
    assert dims(moe)["L_w"] == 2                                                # layers 0 and 2
    assert "L_w" not in dims(tiny("starcoder2"))                                # sliding_window null by default
    with pytest.raises(ConfigError, match=r"layer_types must list one of 'sliding_attention' or 'full_attention' "
                                          r"per layer \(2\)"):
        hf.from_hf_dict(tiny("gemma2", layer_types=["sliding_attention", "chunked_attention"]), "t")


def test_a_family_declares_its_rule():
    """The entry point a family module uses: ``WINDOWS = windows.Rule(...)``."""
    from symbolic.models.families import starcoder2

    assert starcoder2.WINDOWS == windows.Rule()
    assert windows.rule_of("gemma2").layer_types and windows.rule_of("mistral") == windows.Rule()


#: (family, changes): every family whose windows are priced, the window cutting at the traced s (5, w = 3)
WINDOWED = [
    ("mistral", {}),
    ("mixtral", {}),
    ("qwen2", {"use_sliding_window": True, "max_window_layers": 0}),
    ("qwen3", {"use_sliding_window": True, "max_window_layers": 0}),
    ("qwen3_moe", {"use_sliding_window": True}),
    ("qwen2_moe", {"use_sliding_window": True, "max_window_layers": 4, "mlp_only_layers": [],
                   "layer_types": ["full_attention", "sliding_attention", "full_attention"]}),
    ("gemma2", {"layer_types": ["full_attention", "sliding_attention"]}),   # the measured (second) layer windowed
    ("gemma2", {}),                                                           # the second layer is full
    ("gemma3_text", {}),
    ("starcoder2", {}),
    ("phi3", {}),
    # issue 40's families: their full-attention layers (the measured second of two); the sliding ones are
    # traced by tests/test_family_traces.py (TINY and SECOND windows cut at the traced s)
    ("ministral", {"layer_types": ["sliding_attention", "full_attention"]}),
    ("cohere2", {"layer_types": ["sliding_attention", "full_attention"]}),   # no rotary on the full layers
    ("exaone4", {"layer_types": ["sliding_attention", "full_attention"]}),   # no rotary on the full layers
    ("exaone4", {"sliding_window": None, "layer_types": ["full_attention"] * 2}),  # no window: rotary everywhere
]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("family, changes", WINDOWED)
def test_the_traced_layer_with_the_window_cutting_is_exact(family, changes, attention):
    """HF applies the window as a mask: FlopCounterMode counts the full s×s, eager keeps nothing more, SDPA
    (its mask materialised) keeps K, V repeated to a heads and a bf16 (b, 1, s, s) mask — declared, exact."""
    if family == "gemma2" and attention == "sdpa":
        pytest.skip("Gemma-2 runs eager attention only")
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = tiny(family, **{"sliding_window": 3, **changes})
    s, b = 5, 2
    saved, layer, extra, values = declared_layer(raw, attention, seq=s)
    values.update(s=s, b=b)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b) == want


def test_the_note_states_the_difference_from_hf_paths_with_its_size():
    model = hf.from_hf_dict(_mistral(), "Mistral-7B-v0.1")
    note = next(n for n in model.approximations if n.startswith("sliding-window attention"))
    assert "flash-attn's native window" in note and "12·b·a·d_h·(s² − band)" in note
    assert "4·s·b·(a − g)·d_h + 2·b·s² bytes" in note
    # at the default s = 4096 = w nothing is cut: 0 FLOPs, the SDPA path's mask and K, V copies only
    assert f"0 training FLOPs and {4 * 4096 * 24 * 128 + 2 * 4096 ** 2:,} B" in note


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_olmo3_full_layer_beside_a_sliding_one(attention):
    """OLMo-3's full layer is exact; measured as two layers less one, the difference also holds the full
    layers' rotary table (cos, sin: (1, s, d_h) fp32 each), built once per model for each layer type present
    (Olmo3RotaryEmbedding) — a model-level tensor, 8·s·d_h bytes, not the layer's."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = tiny("olmo3", layer_types=["sliding_attention", "full_attention"])
    s, b, d = 5, 2, 40 // 4
    saved, layer, extra, values = declared_layer(raw, attention, seq=s)
    values.update(s=s, b=b)
    traced = hf_layer_by_difference(raw, attention, s, b)
    assert traced[0] - at(activations.total_bytes(saved), **values) == 8 * s * d
    assert traced[1:] == (at(Add(*(mm.forward_flops for mm in layer)), **values),
                          at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))


def test_configs_transformers_cannot_build_are_refused_in_one_line():
    """EXAONE 4.0 without a window and without layer_types (Exaone4Config: (i + 1) % 0), with a string pattern
    alone ((i + 1) % "LLLG"), and Ministral without head_dim (MinistralAttention: None ** -0.5)."""
    raw = tiny("exaone4")
    with pytest.raises(ConfigError, match=r"sliding_window null on model_type 'exaone4'.*give layer_types"):
        hf.from_hf_dict(dict(raw, sliding_window=None), "t")
    with pytest.raises(ConfigError, match=r'sliding_window_pattern "LLLG" on model_type .exaone4.'):
        hf.from_hf_dict(dict(raw, sliding_window_pattern="LLLG"), "t")
    full = hf.from_hf_dict(dict(raw, sliding_window=None, layer_types=["full_attention"] * 2), "t")
    assert not full.recipe.window and "L_w" not in dict(full.dims)
    with pytest.raises(ConfigError, match=r"head_dim null on model_type 'ministral'.*give head_dim \(h/a = 11\)"):
        hf.from_hf_dict({k: v for k, v in tiny("ministral").items() if k != "head_dim"}, "t")


def test_trace_command_declares_the_masked_path_from_s_at_the_window(tmp_path, capsys):
    """`symbolic trace --hf` on a windowed config: below the window SDPA runs as without one, from s ≥ w with
    its mask materialised — declared per s, traced == declared at each."""
    require("transformers")
    import json

    from symbolic.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny("gemma3_text", sliding_window=3)))
    assert main(["trace", "--hf", str(path), "--attention", "sdpa", "--seqs", "2,5", "--batches", "2"]) == 0
    assert capsys.readouterr().out.strip().endswith("traced == declared at every point")
