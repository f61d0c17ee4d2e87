"""The families read by their own modules (symbolic.models.families): registered everywhere from one
place, their multipliers stated, what they do not model refused in one line; the structure key."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from _families import tiny
from symbolic.cli import main
from symbolic.models import hf
from symbolic.models.families import READERS


def test_every_registered_family_is_read_listed_and_paged():
    from symbolic.render.latex import FAMILY_PAGES

    paged = {model_type for _, _, model_type, _ in FAMILY_PAGES}
    for model_type, family in READERS.items():
        assert model_type in hf.FAMILIES and model_type in paged
        # Llama 4's and Gemma 3n's text models are in llama4/ and gemma3n/
        folder = {"llama4_text": "llama4", "gemma3n_text": "gemma3n"}.get(model_type, model_type)
        assert family.SOURCE == f"HF transformers 5.24.0 models/{folder}/modeling_{folder}.py"
        model = hf.from_hf_dict(tiny(model_type), "tiny")
        assert model.arch == "composed" and model.recipe.family == model_type


def test_granite_multipliers_are_read_and_stated():
    model = hf.from_hf_dict(tiny("granite"), "tiny")
    note = next(line for line in model.approximations if "multipliers" in line)
    assert "embedding_multiplier = 12, residual_multiplier = 0.22, attention_multiplier = 0.015625, " \
           "logits_scaling = 8" in note and "change no byte" in note


@pytest.mark.parametrize("model_type, field, changes", [
    ("phimoe", "num_experts_per_tok", {"num_experts_per_tok": 3}),
    ("phi", "head_dim", {"qk_layernorm": True, "head_dim": 16}),  # q_layernorm is LayerNorm(h/a): HF fails too
    ("olmoe", "clip_qkv", {"clip_qkv": -1.0}),
    ("gpt_oss", "layer_types", {"layer_types": ["sliding_attention", "chunked_attention"]}),
    ("gpt_oss", "attention_dropout", {"attention_dropout": 0.1}),
    ("glm4_moe", "n_group", {"n_group": 3}),  # the router views the scores as (n_group, E/n_group): 4 experts
    ("dots1", "layer_types", {"layer_types": ["full_attention", "linear_attention"]}),  # a kind dots1 has not
    ("dots1", "n_routed_experts", {"n_routed_experts": None}),  # Dots1Config leaves it None: HF cannot build it
    ("minimax_m2", "router_jitter_noise", {"router_jitter_noise": 0.01}),
    ("ernie4_5_moe", "head_dim", {"head_dim": 15}),  # the interleaved rotary needs an even head width
    ("falcon_h1", "hidden_act", {"hidden_act": "gelu"}),  # the mixer's conv activation too
    ("falcon_h1", "mamba_d_head", {"mamba_d_head": 7}),   # d_m·n_m must be the inner width (HF refuses too)
    ("granitemoehybrid", "layer_types", {"layer_types": ["mamba", "sliding_attention"]}),
    ("granitemoehybrid", "mamba_d_conv", {"mamba_d_conv": 1}),
    ("nemotron_h", "moe", {"layer_types": ["linear_attention", "moe"]}),  # Nemotron-3's MoE blocks: not yet
    ("nemotron_h", "tie_word_embeddings", {"tie_word_embeddings": True}),  # transformers never ties it
])
def test_what_a_family_does_not_model_is_one_line(model_type, field, changes, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny(model_type, **changes)))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and model_type in err


def test_phi_output_layer_keeps_its_bias_when_tied():
    """PhiForCausalLM's lm_head is nn.Linear(h, V, bias=True): tied, its weight is the embedding's,
    its bias of V stays a parameter (the meta-device count agrees: tests/test_families.py)."""
    from symbolic.bill.derive import inventories

    names = inventories(hf.from_hf_dict(tiny("phi", tie_word_embeddings=True), "tiny"))[0].names()
    assert "output/projection_bias" in names and "output/projection_weight" not in names


def test_hybrid_multipliers_and_layer_mix_are_stated():
    """Falcon-H1's µP multipliers (scalars, and ssm_multipliers a buffer, not an activation) and Granite-4.0-H's
    mix of Mamba and attention layers (its letter L_s) are read and stated."""
    falcon = hf.from_hf_dict(tiny("falcon_h1"), "tiny")
    assert any("ssm_in_multiplier = 1.25" in n and "change no byte" in n for n in falcon.approximations)
    assert any("ssm_multipliers" in n and "buffer of 2·d_ssm + 2·g_m·d_s + n_m = 160 elements" in n
               for n in falcon.approximations)
    granite = hf.from_hf_dict(tiny("granitemoehybrid"), "tiny")
    assert dict(granite.dims)["L_s"] == 1 and granite.layers == 2
    assert any(n.startswith("1 Mamba2 + 1 attention layers") for n in granite.approximations)


def test_structure_key_is_the_tuple_it_replaced():
    """The derivation cache and the sheet's page digests read Structure.key(): the old positional tuple."""
    from symbolic.bill.evaluate import layout_structure, structure
    from symbolic.layout.layout import Layout
    from symbolic.models.builtin import preset

    model = preset("qwen3-8b")
    key = structure(model).key()
    assert key == ("composed", True, False, "rope", False, model.recipe.key())
    assert layout_structure(model, Layout(flash_attention=True)).key() == key + ("flash_attention",)
    assert structure(preset("gpt-175b")).key() == ("gpt", False, True, "learned", False)  # ffn 0: 4h


