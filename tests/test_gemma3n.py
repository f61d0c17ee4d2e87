"""Gemma 3n's text model (gemma3n_text; gemma3n through its text_config): each per-layer kind — KV-shared, sparse,
both — against the traced HF layer (the model of L + 1 layers less L; the measured layer is the last), eager and
SDPA at two dimension sets; the stated gaps to their size; the refusals one line each."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from sympy import Add

from _families import SECOND, declared_layer, hf_parameter_count, tiny
from _tracing import at, require
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.ledgers import activations
from symbolic.models import hf
from symbolic.trace import hf_family_declared

PUBLISHED = json.loads((Path(__file__).parent / "fixtures" / "families" / "published.json").read_text())["models"]


def _config(dims: str, **changes) -> dict:
    return tiny("gemma3n_text", **(SECOND["gemma3n_text"] if dims == "second" else {}), **changes)


def _declared(raw: dict, attention: str, s: int, b: int, kinds: tuple = ()) -> tuple[int, int, int]:
    saved, layer, extra, values = hf_family_declared(raw, attention, kinds=kinds)
    values.update(s=s, b=b)
    return (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims, changes, layers, kinds", [
    ("first", {}, 2, ("L_kv",)),                                                 # KV-shared sliding layer
    ("second", {}, 2, ("L_kv",)),                                                # KV-shared full layer, biases
    ("first", {"activation_sparsity_pattern": [0.95, 0.95, 0.0]}, 1, ("L_sp",)),  # Gaussian top-k MLP
    ("second", {"activation_sparsity_pattern": [0.0, 0.5, 0.9]}, 2, ("L_kv", "L_sp")),  # both kinds
    ("first", {"num_kv_shared_layers": 0, "altup_num_inputs": 2}, 2, ()),         # a third plain layer, 2 streams
    ("first", {"num_key_value_heads": 4}, 2, ("L_kv",)),  # g = a: eager's repeat_kv returns the reused K, V
])
def test_layer_kinds_equal_the_traced_layer(dims, changes, layers, kinds, attention):
    """The KV-shared layer (no K, V projections or norms; the fused kernel keeps nothing of the reused K, V), the
    sparse layer (std and relu kept), both: the declared layer at that kind (its letter = L), to the byte and FLOP."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config(dims, **changes)
    s, b = (5, 2) if dims == "first" else (7, 3)
    assert hf_layer_by_difference(raw, attention, s, b, layers) == _declared(raw, attention, s, b, kinds)


@pytest.mark.parametrize("layers, kinds, shared", [(1, (), False), (2, ("L_kv",), True)])
def test_sdpa_sliding_layer_gap_is_the_stated_size(layers, kinds, shared):
    """With s > sliding_window HF's SDPA path passes the window's mask to the kernel, which keeps it and K, V copied
    to a heads: exactly the 4·s·b·(a − g)·d_h + 2·b·s² bytes (4·s·b·a·d_h + 2·b·s² on a KV-shared layer) the
    reader's note states; eager attention stays exact."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("first", sliding_window=3)
    note = next(n for n in hf.from_hf_dict(raw, "t").approximations if n.startswith("layer_types"))
    assert "4·s·b·(a − g)·d_h + 2·b·s²" in note and "4·s·b·a·d_h + 2·b·s² on a KV-shared one" in note
    s, b, a, g, d = 5, 2, 4, 2, 20
    gap = 4 * s * b * (a if shared else a - g) * d + 2 * b * s * s
    traced = hf_layer_by_difference(raw, "sdpa", s, b, layers)
    assert traced[0] - _declared(raw, "sdpa", s, b, kinds)[0] == gap
    assert hf_layer_by_difference(raw, "eager", s, b, layers) == _declared(raw, "eager", s, b, kinds)


@pytest.mark.parametrize("dims", ["first", "second"])
def test_altup_model_level_activations_are_the_stated_size(dims):
    """What Gemma3nTextModel.forward keeps outside its layers for AltUp (the extra streams' projections and
    magnitudes at the input and the output, the last layer's streams), with the embeddings the per-layer projection
    keeps: the (10·n_u − 6)·h + 8·n_u bytes per token the reader's note states as not counted."""
    require("transformers")
    import torch

    from symbolic.trace import hf_model, trace_module

    raw = _config(dims)
    values = dict(hf.from_hf_dict(raw, "t").dims)
    n, h = values["n_u"], raw["hidden_size"]
    note = next(x for x in hf.from_hf_dict(raw, "t").approximations if x.startswith("AltUp's model-level"))
    assert "(10·n_u − 6)·h + 8·n_u bytes per token" in note and f"{(10 * n - 6) * h + 8 * n:,} B" in note
    s, b = 5, 2
    model = hf_model(raw, "eager", layers=1)
    torch.manual_seed(1)
    ids = torch.randint(0, model.config.vocab_size, (b, s))
    trace = trace_module(model, (), {"input_ids": ids}, count_flops=False, output=lambda out: out.logits.float().sum())
    kept = sum(r.bytes for r in trace.saved if r.module in ("model", "model.per_layer_model_projection"))
    assert kept == ((10 * n - 6) * h + 8 * n) * s * b


def test_the_multimodal_config_bills_its_text_model_and_names_the_towers(tmp_path, capsys):
    """model_type gemma3n: its text_config is billed (HF's Gemma3nForCausalLM count); the vision and audio towers
    are named as not counted; without a text_config, one line."""
    require("transformers")
    text = PUBLISHED["gemma-3n-E2B (text_config)"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3n", "architectures": ["Gemma3nForConditionalGeneration"],
                                "text_config": text["config"], "vision_config": {"model_type": "gemma3n_vision"},
                                "audio_config": {"model_type": "gemma3n_audio"}}))
    model = hf.load_hf_config(path)
    assert make_bill(model).totals["params"] == text["transformers_params"] == 4_435_182_688
    assert any("vision tower" in n and "audio tower" in n and "not counted" in n for n in model.approximations)
    raw = tiny("gemma3n_text")
    raw.pop("model_type")
    path.write_text(json.dumps({"model_type": "gemma3n", "text_config": raw}))
    assert make_bill(hf.load_hf_config(path)).totals["params"] == hf_parameter_count(tiny("gemma3n_text"))
    path.write_text(json.dumps({"model_type": "gemma3n", "num_hidden_layers": 2}))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs its text_config" in err


