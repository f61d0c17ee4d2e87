"""The token mixers that are not attention (issue 40): the Mamba2 mixer (Falcon-H1, Granite-4.0-H, Bamba,
Nemotron-H), LFM2's short convolution, Qwen3-Next's gated DeltaNet and gated attention, each with its traced
torch path and the CUDA kernel's saved tensors. Re-exported by :mod:`.parts`, so a recipe reads them as
``parts.NAME``."""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer

from ...core.dims import a, b, h, s
from ...core.tensors import Axis, Group, Matmul, SavedTensor
from .conventions import Conventions
from .parts import HF, Part, _linear, _linear_params, _split, _tokens, _weight


# --- state-space (Mamba2) mixers -----------------------------------------------------

#: Where the Mamba2 mixer's terms are read from: the torch reference path transformers runs when
#: mamba_ssm and causal_conv1d are absent (CPU), the same in falcon_h1 and granitemoehybrid.
MAMBA_SOURCE = (f"{HF} models/falcon_h1/modeling_falcon_h1.py:669-825 (FalconH1Mixer.forward, torch path), "
                ":473-586 (mamba2_chunk_scan), :310-327 (segment_sum); Dao & Gu 2024 §6 (SSD, Mamba-2)")

#: The gated norms of a Mamba2 mixer's output y (fp32 from the scan) with the gate z (a bf16 slice of
#: in_proj's output): ``silu`` y·silu(z), no norm (FalconH1 ``mamba_rms_norm`` false); ``norm_gate``
#: RMSNorm(y)·silu(z) (FalconH1RMSNormGated, norm_before_gate); ``gate_norm`` RMSNorm(y·silu(z))
#: (FalconH1RMSNormGated, not norm_before_gate; GraniteMoeHybridRMSNormGated, whose cast back to its input's
#: dtype is to y's, fp32), both in fp32 with the weight applied in fp32.
MAMBA_GATES = ("silu", "norm_gate", "gate_norm")


#: The CUDA kernel HF's Mamba2 mixers call in training when ``mamba_ssm`` and ``causal_conv1d`` are installed
#: and no cache is passed (``use_cache`` false, or gradient checkpointing, which turns it off).
MAMBA_KERNEL_SOURCE = ("mamba-ssm e9594ce mamba_ssm/ops/triton/ssd_combined.py:822-899 "
                       "(MambaSplitConv1dScanCombinedFn: ctx.save_for_backward at :888); causal-conv1d 0d2252d "
                       "causal_conv1d/causal_conv1d_interface.py:59; HF falcon_h1 modeling_falcon_h1.py:694-721")


