"""HF config.json input and the built-in models (symbolic.models.hf)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from symbolic.models import config as bill_module  # where BILLED_ARCHITECTURES lives
from symbolic.models import hf
from symbolic.models.architectures import ARCHITECTURES
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.layout.layout import Layout
from symbolic.models.config import ConfigError
from symbolic.models.builtin import PRESETS, preset

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
LLAMA = FIXTURES / "Llama-2-7b-hf" / "config.json"
MIXTRAL = FIXTURES / "Mixtral-8x7B-v0.1" / "config.json"
MISTRAL = FIXTURES / "Mistral-7B-v0.1" / "config.json"
GPT2 = FIXTURES / "gpt2" / "config.json"

#: Published parameter counts (the models' cards / HF safetensors metadata).
LLAMA2_7B_PARAMS = 6_738_415_616
MIXTRAL_PARAMS = 46_702_792_704
GPT2_PARAMS = 124_439_808


@pytest.fixture
def native(monkeypatch):
    """The bill itemising the llama and moe inventories."""
    monkeypatch.setitem(ARCHITECTURES, "llama", ARCHITECTURES.get("llama", object()))
    monkeypatch.setitem(ARCHITECTURES, "moe", ARCHITECTURES.get("moe", object()))
    monkeypatch.setattr(bill_module, "BILLED_ARCHITECTURES", ("gpt", "llama", "moe"))


# --- built-in models ---------------------------------------------------------

TABLE3 = "Korthikanti et al. 2022 Table 3"


@pytest.mark.parametrize("name, numbers, source, label", [
    ("gpt-22b", (48, 6144, 64, 51200, 2048), TABLE3, "22B"),
    ("gpt-175b", (96, 12288, 96, 51200, 2048), TABLE3 + " (GPT-3)", "175B"),
    ("gpt-530b", (105, 20480, 128, 51200, 2048), TABLE3 + " (MT-NLG)", "530B"),
    ("gpt-1t", (128, 25600, 160, 51200, 2048), TABLE3, "1T"),
    ("gpt-7b", (32, 4096, 32, 51200, 4096), "seed 001 §1 7B example (V not stated: 51200 assumed)", "7B"),
])
def test_presets_from_data_files_keep_their_numbers(name, numbers, source, label):
    model = preset(name)
    assert (model.layers, model.hidden, model.heads, model.vocab, model.seq) == numbers
    assert (model.ffn, model.tied, model.positions, model.arch, model.approximations) == (0, True, "learned", "gpt", ())
    assert (model.source, model.params_label) == (source, label)
    assert PRESETS[name] is model


def test_builtin_list_and_order():
    assert list(PRESETS) == ["gpt-22b", "gpt-175b", "gpt-530b", "gpt-1t", "gpt-7b", "llama-2-7b", "mixtral-8x7b",
                             "llama-3-8b", "llama-3.1-70b", "llama-3.1-405b", "qwen3-8b", "qwen3-30b-a3b",
                             "mixtral-8x22b", "gemma-2-9b", "deepseek-v3"]


def test_builtin_llama_and_mixtral_match_the_public_files():
    """The shipped data files are the public config.json files plus a name."""
    for name, path in (("llama-2-7b", LLAMA), ("mixtral-8x7b", MIXTRAL)):
        shipped = json.loads((hf.DATA / f"{name}.json").read_text())
        public = json.loads(path.read_text())
        shipped.pop("_symbolic")
        public.pop("transformers_version")
        assert shipped == public
        assert preset(name).layers == 32 and preset(name).hidden == 4096


def test_gpt7b_bill_unchanged():
    bill = make_bill(preset("gpt-7b"), Layout(micro_batch=4, tp=8, sp=True), params_hand=7 * 10**9)
    assert bill.totals["model_states_bytes"] == 14 * 10**9
    assert bill.totals["activation_bytes"] == 52_076_478_464
    assert bill.totals["params"] == 6_670_655_488


# --- real HF files -------------------------------------------------------------

def test_gpt2_file_is_the_gpt_layer_exactly():
    model = hf.load_hf_config(GPT2)
    assert (model.name, model.layers, model.hidden, model.heads, model.vocab, model.seq) == \
        ("gpt2", 12, 768, 12, 50257, 1024)
    assert (model.arch, model.ffn, model.tied, model.positions, model.mlp) == ("gpt", 0, True, "learned", "gelu_new")
    # the one thing HF's eager layer keeps that a b-symbolic inventory cannot: Q's view at b = 1
    assert len(model.approximations) == 1 and model.approximations[0].startswith("at micro-batch 1")
    assert make_bill(model).totals["params"] == GPT2_PARAMS


def test_native_inventory_is_picked_when_billed(native):
    llama = hf.load_hf_config(LLAMA)
    assert (llama.arch, llama.ffn, llama.mlp, llama.norm, llama.kv_heads, llama.approximations) == \
        ("llama", 11008, "swiglu", "rmsnorm", 0, ())
    mixtral = hf.load_hf_config(MIXTRAL)
    assert (mixtral.arch, mixtral.kv_heads, mixtral.experts, mixtral.experts_per_token, mixtral.expert_ffn,
            mixtral.shared_experts) == ("moe", 8, 8, 2, 14336, 0)
    mistral = hf.load_hf_config(MISTRAL)  # its window priced: a composed layer with L_w windowed layers of w keys
    assert mistral.arch == "composed" and mistral.recipe.window and len(mistral.approximations) == 1
    assert dict(mistral.dims) == {"L_w": 32, "w": 4096}
    assert "sliding-window attention (w = 4,096) on all 32 layers" in mistral.approximations[0]


def test_qwen_moe_shared_expert_width(native):
    raw = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 16, "vocab_size": 151936, "max_position_embeddings": 8192,
           "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
           "num_experts": 60, "num_experts_per_tok": 4}
    model = hf.from_hf_dict(raw, "qwen-moe")
    assert (model.experts, model.experts_per_token, model.expert_ffn, model.shared_experts) == (60, 4, 1408, 4)


def test_unknown_model_type_is_refused_with_the_known_ones():
    """No GPT fallback: an unknown family is one line naming the known model types."""
    raw = {"model_type": "mystery", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
           "vocab_size": 100, "max_position_embeddings": 32, "intermediate_size": 256}
    message = _error(raw)
    assert message.startswith('cfg.json: model_type "mystery" is not a family this version models exactly')
    assert "known: gpt2, gpt_neox, llama, mistral, mixtral, qwen2, qwen2_moe, qwen3" in message
    assert "(none)" in _error({k: v for k, v in raw.items() if k != "model_type"})


def test_gpt2_ignores_head_dim_and_llama_models_it():
    """GPT-2's attention has no head_dim field; Llama's uses it (q: h -> a·head_dim)."""
    raw = json.loads(GPT2.read_text()) | {"head_dim": 128}
    assert hf.from_hf_dict(raw, "g").approximations == hf.load_hf_config(GPT2).approximations
    llama = hf.from_hf_dict(_llama(head_dim=96), "x")
    assert (llama.arch, dict(llama.dims), llama.approximations) == ("composed", {"d_h": 96}, ())
    # q, k, v, o each h × 32·96 instead of h × 4096, per layer: 4·4096·(3072 − 4096)
    assert make_bill(llama).totals["params"] - LLAMA2_7B_PARAMS == 32 * 4 * 4096 * (3072 - 4096)


# --- bad configs: one line naming the field ------------------------------------

def _error(raw) -> str:
    with pytest.raises(ConfigError) as info:
        hf.from_hf_dict(raw, "x", where="cfg.json")
    message = str(info.value)
    assert "\n" not in message
    return message


def _llama(**changes):
    raw = json.loads(LLAMA.read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    return raw


def test_missing_fields_are_named_together():
    message = _error(_llama(vocab_size=None, hidden_size=None))
    assert message.startswith("cfg.json: missing required field(s) hidden_size, vocab_size")


def test_absent_fields_take_the_family_defaults_of_transformers():
    """intermediate_size absent: LlamaConfig's 11008; tie_word_embeddings absent: untied for Llama."""
    assert hf.from_hf_dict(_llama(intermediate_size=None), "x").ffn == 11008
    assert hf.from_hf_dict(_llama(tie_word_embeddings=None), "x").tied is False
    assert hf.load_hf_config(GPT2).ffn == 0  # GPT-2's n_inner null means 4h


