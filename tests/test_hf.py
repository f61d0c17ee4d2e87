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
def gpt_only(monkeypatch):
    """The bill itemising the GPT layer only, as before it dispatches on arch."""
    monkeypatch.setattr(bill_module, "BILLED_ARCHITECTURES", ("gpt",))


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
    assert list(PRESETS) == ["gpt-22b", "gpt-175b", "gpt-530b", "gpt-1t", "gpt-7b", "llama-2-7b", "mixtral-8x7b"]


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
    assert (model.arch, model.ffn, model.tied, model.positions, model.approximations) == ("gpt", 0, True, "learned", ())
    assert make_bill(model).totals["params"] == GPT2_PARAMS


def test_llama_fallback_states_every_approximation(gpt_only):
    model = hf.load_hf_config(LLAMA)
    assert (model.name, model.layers, model.hidden, model.heads, model.vocab, model.seq) == \
        ("Llama-2-7b-hf", 32, 4096, 32, 32000, 4096)
    assert (model.arch, model.tied, model.positions) == ("gpt", False, "rope")
    assert model.ffn == 16512  # 3·11008/2: the GeLU width with SwiGLU's weight count
    text = "\n".join(model.approximations)
    assert "not itemised with a 'llama' inventory" in model.approximations[0]
    for feature in ("SwiGLU", "RMSNorm", "biases", "dropout", "rotary"):
        assert feature in text
    assert "grouped-query" not in text  # Llama 2 7B has 32 KV heads: MHA, exact


def test_llama_fallback_params_differ_only_by_the_stated_terms(gpt_only):
    params = make_bill(hf.load_hf_config(LLAMA)).totals["params"]
    assert params == 6_739_865_600
    # Over the published count by exactly the biases and norm biases the notes name:
    # per layer QKV 3h + output h + MLP 3f/2 + h, two norm biases 2h; the final norm bias h.
    h, f, L = 4096, 11008, 32
    assert params - LLAMA2_7B_PARAMS == L * (3 * h + h + 3 * f // 2 + h + 2 * h) + h


def test_mixtral_fallback_counts_every_expert(gpt_only):
    model = hf.load_hf_config(MIXTRAL)
    assert model.ffn == 8 * 3 * 14336 // 2
    text = "\n".join(model.approximations)
    assert "8 experts, top-2" in text and "4× the 2 it uses" in text and "router" in text
    assert "grouped-query attention (8 key/value heads for 32 query heads)" in text
    params = make_bill(model).totals["params"]
    assert params == 47_513_477_120
    # Over the published count by exactly what the notes name: K and V for 32 heads, not 8; the biases
    # (QKV 3h, output h, the dense MLP's 172032 + h) and norm biases (2h per layer, h final); less the
    # router (h × 8 per layer), which is not counted. Model states err on the safe side.
    h, L = 4096, 32
    assert params - MIXTRAL_PARAMS == L * (2 * h * (h - 8 * 128) + 3 * h + h + 172032 + h + 2 * h - 8 * h) + h


def test_native_inventory_is_picked_when_billed(native):
    llama = hf.load_hf_config(LLAMA)
    assert (llama.arch, llama.ffn, llama.mlp, llama.norm, llama.kv_heads, llama.approximations) == \
        ("llama", 11008, "swiglu", "rmsnorm", 0, ())
    mixtral = hf.load_hf_config(MIXTRAL)
    assert (mixtral.arch, mixtral.kv_heads, mixtral.experts, mixtral.experts_per_token, mixtral.expert_ffn,
            mixtral.shared_experts) == ("moe", 8, 8, 2, 14336, 0)
    mistral = hf.load_hf_config(MISTRAL)
    assert mistral.arch == "llama" and len(mistral.approximations) == 1
    assert "sliding-window attention (window 4096)" in mistral.approximations[0]


def test_qwen_moe_shared_expert_width(native):
    raw = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 16, "vocab_size": 151936, "max_position_embeddings": 8192,
           "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
           "num_experts": 60, "num_experts_per_tok": 4}
    model = hf.from_hf_dict(raw, "qwen-moe")
    assert (model.experts, model.experts_per_token, model.expert_ffn, model.shared_experts) == (60, 4, 1408, 4)