@pytest.mark.parametrize("model_type, needed", [("mamba", "scan part"), ("t5", "encoder stack"),
                                                ("jamba", "scan part"), ("mamba2", "without attention heads")])
def test_an_unmodelled_family_says_what_it_would_need(model_type, needed, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, "num_hidden_layers": 2, "hidden_size": 48,
                                "num_attention_heads": 4, "vocab_size": 101}))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f'model_type "{model_type}" is not modelled' in err and needed in err


def test_the_mla_math_path_note_is_the_traced_gap():
    """DeepSeek's MLA under CPU SDPA (V narrower than Q and K: the math path) keeps more than the fused
    kernel the bill counts; the note's figure is that gap exactly: the traced layer less the declared
    fused one (the gap is linear in b, so the note's b = 1 figure doubles at b = 2)."""
    import re

    from _tracing import at, require
    from symbolic.ledgers import activations
    from symbolic.models.architectures import composed
    from symbolic.trace import hf_layer_by_difference

    require("transformers")
    raw = tiny("deepseek_v3", max_position_embeddings=6, first_k_dense_replace=0)
    model = hf.from_hf_dict(raw, "tiny")
    note = next(line for line in model.approximations if "math path" in line)
    per_layer = int(re.search(r"exact\), ([\d,]+) B per layer at s = 6 ", note).group(1).replace(",", ""))
    values = {**model.values(), "L": 1, "L_d": 0, "s": 6, "b": 2}
    fused = at(activations.total_bytes(composed.saved_tensors(model.recipe, "fused", "cpu")), **values)
    assert hf_layer_by_difference(raw, "sdpa", 6, 2)[0] - fused == 2 * per_layer


def test_phimoe_router_keeps_what_sparsemixer_keeps():
    """Phi-3.5-MoE's sparsemixer keeps, per token, two bool masks and two softmaxes over E (bf16), the two
    sampled experts (int64) and their multipliers (bf16): 6E + 20 bytes beside the router's input; with
    input_jitter_noise the two noise tensors of the router's input, 4h more (traced:
    tests/test_family_traces.py)."""
    from symbolic.ledgers import activations
    from symbolic.models.architectures import composed
    from _tracing import at

    def router_bytes(raw):
        model = hf.from_hf_dict(raw, "tiny")
        saved = composed.saved_tensors(model.recipe, "fused", "cpu")
        terms = [t for t in saved if t.name.startswith("moe/") and not t.name.startswith("moe/expert/")
                 and t.name != "moe/router_input"]
        return at(activations.total_bytes(type(saved)(tuple(terms))), **{**model.values(), "s": 1, "b": 1, "L": 1})

    assert router_bytes(tiny("phimoe")) == 6 * 4 + 20
    assert router_bytes(tiny("phimoe", input_jitter_noise=0.01)) == 6 * 4 + 20 + 4 * 48


def test_llama4_reads_its_layer_kinds_and_its_text_config():
    """Llama 4 Scout's dimensions at Llama4TextConfig's defaults: 107,769,861,120 parameters, transformers'
    meta-device count (every layer MoE with a shared expert; every fourth layer NoPE: L_n = 12); Maverick's
    interleave (every second layer MoE) gives L_d dense layers of width intermediate_size_mlp; the multimodal
    ``llama4`` config is read through its text_config, the vision tower stated as not counted."""
    from symbolic.bill.derive import make_bill

    scout = {"model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120, "num_attention_heads": 40,
             "vocab_size": 202048}
    model = hf.from_hf_dict(scout, "scout")
    assert dict(model.dims) == {"L_n": 12, "f_s": 8192} and model.ffn == 16384 and model.expert_ffn == 8192
    assert make_bill(model).totals["params"] == 107_769_861_120
    assert dict(hf.from_hf_dict({**scout, "interleave_moe_layer_step": 2}, "m").dims)["L_d"] == 24
    wrapped = hf.from_hf_dict({"model_type": "llama4", "text_config": scout}, "scout")
    assert make_bill(wrapped).totals["params"] == 107_769_861_120
    assert any("vision tower" in note for note in wrapped.approximations)


@pytest.mark.parametrize("changes, field", [
    ({"moe_layers": [0, 9]}, "moe_layers"), ({"no_rope_layers": [1, 0]}, "no_rope_layers"),
    ({"attention_dropout": 0.1}, "attention_dropout"), ({"num_experts_per_tok": 4}, "num_experts_per_tok")])
