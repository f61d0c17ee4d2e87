"""Every model family the reader knows: transformers' defaults, and parameter counts equal to
``sum(p.numel())`` of the model transformers 5.24.0 builds on the meta device — for tiny random
configs made here and for the published dimensions of real models (tests/fixtures/families)."""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pytest

from _families import TINY, hf_parameter_count, random_config, tiny
from _tracing import require
from symbolic.bill.derive import make_bill
from symbolic.cli import main
from symbolic.layout.layout import Layout
from symbolic.models import hf
from symbolic.models.families import READERS
from symbolic.models.builtin import preset
from symbolic.models.config import ConfigError

PUBLISHED = json.loads((Path(__file__).parent / "fixtures" / "families" / "published.json").read_text())["models"]


def test_every_family_has_a_tiny_config_and_the_reader_lists_them():
    # the sixteen read by symbolic.models.hf itself, and those read by a module of their own
    assert set(TINY) == set(hf.FAMILIES) and len(hf.FAMILIES) == 16 + len(READERS)


@pytest.mark.parametrize("model_type", hf.FAMILIES)
def test_defaults_are_transformers_defaults(model_type):
    """The reader's default for each field is the installed config class's dataclass default."""
    require("transformers")
    from transformers import CONFIG_MAPPING

    declared = {f.name: f for f in dataclasses.fields(CONFIG_MAPPING[model_type])}
    for key, value in hf.DEFAULTS[model_type].items():
        assert key in declared, (model_type, key)
        field = declared[key]
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        assert default == value, (model_type, key, default, value)


@pytest.mark.parametrize("model_type", hf.FAMILIES)
def test_parameter_count_equals_transformers_on_tiny_random_configs(model_type):
    require("transformers")
    rng = random.Random(model_type)  # a fixed draw per family
    for raw in [tiny(model_type)] + [random_config(model_type, rng) for _ in range(4)]:
        model = hf.from_hf_dict(raw, "tiny")
        assert make_bill(model).totals["params"] == hf_parameter_count(raw), raw


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_of_published_configs(name, tmp_path, capsys):
    """`bill CONFIG.json --json` params = transformers' count of the config, as the installed transformers builds
    it and as scripts/published-counts stored it (``transformers_params``: transformers' count, not the hub's),
    and = the published count where one is given."""
    require("transformers")
    entry = PUBLISHED[name]
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(entry["config"]))
    assert main(["bill", str(path), "--json"]) == 0
    params = json.loads(capsys.readouterr().out)["params"]
    assert params == entry["transformers_params"] == hf_parameter_count(entry["config"])
    if entry["published"] is not None:
        assert params == entry["published"]


@pytest.mark.parametrize("name, published, active", [
    ("llama-3-8b", 8_030_261_248, None),
    ("llama-3.1-70b", 70_553_706_496, None),
    ("llama-3.1-405b", 405_853_388_800, None),
    ("qwen3-8b", 8_190_735_360, None),
    ("qwen3-30b-a3b", 30_532_122_624, 3_353_032_704),     # "30.5B, 3.3B activated"
    ("mixtral-8x22b", 140_620_634_112, 39_152_031_744),   # "141B, 39B active"
    ("gemma-2-9b", 9_241_705_984, None),
    ("deepseek-v3", 671_026_404_352, 37_552_282_624),     # "671B, 37B activated", HF without MTP
])
def test_builtin_models_match_their_published_counts(name, published, active):
    totals = make_bill(preset(name)).totals
    assert totals["params"] == published
    assert totals.get("params_active") == active


def test_deepseek_v3_mtp_and_router_buffer_are_stated_apart():
    model = preset("deepseek-v3")
    mtp = next(note for note in model.approximations if note.startswith("multi-token prediction"))
    # One MoE decoder layer (MLA 187,107,328 + MoE 11,328,798,720 + 2 norms) and eh_proj 2h·h + three norms.
    h = 7168
    layer = (h * 1536 + 1536 + 1536 * 128 * 192 + h * 576 + 512 + 512 * 128 * 256 + 128 * 128 * h) \
        + (h * 256 + 256 * 3 * h * 2048 + 3 * h * 2048) + 2 * h
    assert f"each module adds {layer + 2 * h * h + 3 * h:,} parameters" in mtp
    assert f"{2 * 129280 * h:,} more" in mtp  # its embedding and head copies in the checkpoint
    assert any("e_score_correction_bias (256 per MoE layer, 58 × 256 = 14,848 values)" in note
               for note in model.approximations)
    # the released checkpoint: HF's 671,026,404,352 + the buffers + one MTP module with its copies ≈ 685B
    total = 671_026_404_352 + 14_848 + layer + 2 * h * h + 3 * h + 2 * 129280 * h
    assert 684e9 < total < 686e9