def test_unknown_model_type_is_said_first():
    raw = {"model_type": "mystery", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
           "vocab_size": 100, "max_position_embeddings": 32, "intermediate_size": 256}
    model = hf.from_hf_dict(raw, "m")
    assert model.arch == "gpt" and model.ffn == 256 and model.positions == "learned"
    assert model.approximations[0].startswith("model_type 'mystery' is not one this reader knows")


def test_head_dim_mismatch_is_noted():
    raw = json.loads(GPT2.read_text()) | {"head_dim": 128}
    assert "head_dim 128 × 12 heads ≠ hidden_size 768" in hf.from_hf_dict(raw, "g").approximations[0]


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


def test_intermediate_size_required_except_gpt2():
    assert "intermediate_size" in _error(_llama(intermediate_size=None))
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
    mixtral = json.loads(MIXTRAL.read_text())
    del mixtral["num_experts_per_tok"]
    assert "num_experts_per_tok" in _error(mixtral)
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

def test_bill_reads_a_real_config_file_and_its_folder(capsys, gpt_only):
    assert main(["bill", str(LLAMA), "--tp", "8", "--sp", "--micro-batch", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == "Llama-2-7b-hf" and data["params"] == 6_739_865_600
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


def test_attention_bias_flag_narrows_the_bias_note(gpt_only):
    notes = hf.from_hf_dict(_llama(attention_bias=True), "x").approximations
    assert "biases are counted on the MLP linears, which have none in this model" in notes


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
    assert model.arch == {"llama": "llama", "mistral": "llama", "mixtral": "moe", "gpt2": "gpt"}[
        json.loads(path.read_text())["model_type"]]
    text = "\n".join(model.approximations)
    for stand_in in ("grouped-query", "SwiGLU", "RMSNorm", "GPT layer", "dropout", "biases"):
        assert stand_in not in text
    make_bill(model, Layout(tp=4, sp=True))


def test_native_families_still_state_what_they_do_not_model():
    raw = {"model_type": "qwen2_moe", "num_hidden_layers": 24, "hidden_size": 2048, "num_attention_heads": 16,
           "num_key_value_heads": 16, "vocab_size": 151936, "max_position_embeddings": 8192,
           "intermediate_size": 5632, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
           "num_experts": 60, "num_experts_per_tok": 4, "tie_word_embeddings": False}  # Qwen1.5-MoE-A2.7B
    model = hf.from_hf_dict(raw, "qwen-moe")
    assert model.arch == "moe"
    bias, gate, routing = model.approximations
    assert bias.startswith("the biases of the Q, K, V projections are not counted") and "24 × 6,144" in bias
    assert gate.startswith("the shared experts' sigmoid gate") and "24 × 2,048 = 49,152" in gate
    assert "does not renormalise" in routing and "bf16" in routing
    # The stated parameter shortfalls are exactly the missing terms of the published count.
    assert make_bill(model).totals["params"] + 147_456 + 49_152 == 14_315_784_192
    qwen3 = hf.from_hf_dict(_llama(model_type="qwen3", head_dim=128), "q3")
    assert any("QK-norm" in note and "32 × 2 × 128 = 8,192" in note for note in qwen3.approximations)
    biased = hf.from_hf_dict(_llama(attention_bias=True), "x")
    assert biased.arch == "llama" and "Q, K, V and output projections" in biased.approximations[0]


def test_selective_recompute_drops_nothing_from_a_fused_attention_layer():
    """The LLaMA layer's fused kernel saves no attention core: selective recompute keeps the same
    activations and re-runs nothing (the kernel's own Q·Kᵀ recompute stays); GPT's re-runs the core."""
    llama = {r: make_bill(preset("llama-2-7b"), Layout(tp=8, recompute=r)).totals for r in ("none", "selective")}
    assert llama["selective"]["flops_per_iteration"] == llama["none"]["flops_per_iteration"] > \
        llama["none"]["model_flops_per_iteration"]
    assert llama["selective"]["activation_bytes"] == llama["none"]["activation_bytes"]
    gpt = {r: make_bill(preset("gpt-7b"), Layout(tp=8, recompute=r)).totals for r in ("none", "selective")}
    assert gpt["selective"]["flops_per_iteration"] > gpt["none"]["flops_per_iteration"]