def mamba2_mixer(gate: str = "silu", in_bias: bool = False, conv_bias: bool = True, out_bias: bool = False,
                 share: Expr = Integer(1), source: str = MAMBA_SOURCE, kernel: str = "torch") -> Part:
    """A Mamba2 mixer (SSD: Dao & Gu 2024) as transformers 5.24.0 runs it without the CUDA kernels
    (``torch_forward``: FalconH1Mixer, GraniteMoeHybridMambaLayer; the chunked scan
    ``mamba2_chunk_scan``), in its letters: n_m heads of width d_m (inner width I = n_m·d_m), g_m
    groups of B and C with state d_s, a depthwise causal conv1d of p_c + 1 taps (padding p_c) over the
    C = I + 2·g_m·d_s channels of x|B|C, the scan in s/Q chunks of Q tokens.

    Parameters: in_proj h → 2I + 2·g_m·d_s + n_m (z | x B C | dt, ``in_bias``), conv1d C×(p_c + 1)
    (``conv_bias``: C), dt_bias, A_log and D (n_m each), the gated norm's weight I (not for
    ``silu``), out_proj I → h (``out_bias``).

    Saved (traced, 2 layers less 1): in_proj's input; in_proj's whole output (the conv's input is a
    transposed slice of it, silu(z) reads another); the conv's output before the causal slice,
    (b, C, s + p_c), kept by the activation; dt + dt_bias (softplus) and softplus's output
    (the clamp to time_step_limit); in fp32: the D-skip's padded x, dt twice (x·dt and A·dt each
    upcast), x, the decay L = exp(segsum) (b, n_m, s/Q, Q, Q), the einsums' contiguous operand
    copies (bmm), G = C·Bᵀ per chunk, the chunk-boundary states (s/Q + 1 of them, d_m·d_s per
    head, a copy for the recurrence and one of the first s/Q for C·states), the decays, C·states;
    A = −exp(A_log) twice (n_m, fp32) and four bool masks of segment_sum ((Q, Q) twice and
    (s/Q + 1)² twice): per layer, not per token; then the gated norm (``gate``, see
    :data:`MAMBA_GATES`) and out_proj's input.

    Condition: s a multiple of Q with at least two chunks (s ≥ 2·Q). Otherwise HF pads the scan
    to ⌈s/Q⌉·Q tokens, and with one chunk the einsums take two operands as views (not copies):
    the bill's family reader states that.

    ``kernel="fused"``: what the CUDA kernel keeps instead (mamba-ssm's MambaSplitConv1dScanCombinedFn,
    :data:`MAMBA_KERNEL_SOURCE`: conv, scan, gated norm and out_proj in one autograd Function): in_proj's
    input (HF's nn.Linear, outside it) and, by the Function, in_proj's whole output zxbcdt, the scan's
    output before the gate (bf16), the gated RMSNorm's fp32 rstd per group (not for ``silu``) and A; the
    conv's output, the scan's intermediates and out_proj's input are recomputed in backward. Its
    matmuls are the torch path's (the kernel passes the chunk states elementwise, not by the
    (s/Q + 1)²·d_m·d_s einsum: 6·b·n_m·(s/Q + 1)²·d_m·d_s FLOPs per layer fewer, not followed).

    FLOPs as FlopCounterMode counts them: in_proj, out_proj,
    the conv 2·b·(s + p_c)·(p_c + 1)·C (its backward twice that: the input's gradient and the weight's;
    torch 2.13's formula ignores ``groups`` for the weight's, see ``symbolic.trace.cpu_sdpa_flops``),
    and the scan's five einsums (bmm).
    """
    from ...core.dims import d_m, d_s, g_m, p_c, n_m, Q
    if gate not in MAMBA_GATES:
        raise ValueError(f"Mamba2 gate must be one of {MAMBA_GATES}, not {gate!r}")
    inner = n_m * d_m
    groups = g_m * d_s
    channels = inner + 2 * groups
    chunks = s / Q
    projection = 2 * inner + 2 * groups + n_m

    def layer_term(name, shape, dtype, note):  # per layer, not per token
        shape = tuple(shape) if share == 1 else (share, *shape)
        return SavedTensor(name, shape, dtype, Axis.NONE, None, Group.BODY, source, note)

    def tokens(name, last, dtype, note):  # per token, split across the heads (tensor-parallel)
        return _split(name, last, dtype, note, source, share)

    params = (*_linear_params("mamba/in_proj", h, projection, in_bias, source, "z | x B C | dt", share),
              _weight("mamba/conv1d_weight", (channels, p_c + 1), source,
                      "depthwise: one filter of p_c + 1 taps per channel", share),
              *((_weight("mamba/conv1d_bias", (channels,), source, share=share),) if conv_bias else ()),
              _weight("mamba/dt_bias", (n_m,), source, share=share),
              _weight("mamba/A_log", (n_m,), source, share=share),
              _weight("mamba/D", (n_m,), source, share=share),
              *((_weight("mamba/norm_weight", (inner,), source, "gated RMSNorm", share),) if gate != "silu" else ()),
              *_linear_params("mamba/out_proj", inner, h, out_bias, source, share=share))
    if kernel == "fused":
        return Part(params, (
            _tokens("mamba/in_proj_input", h, note="in_proj's input (HF's nn.Linear, outside the kernel)",
                    source=source, share=share),
            layer_term("mamba/A_exp", (n_m,), "fp32", "exp(A_log.float()), kept by exp's backward (outside)"),
            SavedTensor("mamba/in_proj_output", (s, b, projection) if share == 1 else (share, s, b, projection),
                        "bf16", Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, MAMBA_KERNEL_SOURCE,
                        "zxbcdt, in_proj's whole output, kept by the fused kernel (conv, scan, norm and out_proj "
                        "recomputed from it in backward)"),
            SavedTensor("mamba/scan_output", (s, b, inner) if share == 1 else (share, s, b, inner), "bf16",
                        Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, MAMBA_KERNEL_SOURCE,
                        "out_x, the scan's output before the gate, in the activation dtype"),
            *((SavedTensor("mamba/norm_rstd", (s, b, g_m) if share == 1 else (share, s, b, g_m), "fp32",
                           Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, MAMBA_KERNEL_SOURCE,
                           "the gated RMSNorm's rstd per group, fp32"),) if gate != "silu" else ()),
            layer_term("mamba/A", (n_m,), "fp32", "A = −exp(A_log), kept by the kernel")), _mixer_matmuls(share))
    conv_out = (b, channels, s + p_c) if share == 1 else (share, b, channels, s + p_c)
    saved = [
        _tokens("mamba/in_proj_input", h, note="in_proj's input (replicated under tensor parallelism)", source=source,
                share=share),
        tokens("mamba/in_proj_output", projection, "bf16", "in_proj's whole output z | x B C | dt: the conv's input "
               "and silu(z)'s are slices of it"),
        layer_term("mamba/A_exp", (n_m,), "fp32", "exp(A_log.float()), kept by exp's backward"),
        SavedTensor("mamba/conv_output", conv_out, "bf16", Axis.TENSOR, len(conv_out) - 2, Group.BODY, source,
                    "the conv's output, s + p_c positions (padded p_c both ends), kept whole by the activation "
                    "of its causal slice"),
        tokens("mamba/dt_bias_sum", n_m, "bf16", "dt + dt_bias, softplus's input"),
        tokens("mamba/dt_softplus", n_m, "bf16", "softplus(dt + dt_bias), the clamp's input (time_step_limit)"),
        tokens("mamba/x_padded", inner, "fp32", "x upcast and padded, kept by the D-skip's multiply"),
        tokens("mamba/dt_fp32", n_m, "fp32", "dt upcast, kept by x·dt"),
        tokens("mamba/x_fp32", inner, "fp32", "x upcast, kept by x·dt"),
        tokens("mamba/dt_fp32_A", n_m, "fp32", "dt upcast again, kept by A·dt"),
        layer_term("mamba/A", (n_m,), "fp32", "A = −exp(A_log), kept by A·dt"),
        layer_term("mamba/segsum_masks", (2, Q, Q), "mask", "segment_sum's two (Q, Q) masks, kept by "
                   "masked_fill"),
        tokens("mamba/decay_L", n_m * Q, "fp32", "L = exp(segsum(A·dt)) per head and chunk, (Q, Q) each"),
        tokens("mamba/B_operand", n_m * d_s, "fp32", "B repeated to the heads, copied as C·Bᵀ's operand"),
        tokens("mamba/C_operand", n_m * d_s, "fp32", "C repeated to the heads, copied as C·Bᵀ's operand"),
        tokens("mamba/G", n_m * Q, "fp32", "G = C·Bᵀ per chunk, kept by G·L"),
        tokens("mamba/x_dt_operand", inner, "fp32", "x·dt in chunks, copied as the intra-chunk einsum's operand"),
        tokens("mamba/M_operand", n_m * Q, "fp32", "M = G·L, copied as the intra-chunk einsum's operand"),
        tokens("mamba/decay_states", n_m, "fp32", "exp(A_cumsum[-1] − A_cumsum), kept by B·decay"),
        tokens("mamba/B_chunks", n_m * d_s, "fp32", "B in chunks, kept by B·decay"),
        tokens("mamba/B_decay_operand", n_m * d_s, "fp32", "B·decay, copied as the chunk-states einsum's operand"),
        tokens("mamba/x_dt_states_operand", inner, "fp32", "x·dt, copied again (transposed) as the chunk-states "
               "einsum's operand"),
        layer_term("mamba/segsum_chunk_masks", (2, chunks + 1, chunks + 1), "mask", "segment_sum's two masks over "
                   "the s/Q + 1 chunk boundaries, kept by masked_fill"),
        SavedTensor("mamba/decay_chunk", (b, n_m, chunks + 1, chunks + 1) if share == 1 else
                    (share, b, n_m, chunks + 1, chunks + 1), "fp32", Axis.TENSOR, 1 if share == 1 else 2,
                    Group.BODY, source, "exp(segsum) over the chunk boundaries, kept by the recurrence's einsum"),
        SavedTensor("mamba/states_operand", (b, chunks + 1, inner * d_s) if share == 1 else
                    (share, b, chunks + 1, inner * d_s), "fp32", Axis.TENSOR, 2 if share == 1 else 3, Group.BODY,
                    source, "the initial and s/Q chunk states (d_m·d_s per head), copied as the recurrence's "
                    "operand"),
        tokens("mamba/state_decay_out", n_m, "fp32", "exp(A_cumsum), kept by C·states·decay"),
        SavedTensor("mamba/new_states_operand", (b, chunks, inner * d_s) if share == 1 else
                    (share, b, chunks, inner * d_s), "fp32", Axis.TENSOR, 2 if share == 1 else 3, Group.BODY, source,
                    "each chunk's start state, copied as C·states's operand"),
        tokens("mamba/C_states_operand", n_m * d_s, "fp32", "C in chunks, copied as C·states's operand"),
        tokens("mamba/C_states", inner, "fp32", "C·states, kept by its decay multiply"),
    ]
    if gate == "silu":  # y·silu(z): silu keeps z (a slice of in_proj's output), the multiply both factors
        saved += [tokens("mamba/gate_silu", inner, "bf16", "silu(z), kept by y·silu(z)"),
                  tokens("mamba/scan_output", inner, "fp32", "the scan's output y, kept by y·silu(z)")]
    elif gate in ("norm_gate", "gate_norm"):
        saved += [tokens("mamba/gate_fp32", inner, "fp32", "z upcast, silu's input"),
                  tokens("mamba/gate_silu", inner, "fp32", "silu(z), kept by the gate's multiply"),
                  tokens("mamba/norm_input", inner, "fp32", "the norm's input (y, or y·silu(z)), kept by pow and "
                         "by x·rstd" if gate == "gate_norm" else "y, the norm's input, kept by pow and x·rstd"),
                  tokens("mamba/norm_rstd", g_m, "fp32", "rsqrt(mean(x²) + eps) per group"),
                  tokens("mamba/norm_normalized", inner, "fp32", "x·rstd in fp32, kept for the weight's gradient"),
                  tokens("mamba/norm_gated" if gate == "norm_gate" else "mamba/scan_output", inner, "fp32",
                         "weight·x·rstd, kept by the gate's multiply" if gate == "norm_gate" else
                         "the scan's output y, kept by y·silu(z)")]
    saved.append(tokens("mamba/out_proj_input", inner, "bf16", "out_proj's input"))

    return Part(params, tuple(saved), _mixer_matmuls(share))


