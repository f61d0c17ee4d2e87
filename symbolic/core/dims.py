"""The dimension symbols, declared once.

Every symbol is a positive integer, so sympy can cancel ``h/h`` and compare
expressions exactly. ``Symbol('h')`` and ``Symbol('h', positive=True)`` are
different symbols: import the ones below, never make a second ``h``.

The letters are the papers' (Korthikanti et al. 2022, arXiv 2205.05198, §4;
Narayanan et al. 2021, arXiv 2104.04473, §3):

====  ==========================================================  =========
name  meaning                                                     letter in
====  ==========================================================  =========
s     sequence length (tokens per sample)                          both
b     micro-batch size (samples per micro-batch)                   both
h     hidden size                                                  both
a     attention heads                                              both
L     transformer layers                                           both
V     vocabulary size                                              both
t     tensor-parallel size                                         both
p     pipeline-parallel size                                       both
d     data-parallel size                                           ZeRO (N_d)
f     FFN (MLP) inner width; the GPT layer has f = 4h              this code
m     micro-batches in flight on a pipeline stage                  seed 000 §4
v     model chunks per pipeline stage (interleaved schedule)       Narayanan §2.2.2
Psi   parameter count as ZeRO writes it (Ψ)                        ZeRO §3
g     key/value heads (GQA; Megatron's query groups)               this code
E     routed experts of an MoE layer                               this code
k     experts per token (top-k routing)                            this code
E_s   shared experts of an MoE layer                               this code
f_e   one expert's FFN inner width                                 this code
T_e   tokens routed to one expert (balanced: s b k / E)            this code
e     expert-parallel size (Megatron-Core's EP)                    this code
e_t   expert tensor-parallel size (Megatron-Core's ETP; default t)  this code
C_f   expert capacity/imbalance factor (1 = balanced; rational)    this code
c     context-parallel size (sequence split over c ranks)          Liu et al. 2023; Megatron-LM CP
B     global batch (sequences per iteration); B/(b d) micro-batches Narayanan §3
      per pipeline per iteration
r     LoRA rank                                                    Hu et al. 2021
d_h   width of one attention head when a config gives head_dim     HF ``head_dim``
P     rows of a learned position table (GPT-2 ``n_positions``)     HF ``n_positions``
L_d   dense (non-MoE) layers of an MoE model                       HF ``first_k_dense_replace`` etc.
f_s   FFN width of the shared expert(s), all of them together      HF ``shared_expert_intermediate_size``
r_q   query low-rank width of MLA                                  DeepSeek-V2 §2.1 (d'_c)
r_kv  key/value latent width of MLA                                DeepSeek-V2 §2.1 (d_c)
d_n   per-head Q/K width without rotary positions (MLA)            DeepSeek-V2 §2.1 (d_h)
d_r   per-head Q/K rotary width (MLA, decoupled RoPE)              DeepSeek-V2 §2.1 (d^R_h)
d_v   per-head value width (MLA)                                   HF ``v_head_dim``
L_1   transformer layers on the first pipeline stage (uneven)     Megatron-Core (first/last stage)
L_p   transformer layers on the last pipeline stage (uneven)      Megatron-Core (first/last stage)
L_m   transformer layers on each middle pipeline stage (uneven)  Megatron-Core (get_num_layers_to_build)
L_n   layers without rotary positions (NoPE) of a Llama 4 model    HF ``no_rope_layers``
L_w   layers with sliding-window attention                         HF ``layer_types`` (sliding_attention)
w     keys one query attends to under a sliding window (self too)  HF ``sliding_window``
n_u   AltUp streams of a Gemma 3n model                            HF ``altup_num_inputs``
r_l   LAuReL rank of a Gemma 3n layer                              HF ``laurel_rank``
h_p   per-layer input width of a Gemma 3n model                    HF ``hidden_size_per_layer_input``
V_p   per-layer embedding rows of a Gemma 3n model                 HF ``vocab_size_per_layer_input``
L_kv  layers reusing earlier layers' K and V (Gemma 3n)            HF ``num_kv_shared_layers``
L_sp  layers with Gaussian top-k activation sparsity (Gemma 3n)    HF ``activation_sparsity_pattern``
n_m   Mamba2 heads of a state-space mixer                          HF ``mamba_n_heads``
d_m   width of one Mamba2 head (the mixer's inner width is n_m d_m) HF ``mamba_d_head``
d_s   Mamba2 state size per group                                  HF ``mamba_d_state``
g_m   Mamba2 groups of B and C                                     HF ``mamba_n_groups``
p_c   Mamba2 causal conv1d padding: its kernel is p_c + 1 wide       HF ``mamba_d_conv`` − 1
Q   Mamba2 scan chunk length (s/Q chunks)                      HF ``mamba_chunk_size``
L_s   Mamba (state-space) layers of a hybrid model                 HF ``layer_types``
L_a   attention blocks of a Nemotron-H model (the rest: MLP blocks)  HF ``layer_types``
L_c   short-convolution layers of a hybrid (LFM2)                  HF ``layer_types`` "conv"
K_c   kernel width of a causal depthwise conv1d                    HF ``conv_L_cache``, ``linear_conv_kernel_dim``
L_l   linear-attention (gated DeltaNet) layers of a hybrid         HF ``layer_types`` "linear_attention"
H_k   key (and query) heads of a linear-attention layer            HF ``linear_num_key_heads``
H_v   value heads of a linear-attention layer                      HF ``linear_num_value_heads``
D_k   key (and query) head width of a linear-attention layer       HF ``linear_key_head_dim``
D_v   value head width of a linear-attention layer                 HF ``linear_value_head_dim``
====  ==========================================================  =========

Two letters clash in the sources: seed 000 writes ``m`` for the micro-batches
in flight on a stage, while seed 001 (following Korthikanti §4.2.3) writes
``m`` for the number of interleaved model chunks. Here ``m`` keeps seed 000's
meaning and the interleaved chunks are ``v``, Narayanan et al.'s letter, so the
interleave factor reads ``1 + (p-1)/(p v)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from sympy import Symbol


@dataclass(frozen=True)
class Dimension:
    """A named dimension: its symbol, LaTeX form and meaning."""

    symbol: Symbol
    latex: str
    meaning: str


def _dim(name: str, meaning: str, latex: str | None = None) -> Dimension:
    return Dimension(Symbol(name, positive=True, integer=True), latex or name, meaning)


DIMENSIONS: dict[str, Dimension] = {
    d.symbol.name: d
    for d in (
        _dim("s", "sequence length"),
        _dim("b", "micro-batch size"),
        _dim("h", "hidden size"),
        _dim("a", "attention heads"),
        _dim("L", "transformer layers"),
        _dim("V", "vocabulary size"),
        _dim("t", "tensor-parallel size"),
        _dim("p", "pipeline-parallel size"),
        _dim("d", "data-parallel size"),
        _dim("f", "FFN inner width (GPT: 4h)"),
        _dim("m", "micro-batches in flight on a pipeline stage (seed 000's m)"),
        _dim("v", "model chunks per stage, interleaved schedule (seed 001's m)"),
        _dim("Psi", "parameter count (ZeRO's Psi)", r"\Psi"),
        # Modern architectures (symbolic.models.architectures.llama, .moe):
        _dim("g", "key/value heads (grouped-query attention; g = a is MHA, g = 1 MQA)"),
        _dim("E", "routed experts per MoE layer (N_total counts all of them)"),
        _dim("k", "experts each token is routed to (top-k; N_active counts these)"),
        _dim("E_s", "shared experts per MoE layer (every token goes through them)", "E_{s}"),
        _dim("f_e", "FFN inner width of one expert", "f_{e}"),
        _dim("T_e", "tokens routed to one expert; balanced routing: T_e = s b k / E", "T_{e}"),
        _dim("e", "expert-parallel size (experts split over e GPUs)"),
        # Megatron-Core's expert_tensor_parallel_size (parallel_state.initialize_model_parallel: default tp).
        _dim("e_t", "expert tensor-parallel size (each routed expert's FFN width split over e_t GPUs)", "e_{t}"),
        # Context parallelism (ring attention, Liu et al. 2023, arXiv 2310.01889; Megatron-LM's
        # --context-parallel-size; seed 004 §06.2): each of c ranks holds s/c of every sequence.
        _dim("c", "context-parallel size (each rank holds s/c of the sequence)"),
        # The communication ledger counts calls per iteration: B/(b d) micro-batches per pipeline
        # (Narayanan et al. 2021 §3, their B, b and d).
        _dim("B", "global batch size (sequences per iteration)"),
        # Fine-tuning (Hu et al. 2021, LoRA, arXiv 2106.09685): the adapters' rank.
        _dim("r", "LoRA rank (adapters B·A of r columns on each target weight)"),
        # The model families of symbolic.models.architectures.composed (HF config fields in brackets).
        _dim("d_h", "width of one attention head (head_dim), when not h/a", "d_{h}"),
        _dim("P", "rows of a learned position table (n_positions)"),
        _dim("L_d", "dense (non-MoE) layers of a mixture-of-experts model", "L_{d}"),
        _dim("f_s", "FFN width of the shared expert(s), together", "f_{s}"),
        _dim("r_q", "MLA query low-rank width (q_lora_rank)", "r_{q}"),
        _dim("r_kv", "MLA key/value latent width (kv_lora_rank)", "r_{kv}"),
        _dim("d_n", "MLA per-head Q/K width without RoPE (qk_nope_head_dim)", "d_{n}"),
        _dim("d_r", "MLA per-head rotary Q/K width (qk_rope_head_dim)", "d_{r}"),
        _dim("d_v", "MLA per-head value width (v_head_dim)", "d_{v}"),
    )
}

#: The load of the busiest expert over the balanced s·b·k/E (Megatron-Core's
#: ``moe_expert_capacity_factor`` with drop-and-pad; an imbalance factor without
#: it). Not an integer (1.25 is typical), so declared rational, not integer.
DIMENSIONS["C_f"] = Dimension(Symbol("C_f", positive=True, rational=True), "C_{f}",
                              "expert capacity factor: busiest expert's tokens over the balanced share")

#: Uneven pipeline stages (Megatron-Core's ``num_layers_in_first_pipeline_stage`` /
#: ``num_layers_in_last_pipeline_stage``): the transformer layers of the first stage, the one the
#: bill accounts. L/p when the stages are even; a letter of its own when they are not.
DIMENSIONS["L_1"] = _dim("L_1", "transformer layers on the first pipeline stage (uneven stages; even: L/p)", "L_{1}")
DIMENSIONS["L_p"] = _dim("L_p", "transformer layers on the last pipeline stage (uneven stages; even: L/p)", "L_{p}")
#: The stages between them hold the layers left alike (``get_num_layers_to_build``: "the left over
#: layers must be divisible by left over stages"): L_m = (L − L_1 − L_p)/(p − 2), given as its own
#: letter so that a formula of the middle stage is whole for every p > 2 (and never reads 0/0 at p = 2).
DIMENSIONS["L_m"] = _dim("L_m", "transformer layers on each middle pipeline stage (uneven stages, p > 2; even: L/p)",
                         "L_{m}")

#: Llama 4's layers without rotary positions (``no_rope_layers``, every ``no_rope_layer_interval``-th):
#: their attention keeps the temperature-tuning scales and no qk-norm, unlike the RoPE layers.
DIMENSIONS["L_n"] = _dim("L_n", "layers without rotary positions (NoPE) of a Llama 4 model", "L_{n}")

#: Sliding-window attention (Beltagy et al. 2020, Longformer §3.1; Mistral 7B, Jiang et al. 2023 §2): L_w of the L
#: layers attend, causally, to the w most recent keys, themselves included (HF ``sliding_window_overlay``:
#: kv_idx > q_idx − w); the other L − L_w to every earlier key.
DIMENSIONS["L_w"] = _dim("L_w", "layers with sliding-window attention (HF layer_types' sliding_attention)", "L_{w}")
DIMENSIONS["w"] = _dim("w", "sliding window: the keys one query attends to, itself included (HF sliding_window)")
#: Mamba2 mixers (transformers 5.24.0 models/falcon_h1, granitemoehybrid: ``torch_forward`` and
#: ``mamba2_chunk_scan``): heads, head width, state size, groups, conv kernel, scan chunk; and the hybrids'
#: Mamba layers (a share L_s/L of the layer's terms, as L_d and L_n are).
# p_c is the conv's padding (mamba_d_conv − 1), not its width, so that the conv's s + p_c output positions
# are a sum of positive terms (the timeline needs a layer's bytes so).
for _name, _meaning in (("n_m", "Mamba2 heads of a state-space mixer (mamba_n_heads)"),
                        ("d_m", "width of one Mamba2 head (mamba_d_head)"),
                        ("d_s", "Mamba2 state size per group (mamba_d_state)"),
                        ("g_m", "Mamba2 groups of B and C (mamba_n_groups)"),
                        ("p_c", "Mamba2 conv1d padding, mamba_d_conv - 1"),
                        ("Q", "Mamba2 scan chunk length (mamba_chunk_size)"),
                        ("L_s", "Mamba layers of a hybrid model (layer_types)"),
                        ("L_a", "attention blocks of a Nemotron-H model (layer_types)")):
    DIMENSIONS[_name] = _dim(_name, _meaning, f"{_name[0]}_{{{_name[2:]}}}" if "_" in _name else _name)
#: The layers of a hybrid that are not full attention, one letter per kind (their phrases for the bill:
#: :data:`symbolic.models.layer_kinds.LAYER_KINDS`), and the kernel width of their causal conv1d.
DIMENSIONS["L_c"] = _dim("L_c", "short-convolution layers of a hybrid (LFM2's conv layers)", "L_{c}")
DIMENSIONS["K_c"] = _dim("K_c", "kernel width of a causal depthwise conv1d (LFM2's conv_L_cache, Qwen3-Next's "
                         "linear_conv_kernel_dim)", "K_{c}")
DIMENSIONS["L_l"] = _dim("L_l", "linear-attention layers of a hybrid (Qwen3-Next's gated DeltaNet layers)", "L_{l}")
DIMENSIONS["H_k"] = _dim("H_k", "key (and query) heads of a linear-attention layer", "H_{k}")
DIMENSIONS["H_v"] = _dim("H_v", "value heads of a linear-attention layer", "H_{v}")
DIMENSIONS["D_k"] = _dim("D_k", "key (and query) head width of a linear-attention layer", "D_{k}")
DIMENSIONS["D_v"] = _dim("D_v", "value head width of a linear-attention layer", "D_{v}")

SYMBOLS: dict[str, Symbol] = {name: dim.symbol for name, dim in DIMENSIONS.items()}

s, b, h, a, L, V, t, p, d, f, m, v, Psi = (
    SYMBOLS[n] for n in ("s", "b", "h", "a", "L", "V", "t", "p", "d", "f", "m", "v", "Psi")
)

g, E, k, E_s, f_e, T_e, e = (SYMBOLS[n] for n in ("g", "E", "k", "E_s", "f_e", "T_e", "e"))

c = SYMBOLS["c"]
r = SYMBOLS["r"]

e_t, C_f = SYMBOLS["e_t"], SYMBOLS["C_f"]
B = SYMBOLS["B"]

d_h, P, L_d, f_s, r_q, r_kv, d_n, d_r, d_v = (
    SYMBOLS[n] for n in ("d_h", "P", "L_d", "f_s", "r_q", "r_kv", "d_n", "d_r", "d_v"))
L_1, L_p, L_m = SYMBOLS["L_1"], SYMBOLS["L_p"], SYMBOLS["L_m"]
L_n = SYMBOLS["L_n"]
L_w, w = SYMBOLS["L_w"], SYMBOLS["w"]
n_m, d_m, d_s, g_m, p_c, Q, L_s, L_a = (SYMBOLS[n] for n in ("n_m", "d_m", "d_s", "g_m", "p_c", "Q", "L_s", "L_a"))
L_c, K_c = SYMBOLS["L_c"], SYMBOLS["K_c"]
L_l, H_k, H_v, D_k, D_v = (SYMBOLS[n] for n in ("L_l", "H_k", "H_v", "D_k", "D_v"))

LATEX_NAMES: dict[Symbol, str] = {dim.symbol: dim.latex for dim in DIMENSIONS.values()}

#: Gemma 3n (HF ``gemma3n_text``, issue 40): AltUp's streams, LAuReL's rank, the per-layer inputs' width and
#: vocabulary, and the two per-layer kinds its config names (KV-shared layers; activation-sparse layers).
DIMENSIONS["n_u"] = _dim("n_u", "AltUp streams of a Gemma 3n model (altup_num_inputs)", "n_{u}")
DIMENSIONS["r_l"] = _dim("r_l", "LAuReL rank of a Gemma 3n layer (laurel_rank)", "r_{l}")
DIMENSIONS["h_p"] = _dim("h_p", "per-layer input width of a Gemma 3n model (hidden_size_per_layer_input)", "h_{p}")
DIMENSIONS["V_p"] = _dim("V_p", "per-layer embedding rows of a Gemma 3n model (vocab_size_per_layer_input)", "V_{p}")
DIMENSIONS["L_kv"] = _dim("L_kv", "layers reusing earlier layers' K and V (Gemma 3n num_kv_shared_layers)", "L_{kv}")
DIMENSIONS["L_sp"] = _dim("L_sp", "layers with Gaussian top-k activation sparsity (Gemma 3n)", "L_{sp}")
for _name in ("n_u", "r_l", "h_p", "V_p", "L_kv", "L_sp"):
    SYMBOLS[_name] = DIMENSIONS[_name].symbol
    LATEX_NAMES[DIMENSIONS[_name].symbol] = DIMENSIONS[_name].latex
n_u, r_l, h_p, V_p, L_kv, L_sp = (SYMBOLS[n] for n in ("n_u", "r_l", "h_p", "V_p", "L_kv", "L_sp"))