def test_unknown_model_type_is_one_line_exit_2(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(tiny("llama") | {"model_type": "bloom"}))
    assert main(["bill", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and '"bloom" is not a family' in err and "deepseek_v3" in err


def test_learned_position_table_has_n_positions_rows_and_bounds_seq(tmp_path, capsys):
    """GPT-2's wpe is n_positions × h whatever the training sequence; a longer --seq is refused."""
    raw = tiny("gpt2")
    model = hf.from_hf_dict(raw, "g")
    assert make_bill(model, Layout(seq=16)).totals["params"] == make_bill(model).totals["params"]
    lines = {line.name: line.value for line in make_bill(model, Layout(seq=16)).ledger("params")}
    assert lines["embedding/position"] == 40 * 48
    with pytest.raises(ConfigError, match=r"seq \(41\) exceeds the learned position table of g \(40 rows"):
        make_bill(model, Layout(seq=41))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert main(["bill", str(path), "--seq", "2048"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    # The papers' GPT models size the table by s (Narayanan Eq 2: (V + s)h): any --seq, as before.
    assert make_bill(preset("gpt-7b"), Layout(seq=8192)).totals["params"] > make_bill(preset("gpt-7b")).totals["params"]


def test_untied_is_the_default_where_transformers_unties():
    """A Mixtral-8x22B config without tie_word_embeddings is untied (MixtralConfig's default)."""
    raw = dict(PUBLISHED["Mixtral-8x22B-v0.1"]["config"])
    del raw["tie_word_embeddings"]
    assert make_bill(hf.from_hf_dict(raw, "m")).totals["params"] == 140_620_634_112
    gemma = dict(PUBLISHED["gemma-2-9b"]["config"])
    assert "tie_word_embeddings" not in gemma and hf.from_hf_dict(gemma, "g").tied is True  # Gemma ties


def test_mla_and_dense_first_layers_are_in_their_own_letters():
    model = preset("deepseek-v3")
    assert dict(model.dims) == {"L_d": 3, "d_n": 128, "d_r": 64, "d_v": 128, "f_s": 2048, "r_kv": 512, "r_q": 1536}
    lines = {line.name: line.formula for line in make_bill(model).ledger("params")}
    assert lines["layer/attention/kv_b_weight"] == "L*a*r_kv*(d_n + d_v)"
    assert lines["layer/moe/experts_gate_up_weight"] == "2*E*f_e*h*(L - L_d)"
    assert lines["layer/mlp/gate_weight"] == "L_d*f*h"



def test_derive_prints_a_composed_layer_in_its_own_letters(capsys):
    """`derive activations --model deepseek-v3`: the MLA layer with r_q, r_kv, d_n, d_r, d_v and L_d,
    equal to the bill's activation lines summed."""
    from sympy import expand

    from symbolic.core.dims import SYMBOLS
    from symbolic.core.expressions import parse_formula

    assert main(["derive", "activations", "--model", "deepseek-v3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    expr = parse_formula(data["expr"], SYMBOLS)
    assert {"r_q", "r_kv", "d_n", "d_r", "d_v", "L_d", "f_s"} <= {str(x) for x in expr.free_symbols}
    bill = make_bill(preset("deepseek-v3"), Layout(seq=4096))
    values = {SYMBOLS[k]: v for k, v in bill.values.items()}
    assert expand(expr.subs(values)) * 61 == bill.totals["activation_bytes"]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_configs_as_transformers_saves_them(name, tmp_path):
    """A published config after a ``save_pretrained`` round trip (every field written out as transformers 5.24.0
    stores it: Qwen2-MoE's ``"sliding_window": 0`` for no window, Falcon's ``num_kv_heads`` filled in) is billed
    to the same count as the file itself."""
    require("transformers")
    from transformers import AutoConfig

    entry = PUBLISHED[name]
    raw = dict(entry["config"])
    model_type = hf.family_of(raw)  # Kimi-K2's kimi_k2: transformers builds (and saves) it as deepseek_v3
    for key in ("_symbolic", "architectures", "transformers_version", "torch_dtype", "dtype", "auto_map", "model_type"):
        raw.pop(key, None)
    AutoConfig.for_model(model_type, **raw).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert make_bill(hf.load_hf_config(tmp_path / "config.json")).totals["params"] == entry["transformers_params"], \
        {key: saved.get(key) for key in ("sliding_window", "use_sliding_window")}


def saved_as_transformers(model_type: str, **changes) -> dict:
    """``tiny(model_type, **changes)`` as transformers 5.24.0 writes it (``AutoConfig.for_model(...).to_dict()``:
    every field, the derived ones filled in)."""
    from transformers import AutoConfig

    fields = tiny(model_type, **changes)
    fields.pop("model_type")
    return {**AutoConfig.for_model(model_type, **fields).to_dict(), "model_type": model_type}


@pytest.mark.parametrize("model_type, changes", [
    # FalconAttention: 3h wide QKV without multi_query or new_decoder_architecture, num_kv_heads unread there
    ("falcon", {"multi_query": False, "num_kv_heads": 2}),
    ("falcon", {"multi_query": False, "num_kv_heads": 2, "parallel_attn": False, "bias": True}),
    # DeepseekV3DecoderLayer: MoE iff layer_idx >= first_k_dense_replace; past L, every layer dense
    ("deepseek_v3", {"first_k_dense_replace": 5}),
    ("deepseek_v2", {"first_k_dense_replace": 4}),
    # shared_experts = MLP(moe_intermediate_size * n_shared_experts): 0 wide, no parameters
    ("deepseek_v3", {"n_shared_experts": 0}),
    ("deepseek_v2", {"n_shared_experts": 0}),
    # Qwen3MoeDecoderLayer / Qwen2MoeDecoderLayer: MoE iff num_experts > 0 and ...: none, every layer dense
    ("qwen3_moe", {"num_experts": 0}),
    ("qwen2_moe", {"num_experts": 0, "mlp_only_layers": None}),
    # CohereAttention's q_norm, k_norm: CohereLayerNorm((heads, head_dim)), a·d_h and g·d_h weights
    ("cohere", {"use_qk_norm": True}),
    ("cohere", {"use_qk_norm": True, "num_key_value_heads": 1, "head_dim": 10}),
    # Falcon's alibi: no rotary, no parameters (build_alibi_tensor makes a buffer-free bias)
    ("falcon", {"alibi": True}),
    ("falcon", {"alibi": True, "new_decoder_architecture": True, "num_kv_heads": 2}),
    # the four MoE families of issue 40: every layer dense (a first_k_dense_replace or start index past L), no
    # shared expert, no head_dim with a ∤ h (heads of h // a, as GLM-4.5's defaults build them)
    ("glm4_moe", {"first_k_dense_replace": 5, "n_shared_experts": 0}),
    ("glm4_moe", {"head_dim": None, "hidden_size": 50}),
    ("dots1", {"first_k_dense_replace": 4, "attention_bias": True}),
    ("ernie4_5_moe", {"moe_layer_start_index": 3, "use_bias": True}),
    ("ernie4_5_moe", {"moe_num_shared_experts": 0, "moe_layer_interval": 2, "head_dim": None, "hidden_size": 50}),
    ("minimax_m2", {"rotary_dim": 10, "partial_rotary_factor": None}),
])
def test_configs_as_transformers_saves_them_count_as_it_builds_them(model_type, changes):
    """Issue 40: configs transformers accepts, as it saves them, billed to its meta-device count."""
    require("transformers")
    raw = saved_as_transformers(model_type, **changes)
    assert make_bill(hf.from_hf_dict(raw, "tiny")).totals["params"] == hf_parameter_count(raw), changes


def test_falcon_num_kv_heads_without_multi_query_is_stated():
    """num_kv_heads ≠ a with neither multi_query nor new_decoder_architecture: HF builds every head's K and V
    (modeling_falcon.py:235) and its forward fails reshaping them into num_kv_heads heads (:320): billed as
    built, the failure stated."""
    model = hf.from_hf_dict(tiny("falcon", multi_query=False, num_kv_heads=2), "tiny")
    assert model.kv_heads == 0  # = a: multi-head attention
    assert any(note.startswith("num_kv_heads = 2 with multi_query false") and "fails" in note
               for note in model.approximations)
    assert not any("num_kv_heads" in note for note in hf.from_hf_dict(tiny("falcon", multi_query=False),
                                                                       "tiny").approximations)


def test_deepseek_with_every_layer_dense_has_no_router_buffer():
    """first_k_dense_replace past the layer count: every layer dense, stated so, no e_score_correction_bias."""
    model = hf.from_hf_dict(tiny("deepseek_v3", first_k_dense_replace=5), "tiny")
    assert dict(model.dims)["L_d"] == 3
    assert any(note.startswith("3 of the 3 layers (the first 3) have a dense MLP") for note in model.approximations)
    assert not any("e_score_correction_bias" in note for note in model.approximations)


@pytest.mark.parametrize("model_type", ["qwen2_moe", "qwen3_moe"])
def test_qwen_moe_without_experts_is_the_dense_model(model_type):
    """num_experts 0: every layer HF builds is the dense MLP, so the bill is a dense model's (no expert levers),
    and says why; a negative count is still one line."""
    model = hf.from_hf_dict(tiny(model_type, num_experts=0), "tiny")
    assert model.experts == 0 and model.recipe.moe == "none"
    assert any(note.startswith("num_experts = 0: HF builds every one of the") for note in model.approximations)
    with pytest.raises(ConfigError, match="num_experts must be a positive integer, got -1"):
        hf.from_hf_dict(tiny(model_type, num_experts=-1), "tiny")