def test_published_kinds_are_read():
    """E2B: 30 layers, the last 10 KV-shared, the first 10 sparse (0.95), 24 sliding + 6 full."""
    model = hf.from_hf_dict(PUBLISHED["gemma-3n-E2B (text_config)"]["config"], "E2B")
    dims = dict(model.dims)
    assert (dims["L_kv"], dims["L_sp"], dims["n_u"], dims["r_l"], dims["h_p"], dims["V_p"]) == \
        (10, 10, 4, 64, 256, 262144)
    assert any(n.startswith("layer_types: 24 sliding-window + 6 full-attention") for n in model.approximations)


@pytest.mark.parametrize("changes, field", [
    ({"intermediate_size": [40, 32, 40]}, "intermediate_size"),
    ({"num_kv_shared_layers": 3}, "num_kv_shared_layers"),
    ({"num_kv_shared_layers": 1, "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]},
     "num_kv_shared_layers"),
    ({"altup_num_inputs": 1}, "altup_num_inputs"),
    ({"attention_dropout": 0.1}, "attention_dropout"),
    ({"hidden_activation": "gelu_new"}, "hidden_activation"),
    ({"activation_sparsity_pattern": [0.95, 1.0, 0.0]}, "activation_sparsity_pattern"),
    ({"layer_types": ["sliding_attention", "chunked_attention", "sliding_attention"]}, "layer_types"),
    ({"altup_coef_clip": "none"}, "altup_coef_clip"),
])
def test_what_gemma3n_does_not_model_is_one_line(changes, field, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("first", **changes)))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "gemma3n_text" in err


def test_trace_command_measures_a_sparse_layer(tmp_path, capsys):
    """`symbolic trace --hf` on a Gemma 3n file whose second layer is sparse: the declared layer at that kind."""
    require("transformers")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config("first", activation_sparsity_pattern=[0.95, 0.95, 0.0])))
    assert main(["trace", "--hf", str(path), "--attention", "sdpa", "--seqs", "4", "--batches", "2"]) == 0
    assert capsys.readouterr().out.strip().endswith("traced == declared at every point")


@pytest.mark.parametrize("dims", ["first", "second"])
def test_whole_model_flops_equal_the_declared_layer_and_model_side(dims):
    """A one-layer model's FlopCounterMode total, forward and backward: the layer (with its slice of the per-layer
    projection) plus the model side — the logits and the AltUp projections in and out."""
    require("transformers")
    import torch

    from symbolic.models.architectures import composed
    from symbolic.trace import cpu_sdpa_flops, hf_model, trace_module

    raw = _config(dims)
    model = hf.from_hf_dict(raw, "t")
    s, b = 5, 2
    built = hf_model(raw, "eager", layers=1)
    torch.manual_seed(1)
    ids = torch.randint(0, built.config.vocab_size, (b, s))
    trace = trace_module(built, (), {"input_ids": ids}, custom_flops=cpu_sdpa_flops(),
                         output=lambda out: out.logits.float().sum())
    mms = composed.matmuls(model.recipe)
    values = dict(model.values(), L=1, s=s, b=b, L_kv=0, L_sp=0)
    assert (trace.forward_total, trace.backward_total) == (at(Add(*(mm.forward_flops for mm in mms)), **values),
                                                           at(Add(*(mm.backward_flops for mm in mms)), **values))