def _mixer_matmuls(share: Expr = Integer(1), source: str = MAMBA_SOURCE) -> tuple:
    """A Mamba2 mixer's matmuls as FlopCounterMode counts the torch path (:func:`mamba2_mixer`)."""
    from ...core.dims import d_m, d_s, g_m, n_m, p_c, Q
    inner, chunks = n_m * d_m, s / Q
    channels = inner + 2 * g_m * d_s

    def einsum(name, batch, m, k_, n, note):
        return Matmul(f"layer/mamba/{name}", batch * share, m, k_, n, False, "layer", source, note)
    return (
        _linear("mamba/in_proj", h, 2 * inner + 2 * g_m * d_s + n_m, source, batch=share),
        Matmul("layer/mamba/conv1d", b * share, s + p_c, p_c + 1, channels, True, "layer", source,
               "depthwise: p_c + 1 taps per channel at each of s + p_c output positions"),
        einsum("scan_CB", b * n_m * chunks, Q, d_s, Q, "G = C·Bᵀ in each chunk"),
        einsum("scan_intra", b * n_m * chunks, Q, Q, d_m, "M·x within each chunk"),
        einsum("scan_states", b * n_m * chunks, d_m, Q, d_s, "each chunk's state from B·decay and x"),
        einsum("scan_recurrence", b * n_m, chunks + 1, chunks + 1, d_m * d_s, "the states across chunk "
               "boundaries"),
        einsum("scan_C_states", b * n_m * chunks, Q, d_s, d_m, "C·state at each chunk's start"),
        _linear("mamba/out_proj", inner, h, source, batch=share),
    )


