"""Every family's declared layer against the real HF decoder layer, to the byte and the FLOP.

One layer is measured as the model with L + 1 layers less the model with L (the embeddings,
rotary tables, masks, final norm and loss cancel), at two dimension sets per family, with HF's
sdpa and eager attention where the family has both (Gemma-2 and gpt-oss have eager only; GPT-2 is declared
for eager). What the layer saves: ``symbolic.trace`` (storages autograd still holds when the
forward returns); FLOPs: FlopCounterMode, CPU SDPA's gap filled by torch's own formula.
"""
from __future__ import annotations

import pytest
from sympy import Add

from _families import SECOND, declared_layer, tiny
from _tracing import at, require
from symbolic.ledgers import activations
from symbolic.models import hf

ATTENTION = {family: ("eager",) if family in ("gemma2", "gpt2", "gpt_oss") else ("sdpa", "eager")
             for family in hf.FAMILIES}

#: (s, b) of the two dimension sets; a Mamba2 scan is exact at s a multiple of its chunk with two chunks or more
#: (models.families.falcon_h1.chunk_note): its families are traced at such lengths.
SCAN_POINTS = {"falcon_h1": ((8, 2), (9, 3)), "granitemoehybrid": ((8, 2), (9, 3)), "bamba": ((8, 2), (9, 3)),
               "nemotron_h": ((8, 2), (9, 3))}
POINTS = {family: SCAN_POINTS.get(family, ((5, 2), (7, 3))) for family in hf.FAMILIES}

CASES = [(family, attention, dims) for family in hf.FAMILIES for attention in ATTENTION[family]
         for dims in ("first", "second")]


def _config(family: str, dims: str, **changes) -> dict:
    raw = tiny(family, **(SECOND[family] if dims == "second" else {}))
    if family in ("deepseek_v2", "deepseek_v3"):
        raw["first_k_dense_replace"] = 0  # the measured (last) layer is an MoE layer
    if family == "qwen2_moe":
        raw["mlp_only_layers"] = []
    if family == "llama4_text":
        raw["moe_layers"] = None  # every layer MoE: the measured (second) layer is an MoE RoPE layer
    raw.update(changes)
    return {key: value for key, value in raw.items() if value is not None or key == "q_lora_rank"}


def _check(raw: dict, attention: str, s: int, b: int, layers: int = 1, dense: bool = False, nope: bool = False):
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    saved, layer, extra, values = declared_layer(raw, attention, dense=dense, nope=nope, seq=s)
    values.update(s=s, b=b)
    want = (at(activations.total_bytes(saved), **values),
            at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b, layers) == want


# The two dimension sets as two classes: pytest-xdist's --dist loadscope (scripts/test) hands each class
# to a worker of its own, where one module would keep this file, the suite's longest, on one worker.
class TestFirstDimensions:
    @pytest.mark.parametrize("family, attention", [(f, a) for f, a, dims in CASES if dims == "first"])
    def test_declared_layer_equals_the_traced_hf_layer(self, family, attention):
        _check(_config(family, "first"), attention, *POINTS[family][0])


class TestSecondDimensions:
    @pytest.mark.parametrize("family, attention", [(f, a) for f, a, dims in CASES if dims == "second"])
    def test_declared_layer_equals_the_traced_hf_layer(self, family, attention):
        _check(_config(family, "second"), attention, *POINTS[family][1])


#: the fields that make the measured (second) layer dense, per family with dense layers
DENSE_SECOND_LAYER = {"deepseek_v3": {"first_k_dense_replace": 2}, "qwen2_moe": {"mlp_only_layers": [1]},
                      "glm4_moe": {"first_k_dense_replace": 2}, "dots1": {"first_k_dense_replace": 2},
                      "ernie4_5_moe": {"moe_layer_start_index": 2}}


@pytest.mark.parametrize("family", list(DENSE_SECOND_LAYER))
def test_dense_layers_of_an_moe_model(family):
    """The dense layer of a dense-first (or mlp_only) MoE model: the inventory at L_d = L."""
    changes = DENSE_SECOND_LAYER[family]
    _check(_config(family, "first", **changes), "eager", 5, 2, layers=1, dense=True)