def test_llama4_bad_layer_fields_are_one_line(changes, field, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny("llama4_text", **changes)))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err


def test_llama4_without_text_config_is_one_line(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama4", "vision_config": {}}))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "text_config" in err


def test_falcon_alibi_states_its_one_mask_per_model():
    """ALiBi adds no parameter; its bias, folded into one (b, a, s, s) bf16 mask per step that every layer's SDPA
    keeps (modeling_falcon.py:740-775), is stated with its size, 2·a·b·s² bytes (traced: the first layer keeps
    it, the others share it, tests/test_family_traces.py)."""
    model = hf.from_hf_dict(tiny("falcon", alibi=True), "tiny")
    assert model.recipe.alibi and not hf.from_hf_dict(tiny("falcon"), "tiny").recipe.alibi
    note = next(line for line in model.approximations if line.startswith("alibi:"))
    assert f"{2 * 4 * 64 * 64:,} B at s = 64" in note and "2·a·b·s² bytes once per model" in note


def test_sigmoid_routers_state_their_correction_bias_and_ungrouped_files():
    """GLM-4.5's, dots.llm1's and MiniMax-M2's e_score_correction_bias is a buffer (not counted), stated;
    ERNIE-4.5's moe_statics is a parameter HF counts (E per MoE layer); a dots1 file with n_group null, which
    HF's router cannot run, is billed as one group and says so."""
    from symbolic.bill.derive import inventories

    for model_type in ("glm4_moe", "dots1", "minimax_m2"):
        model = hf.from_hf_dict(tiny(model_type), "tiny")
        assert any("e_score_correction_bias" in note and "buffer" in note for note in model.approximations)
    ernie = hf.from_hf_dict(tiny("ernie4_5_moe"), "tiny")
    assert "layer/moe/router_correction_bias" in inventories(ernie)[0].names()
    raw = tiny("dots1")
    raw.update(n_group=None, topk_group=None)
    assert any(note.startswith("n_group / topk_group null") for note in hf.from_hf_dict(raw, "d").approximations)
def test_a_mamba_layer_on_a_gpu_is_the_fused_kernels_inventory():
    """On a GPU backend the mixer is what mamba-ssm's MambaSplitConv1dScanCombinedFn keeps (ssd_combined.py:888
    at e9594ce): in_proj's input (its nn.Linear) and output (zxbcdt), the scan's output, A and exp(A_log) — and the
    gated norm's fp32 rstd when there is one; on CPU the torch path the tests trace."""
    from symbolic.models.architectures import composed

    for model_type, rstd in (("falcon_h1", False), ("granitemoehybrid", True)):
        recipe = hf.from_hf_dict(tiny(model_type), "tiny").recipe
        gpu = {t.name for t in composed.saved_tensors(recipe, "fused", "cuda") if t.name.startswith("mamba/")}
        assert gpu == {"mamba/in_proj_input", "mamba/in_proj_output", "mamba/scan_output", "mamba/A", "mamba/A_exp",
                       *(("mamba/norm_rstd",) if rstd else ())}
        cpu = {t.name for t in composed.saved_tensors(recipe, "fused", "cpu") if t.name.startswith("mamba/")}
        assert len(cpu) > 25 and "mamba/decay_L" in cpu


def test_the_timeline_refuses_a_mamba_attention_mix(tmp_path, capsys):
    """A hybrid's layer inventory is its Mamba and attention layers' average (shares L_s/L): the timeline, which
    walks layer by layer, refuses it in one line; a hybrid whose every layer has both (Falcon-H1) it walks."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny("granitemoehybrid")))
    assert main(["timeline", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Mamba layers" in err
    path.write_text(json.dumps(tiny("falcon_h1")))
    assert main(["timeline", str(path), "--seq", "8"]) == 0


@pytest.mark.parametrize("model, mix", [
    ("granite-4.0-h-tiny", "36 Mamba2 + 4 full-attention layers"),
    ("Nemotron-H-8B-Base-8K", "24 Mamba2 + 4 attention + 24 MLP blocks"),
    ("Falcon-H1-0.5B-Base", "36 layers of Mamba2 and attention in parallel"),
    ("Qwen3-Next-80B-A3B-Instruct", "36 linear-attention + 12 full-attention layers"),
])
def test_a_hybrids_layer_mix_is_in_the_bills_first_lines(model, mix, tmp_path, capsys):
    """Issue 40: the hybrids' layer mix in the bill's first lines (models.layer_kinds), Mamba2 ones too."""
    published = json.loads((Path(__file__).parent / "fixtures" / "families" / "published.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(published["models"][model]["config"]))
    assert main(["bill", str(path), "--brief"]) == 0
    assert f"layer mix: {mix}" in "\n".join(capsys.readouterr().out.splitlines()[:4])