# --- hybrid layers: kinds of layer as shares, and their token mixers ------------------

LFM2 = f"{HF} models/lfm2/modeling_lfm2.py"
#: Dao-AILab/causal-conv1d at 0d2252d161f25f7907bbd05985c08ab98d255874, causal_conv1d/causal_conv1d_interface.py:
#: ``CausalConv1dFn.forward`` saves (x, weight, bias, seq_idx, initial_states) and returns an output of s positions
CAUSAL_CONV1D = "causal-conv1d 0d2252d causal_conv1d_interface.py CausalConv1dFn"


def short_conv(bias: bool = False, conv: Conventions | None = None, width: Expr = h, layer_input: bool = False) -> Part:
    """LFM2's double-gated short convolution (transformers 5.24.0 models/lfm2/modeling_lfm2.py:316-383,
    ``Lfm2ShortConv``): in_proj h → 3h, its output transposed to channels-first and chunked into B, C and x
    (views of one storage), B·x, a depthwise causal conv1d of K_c taps (``conv_L_cache``), C·conv, the
    product made contiguous token-major, out_proj h → h; ``bias`` (``conv_bias``) on all three.

    Kept: in_proj's input; its 3h-wide output (B and x kept by B·x, C by C·conv: one storage); B·x, the
    conv's input; the conv's output, kept by C·conv; out_proj's input. The conv's output on the CPU
    backend (``conv.name == "cpu"``: HF's torch ``causal_conv1d_fn``, :293-313, ``F.conv1d`` padded
    K_c − 1 on both sides, cut to the first s positions by a view) is the whole padded output, s + K_c − 1
    positions per channel (traced); on CUDA, where HF calls the causal-conv1d package when it is installed,
    ``CausalConv1dFn`` (:data:`CAUSAL_CONV1D`) returns s positions and saves its input and weight — the
    same input, so the two differ by the K_c − 1 padded positions of the output alone.

    Matmuls: the two projections, and the conv as b·h dot products of K_c taps at the s + K_c − 1 positions
    torch's padded conv computes (FlopCounterMode's forward count; backward: the input's and the weight's
    gradients, as many each — the weight's counted per channel, the depthwise conv's groups)."""
    from ...core.dims import K_c
    cpu = conv is not None and conv.name == "cpu"
    positions = s + K_c - 1 if cpu else s
    params = (*_linear_params("conv/in_proj", width, 3 * width, bias, LFM2, "B, C and x: one h → 3h projection"),
              _weight("conv/conv_weight", (width, K_c), LFM2, "depthwise: one kernel of K_c taps per channel"),
              *((_weight("conv/conv_bias", (width,), LFM2),) if bias else ()),
              *_linear_params("conv/out_proj", width, width, bias, LFM2))
    matmuls = (_linear("conv/in_proj", width, 3 * width, LFM2),
               Matmul("layer/conv/conv", b * width, s + K_c - 1, K_c, Integer(1), True, "layer", LFM2,
                      "depthwise causal conv1d: per channel, K_c taps at each of the s + K_c − 1 padded positions"),
               _linear("conv/out_proj", width, width, LFM2))
    output_note = ("the conv's whole output, s + K_c − 1 positions per channel (F.conv1d padded both sides; "
                   "the cut to s is a view), kept by C·conv" if cpu else
                   "the conv's output (causal-conv1d: s positions), kept by C·conv")
    saved = (
        _tokens("conv/in_proj_input", width, group=Group.LAYER_INPUT if layer_input else Group.BODY,
                note="the operator norm's output, in_proj's input", source=LFM2),
        _split("conv/in_proj_output", 3 * width, note="B, C and x: one storage, kept by B·x and C·conv", source=LFM2),
        _split("conv/conv_input", width, note="B·x, the conv's input" + ("" if cpu else " (CausalConv1dFn saves it)"),
               source=LFM2 if cpu else CAUSAL_CONV1D),
        SavedTensor("conv/conv_output", (positions, b, width), "bf16", Axis.TENSOR, 2, Group.BODY,
                    LFM2 if cpu else CAUSAL_CONV1D, output_note),
        _split("conv/out_proj_input", width, note="C·conv made contiguous token-major, out_proj's input", source=LFM2),
    )
    return Part(params, saved, matmuls)