@pytest.mark.parametrize("family, changes", [
    ("gpt_neox", {"hidden_act": "gelu_fast", "use_parallel_residual": False}),
    ("gpt2", {"activation_function": "gelu"}),
    ("llama", {"attention_bias": True, "mlp_bias": True, "head_dim": 10}),
    ("mixtral", {"head_dim": 10}),
    ("qwen2_moe", {"shared_expert_intermediate_size": 0}),
    ("qwen3_moe", {"num_experts": 0}),  # every layer the dense MLP (Qwen3MoeDecoderLayer: num_experts > 0 and ...)
    ("deepseek_v3", {"norm_topk_prob": False}),
    ("deepseek_v3", {"norm_topk_prob": False, "n_shared_experts": 0}),  # a 0-wide shared MLP, run as HF runs it
    ("deepseek_v2", {"topk_method": "group_limited_greedy", "n_group": 2, "topk_group": 1, "q_lora_rank": 14}),
    ("falcon", {"multi_query": False, "parallel_attn": False, "bias": True}),
    ("stablelm", {"use_parallel_residual": True}),
    ("glm4_moe", {"n_shared_experts": 0, "norm_topk_prob": False, "use_qk_norm": True}),
    ("ernie4_5_moe", {"moe_num_shared_experts": 0}),  # nothing keeps the block's bf16 input: the router's is fp32
    ("ernie4_5_moe", {"moe_layer_interval": 2, "use_bias": True}),
    # no head_dim and a ∤ h (GLM-4.5's defaults: 96 heads over 4096): heads of h // a, floored, as HF builds them
    ("glm4_moe", {"head_dim": None, "hidden_size": 50}),
    ("ernie4_5_moe", {"head_dim": None, "hidden_size": 50}),
])
def test_variants(family, changes):
    _check(_config(family, "first", **changes), "eager", 6, 2)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("family, dims, changes", [
    ("phi", "first", {"qk_layernorm": True}),
    ("phi", "second", {"qk_layernorm": True, "head_dim": None, "partial_rotary_factor": 0.4}),
    ("stablelm", "second", {"qk_layernorm": True}),
    ("cohere", "first", {"use_qk_norm": True}),  # Command R+: CohereLayerNorm((heads, d_h)) in fp32, no bias
    ("cohere", "second", {"use_qk_norm": True}),
])
def test_per_head_qk_layernorm(family, dims, changes, attention):
    """Phi's qk_layernorm (one LayerNorm of width h/a over every head) and StableLM's
    (StableLmLayerNormPerHead: a LayerNorm per head, split and cat): each keeps its input and the per-head
    mean and rstd, to the byte; parameters as the meta-device model counts them. (OLMoE's clip_qkv is in
    the second dimension set: SECOND.)"""
    from _families import hf_parameter_count
    from symbolic.bill.derive import make_bill

    raw = _config(family, dims, **changes)
    assert make_bill(hf.from_hf_dict(raw, "tiny")).totals["params"] == hf_parameter_count(raw)
    _check(raw, attention, *((5, 2) if dims == "first" else (7, 3)))


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims, changes", [
    ("first", {}),                                                         # multi_query: SDPA's math path
    ("first", {"multi_query": False, "bias": True}),                       # K a view of the fused output
    ("second", {}),                                                        # new_decoder_architecture
    ("second", {"new_decoder_architecture": False, "multi_query": False, "num_kv_heads": None}),
])
def test_falcon_alibi(dims, changes, attention):
    """Falcon with ALiBi (no rotary): the layer HF builds, to the byte and FLOP; its (b, a, s, s) mask is one per
    model (not a layer's), and a multi-head layer's K reaches SDPA as a view of the fused Q|K|V output."""
    from _families import hf_parameter_count
    from symbolic.bill.derive import make_bill

    raw = _config("falcon", dims, alibi=True, **changes)
    assert make_bill(hf.from_hf_dict(raw, "tiny")).totals["params"] == hf_parameter_count(raw)
    _check(raw, attention, *((5, 2) if dims == "first" else (7, 3)))