@pytest.mark.parametrize("field, value, shown", [
    ("hidden_size", 4096.5, "4096.5"), ("num_hidden_layers", 0, "0"), ("num_attention_heads", -32, "-32"),
    ("vocab_size", "32000", '"32000"'), ("max_position_embeddings", True, "true"),
    ("num_key_value_heads", 0, "0"),
])
def test_bad_numbers_name_the_field(field, value, shown):
    assert _error(_llama(**{field: value})) == f"cfg.json: {field} must be a positive integer, got {shown}"


def test_other_bad_fields():
    assert "num_key_value_heads (5) must divide num_attention_heads (32)" in _error(_llama(num_key_value_heads=5))
    assert "tie_word_embeddings must be true or false" in _error(_llama(tie_word_embeddings="no"))
    assert "num_attention_heads (30) must divide hidden_size (4096)" in _error(_llama(num_attention_heads=30))
    mixtral = json.loads(MIXTRAL.read_text()) | {"num_experts_per_tok": 9}
    assert "num_experts_per_tok (9) exceeds the number of experts (8)" in _error(mixtral)
    assert "not list" in _error([1, 2])


def test_bad_files_one_line(tmp_path, capsys):
    broken = tmp_path / "config.json"
    broken.write_text('{"hidden_size": 4096,,}')
    for path, expected in ((broken, "not valid JSON"), (tmp_path / "none.json", "no such file")):
        assert main(["bill", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and expected in err and str(path) in err
    assert main(["bill", "not-a-model"]) == 2
    assert "or a path to an HF config.json" in capsys.readouterr().err


# --- through the CLI -----------------------------------------------------------

def test_bill_reads_a_real_config_file_and_its_folder(capsys):
    assert main(["bill", str(LLAMA), "--tp", "8", "--sp", "--micro-batch", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "Llama-2-7b-hf" and data["params"] == LLAMA2_7B_PARAMS
    assert data["approximations"] == list(hf.load_hf_config(LLAMA).approximations)
    assert main(["bill", str(LLAMA.parent), "--tp", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "Llama-2-7b-hf"


def test_bill_builtin_mixtral_by_name(capsys):
    assert main(["bill", "mixtral-8x7b", "--tp", "8", "--pp", "4", "--seq", "4096", "--sp",
                 "--recompute", "selective", "--gpu-memory", "80GB"]) == 0
    out = capsys.readouterr().out
    assert "mixtral-8x7b" in out and "MEMORY PER GPU" in out
    if "moe" not in bill_module.BILLED_ARCHITECTURES:
        assert "APPROXIMATIONS" in out


# --- billed natively -------------------------------------------------------------

def test_llama2_7b_billed_natively_to_the_published_count(capsys):
    for model in (preset("llama-2-7b"), hf.load_hf_config(LLAMA)):
        assert (model.arch, model.approximations) == ("llama", ())
        assert make_bill(model).totals["params"] == LLAMA2_7B_PARAMS
    assert main(["bill", str(LLAMA), "--tp", "8", "--sp", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["params"], data["approximations"]) == (LLAMA2_7B_PARAMS, [])
    assert "layer/mlp/gate_weight" in [line["name"] for line in data["lines"]]  # SwiGLU's third matrix


def test_mixtral_states_hold_n_total_and_flops_scale_with_n_active():
    model = preset("mixtral-8x7b")
    layout = Layout(seq=4096, micro_batch=2, tp=8, pp=4, dp=2, sp=True, global_batch=16)
    bill = make_bill(model, layout)
    totals = bill.totals
    assert totals["params"] == MIXTRAL_PARAMS
    assert totals["params_active"] == 12_879_925_248  # 2 of 8 experts: Mixtral's "13B active"
    assert totals["model_states_bytes"] == 16 * MIXTRAL_PARAMS // (8 * 4)  # bf16-adam over t·p, N_total
    # Model FLOPs = 6 × tokens × the active weights every token multiplies by (N_active less the
    # embedding lookup and the norm weights), + the attention scores and context (4·2bs²h per layer).
    h, V, L, s, b = 4096, 32000, 32, 4096, 2
    tokens = totals["tokens_per_iteration"]
    attention = 3 * 2 * 2 * b * s * s * h * L * (tokens // (b * s))
    assert totals["model_flops_per_iteration"] - attention == 6 * tokens * (totals["params_active"] - V * h
                                                                          - (2 * L + 1) * h)


@pytest.mark.parametrize("path", [LLAMA, MIXTRAL, MISTRAL, GPT2])
def test_fixture_configs_are_billed_natively(path):
    model = hf.load_hf_config(path)
    assert model.arch == {"llama": "llama", "mistral": "composed", "mixtral": "moe", "gpt2": "gpt"}[
        json.loads(path.read_text())["model_type"]]
    text = "\n".join(model.approximations)
    for stand_in in ("grouped-query", "SwiGLU", "RMSNorm", "GPT layer", "dropout", "biases"):
        assert stand_in not in text
    make_bill(model, Layout(tp=4, sp=True))


def test_qwen_families_are_composed_exactly():
    """Qwen2-MoE's Q/K/V biases and shared-expert gate, Qwen3's QK-norm: counted, not noted."""
    raw = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 16, "vocab_size": 151936, "max_position_embeddings": 8192,
           "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
           "num_experts": 60, "num_experts_per_tok": 4, "tie_word_embeddings": False}  # Qwen1.5-MoE-A2.7B
    model = hf.from_hf_dict(raw, "qwen-moe")
    assert (model.arch, model.approximations) == ("composed", ())
    assert (model.recipe.qkv_bias, model.recipe.shared_gate, dict(model.dims)) == (True, True, {"f_s": 5632})
    assert make_bill(model).totals["params"] == 14_315_784_192
    qwen3 = hf.from_hf_dict(_llama(model_type="qwen3", head_dim=128), "q3")
    assert qwen3.recipe.qk_norm == "head" and qwen3.approximations == ()
    lines = {line.name: line.value for line in make_bill(qwen3).ledger("params")}
    assert lines["layer/attention/query_norm_weight"] == lines["layer/attention/key_norm_weight"] == 32 * 128
    biased = hf.from_hf_dict(_llama(attention_bias=True), "x")
    assert biased.arch == "composed" and biased.approximations == ()
    assert make_bill(biased).totals["params"] - LLAMA2_7B_PARAMS == 32 * 4 * 4096  # q, k, v, o biases


def test_selective_recompute_drops_nothing_from_a_fused_attention_layer():
    """The LLaMA layer's fused kernel saves no attention core: selective recompute keeps the same
    activations and re-runs nothing (the kernel's own Q·Kᵀ recompute stays); GPT's re-runs the core."""
    llama = {r: make_bill(preset("llama-2-7b"), Layout(tp=8, recompute=r)).totals for r in ("none", "selective")}
    assert llama["selective"]["flops_per_iteration"] == llama["none"]["flops_per_iteration"] > \
        llama["none"]["model_flops_per_iteration"]
    assert llama["selective"]["activation_bytes"] == llama["none"]["activation_bytes"]
    gpt = {r: make_bill(preset("gpt-7b"), Layout(tp=8, recompute=r)).totals for r in ("none", "selective")}
    assert gpt["selective"]["flops_per_iteration"] > gpt["none"]["flops_per_iteration"]