QWEN3_NEXT = f"{HF} models/qwen3_next/modeling_qwen3_next.py"


def gated_query(projections: Part, width: Expr) -> Part:
    """Qwen3-Next's gated attention (transformers 5.24.0 models/qwen3_next/modeling_qwen3_next.py:229-304,
    ``Qwen3NextAttention``): ``q_proj`` is h → 2·a·d_h, each head's query and gate side by side; the projections
    of :func:`attention_projections` with Q's weight, bias and matmul twice as wide."""
    def wider(term):
        if term.name in ("layer/attention/query_weight", "layer/attention/query_bias"):
            return replace(term, shape=term.shape[:-1] + (2 * term.shape[-1],),
                           note="query and output gate, per head side by side", source=QWEN3_NEXT)
        return term

    def wider_matmul(mm):
        if mm.name == "layer/attention/query":
            return replace(mm, N=2 * mm.N, note="query and output gate", source=QWEN3_NEXT)
        return mm
    return Part(tuple(wider(p) for p in projections.params), projections.saved,
                tuple(wider_matmul(mm) for mm in projections.matmuls))


def output_gate(width: Expr) -> Part:
    """The gate of Qwen3-Next's attention output (modeling_qwen3_next.py:300-303): ``attn_output *
    torch.sigmoid(gate)``, the gate half of q_proj's output made contiguous token-major (a copy no one keeps):
    the sigmoid keeps its output, the multiply its other operand (the attention's output, token-major: the
    core's ``output_copy``), and the product is the output projection's input."""
    return Part(saved=(
        _split("attention/output_gate_sigmoid", a * width, note="sigmoid(gate), kept by the gating multiply",
               source=QWEN3_NEXT),
        _split("attention/gated_output", a * width, note="attention output × sigmoid(gate), the output "
               "projection's input", source=QWEN3_NEXT),
    ))