@pytest.mark.parametrize("family", hf.FAMILIES)
def test_full_recompute_keeps_what_checkpointing_keeps(family):
    """Under torch.utils.checkpoint a layer keeps its input as it arrives, bf16 (2sbh) — not its
    first norm's fp32 copy — and the declared full-recompute inventory says the same."""
    require("transformers")
    from symbolic.layout.strategies import Strategy
    from symbolic.trace import hf_layer_by_difference

    raw = _config(family, "first")
    attention = ATTENTION[family][0]
    saved, _, _, values = declared_layer(raw, attention)
    kept = activations.layer_inventory(Strategy(recompute="full"), saved)
    values.update(s=5, b=2, t=1)
    traced = hf_layer_by_difference(raw, attention, 5, 2, checkpointing=True)[0]
    if family == "gemma3n_text":  # its input is n_u streams, and its slice of the model-level per-layer inputs
        assert traced == at(activations.total_bytes(kept), **values) == \
            (2 * values["n_u"] * values["h"] + 10 * values["h_p"] + 8) * 5 * 2
        return
    assert traced == at(activations.total_bytes(kept), **values) == 2 * 5 * 2 * values["h"]


def test_gpt2_at_micro_batch_one_keeps_the_whole_qkv_output():
    """The bill's stated GPT-2 exception: at b = 1 the eager layer keeps c_attn's 6sh bytes where Q's
    2sh are declared (the batched matmul's reshape of a slice is a view only then): 4sh more."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("gpt2", "first")
    saved, _, _, values = declared_layer(raw, "eager")
    values.update(s=6, b=1)
    traced = hf_layer_by_difference(raw, "eager", 6, 1)[0]
    assert traced - at(activations.total_bytes(saved), **values) == 4 * 6 * values["h"]


@pytest.mark.parametrize("family", ["qwen3", "deepseek_v3"])
def test_trace_command_measures_any_family(family, tmp_path, capsys):
    """`symbolic trace --hf` on a family outside the fitted four: the layer by difference, per (s, b)."""
    require("transformers")
    import json

    from symbolic.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config(family, "first", first_k_dense_replace=2) if family == "deepseek_v3"
                               else _config(family, "first")))  # deepseek: the measured layer is dense
    assert main(["trace", "--hf", str(path), "--attention", "eager", "--seqs", "4", "--batches", "1,2"]) == 0
    out = capsys.readouterr().out
    assert "measured as the model of L + 1 layers less L" in out and "b in [2]" in out
    assert out.strip().endswith("traced == declared at every point")


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("window", [3, 16])
def test_dots1_sliding_layers_are_full_attention_but_for_the_stated_sdpa_gap(attention, window):
    """dots1's sliding layers (i >= max_window_layers): HF masks them, so the layer is full attention's to the
    byte and FLOP — eager at any s, SDPA for s ≤ window; beyond it SDPA keeps K and V copied to a heads and a
    (b, 1, s, s) bf16 mask per sliding layer, 4·s·b·(a − g)·d_h + 2·b·s² bytes, the size the bill states."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("dots1", "first", max_window_layers=1, sliding_window=window, first_k_dense_replace=0)
    model = hf.from_hf_dict(raw, "tiny")
    assert any(note.startswith("1 of the 2 layers use a sliding window") for note in model.approximations)
    a, g, d = 4, 2, 20
    for s, b in ((6, 2), (7, 3)):
        saved, layer, extra, values = declared_layer(raw, attention)
        values.update(s=s, b=b)
        gap = 4 * s * b * (a - g) * d + 2 * b * s * s if attention == "sdpa" and s > window else 0
        want = (at(activations.total_bytes(saved), **values) + gap,
                at(Add(*(mm.forward_flops for mm in layer)), **values),
                at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
        assert hf_layer_by_difference(raw, attention, s, b, 1) == want


@pytest.mark.parametrize("family, changes", [
    ("ernie4_5_moe", {}),                          # moe_layer_end_index saved resolved (1): layer 1 is MoE
    ("ernie4_5_moe", {"moe_layer_start_index": 2}),  # no MoE layer in either model: the dense layer
    ("glm4_moe", {"first_k_dense_replace": 2}),
])
def test_trace_command_on_moe_files_as_transformers_saves_them(family, changes, tmp_path, capsys):
    """`symbolic trace --hf` on a two-layer file as transformers 5.24.0 writes it (ERNIE-4.5's end index -1
    resolved to the file's last layer): the measured (second) layer's kind is the one the bill declares."""
    require("transformers")
    import json

    from transformers import AutoConfig

    from symbolic.cli import main

    raw = tiny(family, **changes)
    AutoConfig.for_model(raw.pop("model_type"), **raw).save_pretrained(tmp_path)
    assert main(["trace", "--hf", str(tmp_path / "config.json"), "--attention", "eager", "--seqs", "4",
                 "--batches", "2"]) == 0
    assert capsys.readouterr().out.strip().endswith("traced == declared at every point")


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims, changes, dense, nope", [
    ("first", {"moe_layers": [0]}, True, False),  # the measured layer (index 1) has the dense MLP of width f
    ("first", {"moe_layers": None, "no_rope_layer_interval": 2}, False, True),  # index 1 is NoPE: temperature
    ("second", {"moe_layers": [0], "no_rope_layers": [1, 0, 1, 1]}, True, True),  # dense and NoPE
    ("second", {"use_qk_norm": False, "attn_temperature_tuning": False, "no_rope_layer_interval": 2}, False, True),
    ("first", {"moe_layers": None, "use_qk_norm": False}, False, False),
])
def test_llama4_layer_kinds(attention, dims, changes, dense, nope):
    """Llama 4's layers by index: the dense layer (L_d = L), the NoPE layer with temperature tuning and no
    qk-norm (L_n = L), both, and the flags off — each to the byte and the FLOP of the traced layer."""
    s, b = (5, 2) if dims == "first" else (7, 3)
    _check(_config("llama4_text", dims, **changes), attention, s, b, dense=dense, nope=nope)


