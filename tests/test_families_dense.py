"""Issue 40's dense families (smollm3, arcee, seed_oss, ernie4_5, apertus) and Kimi-K2 read through its
``architectures``: what the per-family traces (tests/test_family_traces.py, TINY and SECOND) do not reach —
dropout on the probabilities of a family whose default has none, Seed-OSS's stated CPU SDPA gap, the NoPE
layers' note, Kimi-K2's reading and refusal."""
from __future__ import annotations

import json

import pytest
from sympy import Add

from _families import declared_layer, hf_parameter_count, tiny
from _tracing import at, require
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.ledgers import activations
from symbolic.models import hf
from symbolic.models.config import ConfigError


def _check(raw: dict, attention: str, s: int, b: int):
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    saved, layer, extra, values = declared_layer(raw, attention)
    values.update(s=s, b=b)
    want = (at(activations.total_bytes(saved), **values),
            at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b) == want


def kimi_k2(**changes) -> dict:
    """A tiny DeepSeek-V3 config as Kimi-K2 publishes its own: model_type kimi_k2, the architectures entry."""
    raw = tiny("deepseek_v3", first_k_dense_replace=0, **changes)
    return {**raw, "model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"],
            "auto_map": {"AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"}}


@pytest.mark.parametrize("family", ["smollm3", "arcee", "apertus"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_attention_dropout_is_traced(family, attention):
    """attention_dropout > 0 in training: eager keeps its mask and the dropped probabilities; SDPA on CPU takes
    its math path (fp32 Q, K, V at a heads, the fp32 softmax, its fp32 noise, the dropped probabilities)."""
    _check(tiny(family, attention_dropout=0.25), attention, 5, 2)


def test_seed_oss_states_the_cpu_sdpa_gap_its_dropout_makes():
    """Seed-OSS's default dropouts: the bill counts FlashAttention-2's fused dropout; torch SDPA on CPU keeps
    exactly the stated formula more (traced against the declared fused layer)."""
    require("transformers")
    from symbolic.models.families.base import math_path_gap
    from symbolic.trace import hf_layer_by_difference

    raw = tiny("seed_oss")
    model = hf.from_hf_dict(raw, "t")
    note = next(n for n in model.approximations if n.startswith("attention_dropout = 0.1"))
    s, b = 5, 2
    values = {**model.values(), "L": 1, "s": s, "b": b}
    formula, gap = math_path_gap(model.recipe, values)
    assert formula in note
    from symbolic.models.architectures import composed
    fused = at(activations.total_bytes(composed.saved_tensors(model.recipe, "fused", "cpu")), **values)
    assert hf_layer_by_difference(raw, "sdpa", s, b)[0] - fused == gap
    assert any(n.startswith("residual_dropout = 0.1") for n in model.approximations)


def test_smollm3_states_its_nope_layers():
    model = hf.from_hf_dict(tiny("smollm3", num_hidden_layers=36), "t")
    assert any(n.startswith("9 of the 36 layers have no rotary positions") for n in model.approximations)
    model = hf.from_hf_dict(tiny("smollm3", no_rope_layers=[1, 1, 1, 1]), "t")
    assert not any("no rotary" in n for n in model.approximations)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_smollm3_all_nope_layers(attention):
    """Every layer NoPE (no_rope_layers all 0, as a file may give it): the same layer, to the byte and FLOP."""
    _check(tiny("smollm3", no_rope_layers=[0, 0, 0]), attention, 5, 2)


def test_kimi_k2_is_read_as_the_deepseek_v3_its_architectures_names():
    require("transformers")
    raw = kimi_k2()
    model = hf.from_hf_dict(raw, "kimi")
    assert model.recipe.family == "deepseek_v3"
    assert model.approximations[0].startswith('model_type "kimi_k2" (no transformers module) is read as deepseek_v3')
    assert make_bill(model).totals["params"] == hf_parameter_count(raw) == \
        make_bill(hf.from_hf_dict({**raw, "model_type": "deepseek_v3"}, "v3")).totals["params"]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_kimi_k2_layer_is_traced_as_deepseek_v3(attention):
    """trace builds it as transformers would the remote code's class: HF's DeepseekV3 (q_lora, MoE layer)."""
    _check({key: value for key, value in kimi_k2().items() if key != "auto_map"}, attention, 5, 2)


@pytest.mark.parametrize("architectures", [None, ["KimiK2ForCausalLM"], ["DeepseekV3ForCausalLM", "X"]])
def test_kimi_k2_without_its_architecture_is_refused_in_one_line(architectures, tmp_path, capsys):
    raw = {key: value for key, value in kimi_k2().items() if key != "architectures"}
    if architectures is not None:
        raw["architectures"] = architectures
    with pytest.raises(ConfigError, match='model_type "kimi_k2" is read through its architectures'):
        hf.from_hf_dict(raw, "kimi")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main(["bill", str(path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_arcee_refuses_heads_that_do_not_divide_hidden():
    """ArceeConfig.validate_architecture: hidden_size % num_attention_heads, whatever head_dim."""
    with pytest.raises(ConfigError, match="ArceeConfig.validate_architecture"):
        hf.from_hf_dict(tiny("arcee", hidden_size=54), "t")


def test_xielu_scalars_are_parameters_of_each_layer():
    """Apertus's xIELU: alpha_p and alpha_n, one each per layer (HF counts them; β and ε are buffers)."""
    bill = make_bill(hf.from_hf_dict(tiny("apertus"), "t"))
    lines = {line.name: line.value for line in bill.ledger("params")}
    assert lines["layer/mlp/xielu_alpha_p"] == lines["layer/mlp/xielu_alpha_n"] == 2  # L = 2 layers


@pytest.mark.parametrize("model_type", ["gemma3n", "gemma3n_text"])
def test_gemma3n_is_refused_in_one_line_naming_its_missing_parts(model_type, tmp_path, capsys):
    """Gemma 3n is not modelled: the refusal names the parts it would need (AltUp, LAuReL, per-layer
    embeddings, KV sharing, activation sparsity), never a stand-in."""
    raw = {"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 48, "num_attention_heads": 4,
           "vocab_size": 101}
    if model_type == "gemma3n":
        raw = {"model_type": "gemma3n", "text_config": {**raw, "model_type": "gemma3n_text"}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f'model_type "{model_type}" is not modelled' in err
    assert all(part in err for part in ("AltUp", "LAuReL", "per-layer embeddings", "KV sharing", "sparsity"))


def test_apertus_states_what_the_xielu_cuda_wheel_keeps_instead():
    """The wheel's XIELUAutograd keeps x, alpha_p, alpha_n only: the Python path's 7 bytes per MLP element
    (α_p·x, expm1, the negative branch: 2 each; the mask: 1) fewer, stated per token."""
    from symbolic.models.architectures.parts import xielu_part
    from symbolic.core.dims import b, f, s

    model = hf.from_hf_dict(tiny("apertus"), "t")
    note = next(n for n in model.approximations if n.startswith("xIELU"))
    assert "7·s·b·f bytes per layer fewer" in note and f"({7 * 44:,} B per token per layer)" in note
    per_element = Add(*(t.bytes for t in xielu_part(f).saved if t.shape[-1] == f))
    assert per_element == 7 * s * b * f