#: fla-org/flash-linear-attention at bc3b101dcb713ddc5bd8924b66754eb68b5ccf89,
#: fla/ops/gated_delta_rule/chunk.py:310-326: ``ChunkGatedDeltaRuleFunction.forward`` saves q, q_rstd, k, k_rstd,
#: v, g (cumsum'd, fp32), beta and A (bf16, 64 per head and position: chunk_fwd.py:385)
FLA_GDN = "flash-linear-attention bc3b101 fla/ops/gated_delta_rule/chunk.py ChunkGatedDeltaRuleFunction"

#: torch_chunk_gated_delta_rule's chunk length (its ``chunk_size`` default, which Qwen3NextGatedDeltaNet keeps)
DELTA_CHUNK = 64


def gated_deltanet(conv: Conventions | None = None, layer_input: bool = False, final_state: bool = True) -> Part:
    """Qwen3-Next's linear attention, the gated DeltaNet (transformers 5.24.0
    models/qwen3_next/modeling_qwen3_next.py:583-769, ``Qwen3NextGatedDeltaNet``), on HF's torch path
    (``torch_chunk_gated_delta_rule``, :371-510, which CPU runs; GPU: see the family's note).

    Projections: in_proj_qkvz h → 2·H_k·D_k + 2·H_v·D_v (q, k, v, the output gate z), in_proj_ba h → 2·H_v
    (β's and the decay's inputs); q|k|v through a depthwise causal conv1d of K_c taps (no bias) and SiLU;
    β = sigmoid(b); the decay g = −exp(A_log)·softplus(a + dt_bias) in fp32 (A_log, dt_bias: H_v each). The
    rule: q and k repeated to H_v heads, everything in fp32, q and k L2-normalised, q scaled, padded to
    64·⌈s/64⌉ positions and cut into chunks of 64; per chunk the decays (pairwise, exp'd), the UT system
    k_β·kᵀ and the within-chunk q·kᵀ, two triangular solves (new values, decayed keys), then a scan over the
    chunks reading and updating a (D_k, D_v) state per head. Out: a gated RMSNorm over each value head (weight
    D_v; x·rstd cast back, × weight, × SiLU(z) in fp32, cast back), out_proj H_v·D_v → h.

    On CUDA (``conv.name != "cpu"``), where HF calls causal-conv1d (SiLU fused) and FLA's
    ``chunk_gated_delta_rule`` (:data:`FLA_GDN`) when they are installed: the conv keeps its input only, and the
    rule keeps what ``ChunkGatedDeltaRuleFunction`` saves — q and k L2-normalised in bf16 with their fp32 rstd
    (H_k heads: no repeat), v, the decay's fp32 cumsum, β (the sigmoid's output, already kept) and A, 64 bf16
    values per value head and position; everything between is recomputed in its backward.

    Kept (traced): the shared projection input; the conv's input and its padded output (SiLU's input); β; the
    decay's fp32 pieces; the fp32 q and k (L2 norm's inputs) and their rstd; padded fp32 β, v and k; the
    chunk mask; per chunk the exp'd pairwise decays, k_β, k_β·kᵀ, the scaled q, q·kᵀ, the UT system, the two
    solves' outputs, the two exp'd decay vectors, the within-chunk attention and the new values; the zero
    initial state; the decayed k (whole) and the chunk decays, kept by the state updates that are read — the
    last one's too with ``final_state`` (HF's cache holds the final state: the config's ``use_cache``, true by
    default), else from two chunks on; from two chunks on, the states read and the decayed q (whole);
    the gated norm's tensors and out_proj's input."""
    from sympy import Max, ceiling

    from ...core.dims import D_k, D_v, H_k, H_v, K_c
    chunks = ceiling(s / DELTA_CHUNK)
    padded = DELTA_CHUNK * chunks
    from_two = (chunks - 1) - Max(chunks - 2, 0)  # 1 when there are two chunks or more, else 0
    read = Integer(1) if final_state else from_two  # a state update is read: the cache's, or the next chunk's
    keys, values = H_k * D_k, H_v * D_v
    conv_dim = 2 * keys + values
    src = QWEN3_NEXT
    params = (_weight("linear_attention/in_proj_qkvz_weight", (h, 2 * keys + 2 * values), src, "q, k, v and z"),
              _weight("linear_attention/in_proj_ba_weight", (h, 2 * H_v), src, "β's and the decay's inputs"),
              _weight("linear_attention/conv_weight", (conv_dim, K_c), src, "depthwise, no bias"),
              _weight("linear_attention/dt_bias", (H_v,), src),
              _weight("linear_attention/A_log", (H_v,), src),
              _weight("linear_attention/norm_weight", (D_v,), src, "gated RMSNorm, shared by the value heads"),
              _weight("linear_attention/out_proj_weight", (values, h), src))
    n = b * H_v  # the rule's (batch, head) pairs

    def rule(name, shape, dtype="fp32", note=""):  # per head, heads on axis 1 (split by TP)
        return SavedTensor(f"linear_attention/{name}", shape, dtype, Axis.TENSOR, 1, Group.BODY, src, note)

    def layer_constant(name, shape, dtype, note):
        return SavedTensor(f"linear_attention/{name}", shape, dtype, Axis.NONE, None, Group.BODY, src, note)

    chunk_square = (b, H_v, padded, DELTA_CHUNK)  # one 64 × 64 matrix per chunk and head
    saved = (
        _tokens("linear_attention/in_proj_input", h, group=Group.LAYER_INPUT if layer_input else Group.BODY,
                note="the input norm's output, in_proj_qkvz's and in_proj_ba's input", source=src),
        _split("linear_attention/conv_input", conv_dim, note="q|k|v concatenated, the conv's input", source=src),
        SavedTensor("linear_attention/conv_output", (s + K_c - 1, b, conv_dim), "bf16", Axis.TENSOR, 2, Group.BODY,
                    src, "the conv's padded output, s + K_c − 1 positions (the cut to s a view), SiLU's input"),
        _split("linear_attention/beta", H_v, note="sigmoid(b), kept by its backward", source=src),
        layer_constant("decay_rate", (2 * H_v,), "fp32", "exp(A_log) and its negation, fp32: per layer"),
        _split("linear_attention/softplus_input", H_v, "fp32", "a + dt_bias in fp32, softplus's input", src),
        _split("linear_attention/softplus_output", H_v, "fp32", "softplus(a + dt_bias), kept by the decay's "
               "multiply", src),
        rule("query_fp32", (b, H_v, s, D_k), note="q repeated to H_v heads in fp32: the L2 norm's input"),
        rule("query_rstd", (b, H_v, s), note="q's L2 norm: rsqrt(Σq² + ε) per head and position"),
        rule("key_fp32", (b, H_v, s, D_k), note="k repeated to H_v heads in fp32: the L2 norm's input"),
        rule("key_rstd", (b, H_v, s), note="k's L2 norm: rsqrt(Σk² + ε)"),
        rule("beta_padded", (b, H_v, padded), note="β in fp32, padded to the chunks, kept by k·β and v·β"),
        rule("value_padded", (b, H_v, padded, D_v), note="v in fp32, padded, kept by v·β"),
        rule("key_padded", (b, H_v, padded, D_k), note="normalised k, padded, kept by k·β and the two ·kᵀ"),
        layer_constant("chunk_mask", (Integer(DELTA_CHUNK), Integer(DELTA_CHUNK)), "mask",
                       "the strictly upper triangle of a chunk, kept by masked_fill: per layer"),
        rule("pairwise_decay", chunk_square, note="exp of the pairwise decays within each chunk"),
        rule("key_beta", (b, H_v, padded, D_k), note="k·β, kept by k_β·kᵀ and k_β·exp(decay)"),
        rule("ut_product", chunk_square, note="k_β·kᵀ, kept by × pairwise decay"),
        rule("query_scaled", (b, H_v, padded, D_k), note="q / √D_k, padded, kept by q·kᵀ and q·exp(decay)"),
        rule("qk_product", chunk_square, note="q·kᵀ, kept by × pairwise decay"),
        rule("decay_exp", (b, H_v, 2 * padded), note="exp(cumulative decay), computed twice (for k_β and for "
             "q), each kept by its multiply"),
        rule("ut_system", chunk_square, note="the UT system, kept by both triangular solves"),
        rule("new_values", (b, H_v, padded, D_v), note="solve(UT, v·β): the solve's output, kept by its backward"),
        rule("key_cumdecay", (b, H_v, padded, D_k), note="solve(UT, k_β·exp(decay)), kept by its backward "
             "and by the state reads"),
        rule("initial_state", (b, H_v, D_k, D_v), note="the zero state, kept by the first chunk's reads"),
        rule("chunk_attention", chunk_square, note="the within-chunk attention, kept by ·v_new"),
        rule("chunk_values", (b, H_v, padded, D_v), note="each chunk's v_new, kept by ·v_new and the state update"),
        rule("states", (b, H_v, (chunks - 1) * D_k, D_v), note="the state each chunk after the first reads"),
        rule("query_decayed", (b, H_v, from_two * padded, D_k), note="q·exp(decay), kept whole by the state "
             "reads from the second chunk on"),
        rule("key_decayed", (b, H_v, read * padded, D_k + 1), note="k·exp(decay to the chunk's end) and that "
             "exp, kept by the state updates that are read (by the next chunk; the last by HF's cache)"),
        rule("chunk_decay", (b, H_v, read * chunks), note="exp of each chunk's total decay, kept by its backward "
             "once a state update is read"),
        _split("linear_attention/norm_input_fp32", values, "fp32", "the rule's output in fp32: pow's and "
               "x·rstd's input", src),
        _split("linear_attention/norm_rstd", H_v, "fp32", "rsqrt(mean(x²) + ε) per value head", src),
        _split("linear_attention/norm_normalized", values, note="x·rstd cast back, kept by × weight", source=src),
        _split("linear_attention/gate_fp32", values, "fp32", "z in fp32, SiLU's input", src),
        _split("linear_attention/gate_silu", values, "fp32", "SiLU(z), kept by the gating multiply", src),
        _split("linear_attention/norm_weighted", values, note="weight·x, kept by the gating multiply", source=src),
        _split("linear_attention/out_proj_input", values, note="the gated norm's output cast back, out_proj's "
               "input", source=src),
    )
    if conv is None or conv.name != "cpu":  # on GPU: causal-conv1d's conv and FLA's chunk_gated_delta_rule
        gpu = (
            _split("linear_attention/query_normalized", keys, note="q L2-normalised (l2norm_fwd), bf16",
                   source=FLA_GDN),
            _split("linear_attention/query_rstd", H_k, "fp32", "q's rstd per head and position", FLA_GDN),
            _split("linear_attention/key_normalized", keys, note="k L2-normalised, bf16", source=FLA_GDN),
            _split("linear_attention/key_rstd", H_k, "fp32", "k's rstd per head and position", FLA_GDN),
            _split("linear_attention/value", values, note="v made contiguous (input_guard), bf16", source=FLA_GDN),
            _split("linear_attention/decay_cumsum", H_v, "fp32", "the decay's chunk-local cumsum, fp32",
                   FLA_GDN),
            _split("linear_attention/ut_inverse", H_v * DELTA_CHUNK, note="A, the solved (I + A)⁻¹ of each chunk: "
                   "64 values per head and position, bf16", source=FLA_GDN),
        )
        traced_only = ("conv_output", "query_fp32", "query_rstd", "key_fp32", "key_rstd", "beta_padded")
        start = next(i for i, t in enumerate(saved) if t.name == "linear_attention/value_padded")
        end = next(i for i, t in enumerate(saved) if t.name == "linear_attention/norm_input_fp32")
        saved = tuple(t for t in saved[:start] if t.name.removeprefix("linear_attention/") not in traced_only) \
            + gpu + saved[end:]
    c = Integer(DELTA_CHUNK)
    solves = 2 * n * chunks * c * c * (D_v + D_k)  # their backward's −grad·Xᵀ bmm, one per solve
    one_state = 2 * n * c * D_k * D_v
    matmuls = (
        _linear("linear_attention/in_proj_qkvz", h, 2 * keys + 2 * values, src),
        _linear("linear_attention/in_proj_ba", h, 2 * H_v, src),
        Matmul("layer/linear_attention/conv", b * conv_dim, s + K_c - 1, K_c, Integer(1), True, "layer", src,
               "depthwise causal conv1d over the s + K_c − 1 padded positions"),
        Matmul("layer/linear_attention/ut_system", n * chunks, c, D_k, c, False, "layer", src,
               "k_β·kᵀ per chunk; backward also the two triangular solves' −grad·Xᵀ",
               backward=4 * n * chunks * c * D_k * c + solves),
        Matmul("layer/linear_attention/chunk_scores", n * chunks, c, D_k, c, False, "layer", src, "q·kᵀ per chunk"),
        Matmul("layer/linear_attention/first_state_reads", 2 * n, c, D_k, D_v, False, "layer", src,
               "k_cumdecay·S and q·S of the first chunk: the zero state needs no gradient", backward=2 * one_state),
        Matmul("layer/linear_attention/state_reads", 2 * n * (chunks - 1), c, D_k, D_v, False, "layer", src,
               "k_cumdecay·S and q·S of the chunks after the first"),
        Matmul("layer/linear_attention/chunk_output", n * chunks, c, c, D_v, False, "layer", src,
               "within-chunk attention · v_new"),
        Matmul("layer/linear_attention/state_updates", n * (chunks - 1), D_k, c, D_v, False, "layer", src,
               "kᵀ·v_new into the state, every chunk but the last"),
        Matmul("layer/linear_attention/last_state_update", n, D_k, c, D_v, False, "layer", src,
               "the last chunk's state update: its result (the final state) is HF's cache's, outside the loss: no "
               "backward", backward=Integer(0)),
        _linear("linear_attention/out_proj", values, h, src),
    )
    return Part(params, saved, matmuls)