def test_llama4_chunked_sdpa_gap_is_the_stated_size():
    """From s = attention_chunk_size on, HF's SDPA path on a RoPE layer copies K and V to a heads and keeps
    a (b, 1, s, s) bf16 mask: traced, exactly the 4·s·b·(a − g)·d_h + 2·b·s² bytes the reader's note states
    it leaves out; eager attention stays exact."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("llama4_text", "first", attention_chunk_size=4)
    note = next(n for n in hf.from_hf_dict(raw, "t").approximations if n.startswith("chunked attention"))
    assert "exact for s < 4" in note and "4·s·b·(a − g)·d_h + 2·b·s²" in note
    s, b, a, g, d = 5, 2, 4, 2, 20
    saved, _, _, values = declared_layer(raw, "sdpa")
    declared = at(activations.total_bytes(saved), **{**values, "s": s, "b": b})
    assert hf_layer_by_difference(raw, "sdpa", s, b)[0] - declared == 4 * s * b * (a - g) * d + 2 * b * s * s
    _check(raw, "eager", s, b)


@pytest.mark.parametrize("dims", ["first", "second"])
def test_gpt_oss_sliding_layer_is_a_full_layer_on_the_traced_path(dims):
    """gpt-oss's measured layer a sliding one (layer_types), its window shorter than s: HF applies the window as a
    mask, so it keeps and multiplies what the full layer does — the declared layer, to the byte and the FLOP."""
    s, b = (5, 2) if dims == "first" else (7, 3)
    raw = _config("gpt_oss", dims, sliding_window=2, layer_types=["full_attention", "sliding_attention"])
    _check(raw, "eager", s, b)


def test_gpt_oss_eager_attention_gap_is_the_stated_size():
    """The bill counts the fused kernel (FlashAttention-4 with a learnable sink); HF's eager path keeps more, by
    exactly the 4·s·b·(a − g)·d_h + 2·b·a·s·(s + 1) + 4·b·a·s bytes the reader's note states (the eager inventory
    is the traced layer: the tests above)."""
    raw = _config("gpt_oss", "second")
    note = next(n for n in hf.from_hf_dict(raw, "t").approximations if n.startswith("attention is billed"))
    assert "4·s·b·(a − g)·d_h + 2·b·a·s·(s + 1) + 4·b·a·s" in note
    s, b, a, g, d = 7, 3, 6, 3, 10
    totals = {}
    for attention in ("eager", "sdpa"):
        saved, _, _, values = declared_layer(raw, attention)
        totals[attention] = at(activations.total_bytes(saved), **{**values, "s": s, "b": b})
    assert totals["eager"] - totals["sdpa"] == 4 * s * b * (a - g) * d + 2 * b * a * s * (s + 1) + 4 * b * a * s


def test_gpt_oss_grouped_mm_experts_gap_is_the_stated_size():
    """transformers' default experts_implementation, grouped_mm, keeps (2·h − 16)·s·b·k − 4·E bytes fewer per
    layer than the eager loop the bill counts (four int64 indices per token-expert pair, not two; no index_add_
    input), as the reader's note states. (Widths whose rows are multiples of 16 bytes: CPU grouped_mm needs them.)"""
    require("transformers")
    import torch

    from symbolic.trace import hf_model, trace_module

    raw = _config("gpt_oss", "first", intermediate_size=24)
    note = next(n for n in hf.from_hf_dict(raw, "t").approximations if n.startswith("the experts are billed"))
    assert "(2·h − 16)·s·b·k − 4·E bytes per layer fewer" in note
    s, b, h, k, experts = 5, 2, 56, 2, 4
    layer = {}
    for implementation in ("eager", "grouped_mm"):
        measured = []
        for n in (1, 2):
            model = hf_model(raw, "eager", layers=n)
            model.set_experts_implementation(implementation)
            torch.manual_seed(1)
            ids = torch.randint(0, model.config.vocab_size, (b, s))
            measured.append(trace_module(model, (), {"input_ids": ids}, count_flops=False,
                                         output=lambda out: out.logits.float().sum()).saved_bytes)
        layer[implementation] = measured[1] - measured[0]
    assert layer["eager"] - layer["grouped_mm"] == (2 * h - 16) * s * b * k - 4 * experts


@pytest.mark.parametrize("attention, refusal", [
    ("sdpa", "does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention"),
    ("flex_attention", "Attention sinks cannot be run on CPU with flex attention"),
])
def test_gpt_oss_runs_eager_only_on_cpu(attention, refusal):
    """Why gpt_oss is traced with eager attention only: transformers 5.24.0 refuses SDPA for it
    (GptOssPreTrainedModel._supports_sdpa = False) and its flex path refuses sinks on CPU."""
    require("transformers")
    import torch

    from symbolic.trace import hf_model

    with pytest.raises(ValueError, match=refusal):
        model = hf_model(tiny("gpt_oss"), attention, layers=1)
        model(input_ids=torch.zeros(1, 4, dtype=torch.long))


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims, changes, layers, mamba", [
    ("first", {"layer_types": ["attention", "mamba", "attention"]}, 2, False),   # MoE, no rotary
    ("second", {"layer_types": ["attention", "mamba", "attention"]}, 2, False),  # the shared MLP alone, rotary
    ("first", {"layer_types": None}, 1, True),                                  # every layer Mamba (the default)
    ("first", {"num_local_experts": 0, "mamba_proj_bias": True}, 1, True),      # a Mamba layer, no experts
])
def test_granitemoehybrid_layer_kinds(attention, dims, changes, layers, mamba):
    """Granite-4.0-H's layers by kind: an attention layer (L_s = 0: measured after an attention layer, so the
    rotary tables one attention layer keeps per model cancel) and a Mamba layer (L_s = L), with and without
    experts, to the byte and the FLOP."""
    from _families import hf_parameter_count
    from symbolic.bill.derive import make_bill

    raw = _config("granitemoehybrid", dims, **changes)  # (layer_types None: left out, every layer Mamba)
    raw["num_hidden_layers"] = layers + 1
    assert make_bill(hf.from_hf_dict(raw, "tiny")).totals["params"] == hf_parameter_count(raw)
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    s, b = POINTS["granitemoehybrid"][0 if dims == "first" else 1]
    saved, layer, extra, values = declared_layer(raw, attention)
    assert values["L_s"] == (1 if mamba else 0)
    values.update(s=s, b=b)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b, layers) == want


@pytest.mark.parametrize("changes", [
    {"mamba_rms_norm": True, "mamba_norm_before_gate": True},   # RMSNorm(y)·silu(z), in fp32
    {"mamba_d_ssm": None, "mamba_expand": 2, "mamba_n_heads": 12, "mamba_n_groups": 1},  # inner width 2h
])
def test_falcon_h1_mixer_variants(changes):
    """Falcon-H1's gated RMSNorm before the gate, and its mixer's inner width from mamba_expand."""
    raw = _config("falcon_h1", "first")
    raw.update(changes)
    _check(raw, "sdpa", 12, 2)


def test_one_scan_chunk_gap_is_the_stated_size():
    """With one chunk (s = Q) two of the scan's einsum operands are views, not copies: traced, the layer
    keeps exactly the 4·b·n_m·d_m·(s − d_s) bytes fewer than billed that the reader's note states."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("falcon_h1", "first")
    note = next(n for n in hf.from_hf_dict(raw, "t").approximations if n.startswith("the Mamba2 scan"))
    assert "4·b·n_m·d_m·(s − d_s) bytes fewer" in note
    s, b, heads, head, state = 4, 2, 8, 8, 6  # Q = 4
    saved, _, _, values = declared_layer(raw, "sdpa")
    declared = at(activations.total_bytes(saved), **{**values, "s": s, "b": b})
    assert declared - hf_layer_by_difference(raw, "sdpa", s, b)[0] == 4 * b * heads * head * (s - state)


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims", ["first", "second"])
def test_bamba_attention_layer(dims, attention):
    """Bamba's attention layer (L_s = 0), measured after another (its rotary tables cancel): half-rotary heads
    rebuilt by cat, to the byte and the FLOP."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("bamba", dims, attn_layer_indices=[0, 2], num_hidden_layers=3)
    s, b = POINTS["bamba"][0 if dims == "first" else 1]
    saved, layer, extra, values = declared_layer(raw, attention)
    assert values["L_s"] == 0
    values.update(s=s, b=b)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b, 2) == want


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("dims, kinds, attention_block", [
    ("first", ["linear_attention", "mlp"], False),                           # an MLP block (relu², up and down)
    ("second", ["full_attention", "mlp", "full_attention"], True),           # an attention block, no rotary
    ("second", ["mlp", "linear_attention"], False),                          # a Mamba block
])
def test_nemotron_h_block_kinds(dims, kinds, attention_block, attention):
    """Nemotron-H's blocks, one per layer: Mamba (L_s = L), attention (L_a = L) or MLP (both 0), each after its
    NemotronHRMSNorm (fp32 x·rstd times the weight's fp32 copy), to the byte and the FLOP."""
    require("transformers")
    from symbolic.trace import hf_layer_by_difference

    raw = _config("nemotron_h", dims, layer_types=kinds, num_hidden_layers=len(kinds))
    s, b = POINTS["nemotron_h"][0 if dims == "first" else 1]
    saved, layer, extra, values = declared_layer(raw, attention)
    assert (values["L_s"], values["L_a"]) == ((1 if kinds[-1] == "linear_attention" else 0), int(attention_block))
    values.update(s=s, b=b)
    want = (at(activations.total_bytes(saved), **values), at(Add(*(mm.forward_flops for mm in layer)), **values),
            at(Add(*(mm.backward_flops for mm in layer)) + extra, **values))
    assert hf_layer_by_difference(raw, attention, s, b, len(kinds) - 1) == want
