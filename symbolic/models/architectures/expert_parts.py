"""The mixture-of-experts block, one part per component (issue 25 onward): the router's kept scores and
indices (softmax, sigmoid, sparsemixer, correction-biased and grouped top-k), the routed experts as HF's eager
loop or dense path runs them, gpt-oss's clamped SwiGLU experts, the shared experts, and the block that
joins them. Re-exported by :mod:`.parts`, so a recipe reads them as ``parts.NAME``."""
from __future__ import annotations

from dataclasses import replace

from sympy import Expr, Integer

from ...core.dims import E, b, f_e, h, k, s
from ...core.tensors import Axis, Group, Matmul, SavedTensor
from .parts import HF, MOE_SOURCE, Part, Router, _tokens, _weight, mlp


# --- mixture of experts, one part per component ---------------------------------------
# The router, the routed experts and the shared experts as separate parts, so the hand-named MoE
# layer (:mod:`.moe`, Mixtral/Qwen2-MoE with E_s shared experts of width f_e) and the composed
# families (:func:`moe`) are one code path: each is a sum of these.

def balanced_tokens(experts: Expr = E, top_k: Expr = k) -> Expr:
    """Tokens per expert under balanced routing: the s·b·k assignments shared by the E experts."""
    return s * b * top_k / experts


def moe_router(router: Router, experts: Expr = E, top_k: Expr = k, share: Expr = Integer(1),
               source: str = HF, paper: str = MOE_SOURCE) -> Part:
    """The router: its weight (h → E, fp32 in DeepSeek), its matmul over every token, and what
    its scoring and top-k keep per token (input, scores, the k indices, the renormalised k
    weights and their sum when ``router.renormalize``, the router's ``extra`` terms)."""
    params = (_weight("moe/router_weight", (h, experts), paper,
                      "fp32 (DeepSeek keeps it in fp32)" if router.logits_fp32 else "", share=share),)
    if router.bias:
        params += (_weight("moe/router_bias", (experts,), paper, "the router's bias", share=share),)
    if router.correction_bias == "parameter":  # ERNIE-4.5's moe_statics: a parameter HF counts, not trained
        params += (_weight("moe/router_correction_bias", (experts,), source, "e_score_correction_bias: an fp32 "
                           "nn.Parameter with requires_grad=False (chooses the experts only)", share=share),)
    mms = (Matmul("layer/moe/router", share, b * s, h, experts, True, "layer", paper),)
    saved = [_tokens("moe/router_input", h, note="the router's and the experts' gathers' input", source=source,
                     share=share)]
    if router.sparsemixer:
        saved += sparsemixer_saved(experts, top_k, router.input_jitter, share, source)
        return Part(params, tuple(saved), mms)
    if router.logits_fp32:
        saved.append(_tokens("moe/router_input_fp32", h, "fp32", note="router input upcast to fp32", source=source,
                             share=share))
    saved.append(_tokens("moe/router_scores", top_k if router.topk_first else experts, router.score_dtype,
                         note=(f"{router.score} of the k chosen logits, {router.score_dtype}" if router.topk_first
                               else f"{router.score} of the router logits, {router.score_dtype}"),
                         source=source, share=share))
    saved.append(_tokens("moe/topk_indices", top_k, "int64", note="the k chosen experts", source=source, share=share))
    if router.renormalize:
        saved += [_tokens("moe/routing_weights", top_k, "fp32", note="the k weights, renormalised", source=source,
                          share=share),
                  _tokens("moe/routing_weight_sum", 1, "fp32", note="their sum (the divisor)", source=source,
                          share=share)]
    saved += [replace(term, shape=(share, *term.shape), split_dim=term.split_dim + 1) if share != 1 else term
              for term in router.extra]
    return Part(params, tuple(saved), mms)


def sparsemixer_saved(experts: Expr = E, top_k: Expr = k, input_jitter: bool = False, share: Expr = Integer(1),
                      source: str = HF) -> tuple:
    """What Phi-3.5-MoE's sparsemixer keeps per token in training mode (transformers 5.24.0
    models/phimoe/modeling_phimoe.py, ``sparsemixer`` and ``PhimoeMultiplier``), besides the
    router's input: per round (the first pick, then the second with the first masked out by
    ``scatter``) the threshold mask (bool, E), the softmax of the masked logits (activation
    dtype, E), the sampled expert (int64) and its gathered multiplier (activation dtype). The
    Gumbel noise, the ``max`` that picks the midpoint mask and the concatenated weights are
    not kept (nothing of the backward graph holds them). ``input_jitter``: the two in-place
    noise multiplies of the router's input keep their (s, b, h) noise tensors."""
    def tokens(name, last, dtype, note):
        return _tokens(name, last, dtype, note=note, source=source, share=share)

    saved = []
    if input_jitter:
        saved += [tokens("moe/input_jitter", h, "bf16", "input_jitter_noise: the block's uniform noise, kept by "
                         "the in-place multiply of the router's input"),
                  tokens("moe/router_input_jitter", h, "bf16", "input_jitter_noise: the router's own uniform noise, "
                         "kept by its second in-place multiply")]
    saved += [
        tokens("moe/sparsemixer_mask", experts, "mask", "first round's threshold mask, kept by masked_fill"),
        tokens("moe/router_scores", experts, "bf16", "softmax of the masked logits (first round), kept by its "
               "backward and by PhimoeMultiplier"),
        tokens("moe/sparsemixer_mask_second", experts, "mask", "second round's threshold mask, kept by masked_fill"),
        tokens("moe/router_scores_second", experts, "bf16", "softmax of the second round's masked logits, kept by "
               "its backward and by PhimoeMultiplier"),
        tokens("moe/topk_indices", top_k, "int64", "the two Gumbel-sampled experts (one per round), kept by "
               "gather, scatter and PhimoeMultiplier"),
        tokens("moe/sparsemixer_multipliers", top_k, "bf16", "each round's gathered softmax value, kept by "
               "PhimoeMultiplier"),
    ]
    return tuple(saved)


def dense_experts(expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k, share: Expr = Integer(1),
                  source: str = HF, paper: str = MOE_SOURCE) -> Part:
    """Llama 4's routed experts (transformers 5.24.0 models/llama4/modeling_llama4.py,
    ``Llama4Router``, ``Llama4TextMoe``, ``Llama4TextExperts``): the router h → E, top-k of the
    logits scattered into a −inf row, ``sigmoid(scores.float()).to(bf16)``; the input repeated E
    times and multiplied by the score column, so every token goes through every expert (the
    experts not chosen with a zero input); ``bmm`` by stacked E×h×2f_e and E×f_e×h weights.
    Kept per token: the router's input (also the shared expert's), the k int64 indices (the
    scatter's), the fp32 sigmoid output, the bf16 score column (the multiply's), and per expert
    and token the repeated input, the scaled input (the bmm's), the gate|up output, the
    activation's output and the gated product (the down bmm's input)."""
    params = (_weight("moe/router_weight", (h, experts), paper, share=share),
              _weight("moe/experts_gate_up_weight", (experts * h, 2 * expert_ffn), paper, "all E experts (N_total)",
                      share=share),
              _weight("moe/experts_down_weight", (experts * expert_ffn, h), paper, "all E experts (N_total)",
                      share=share))
    mms = (Matmul("layer/moe/router", share, b * s, h, experts, True, "layer", paper),
           Matmul("layer/moe/experts_gate_up", experts * share, b * s, h, 2 * expert_ffn, True, "layer", paper,
                  "every token through every expert"),
           Matmul("layer/moe/experts_down", experts * share, b * s, expert_ffn, h, True, "layer", paper,
                  "every token through every expert"))

    def tokens(name, last, dtype, note):
        return _tokens(name, last, dtype, note=note, source=source, share=share)

    def expert(name, last, note):
        return SavedTensor(name, (experts, s * b * share, last), "bf16", Axis.EXPERT, 0, Group.BODY, source, note)

    saved = (
        tokens("moe/router_input", h, "bf16", "the router's, the repeat's and the shared expert's input"),
        tokens("moe/topk_indices", top_k, "int64", "the k chosen experts, kept by the scatter"),
        tokens("moe/router_scores", experts, "fp32", "sigmoid of the scattered logits, fp32, kept by its backward"),
        tokens("moe/router_score_column", experts, "bf16", "the scores cast back and laid out per expert, kept "
               "by the input's multiply"),
        expert("moe/expert/repeated_input", h, "the input repeated for every expert, kept by the multiply"),
        expert("moe/expert/input", h, "the scaled input, kept by the gate|up bmm"),
        SavedTensor("moe/expert/gate_up_output", (experts, s * b * share, 2 * expert_ffn), "bf16", Axis.EXPERT, 0,
                    Group.BODY, source, "gate|up output: the activation's input and the up half"),
        SavedTensor("moe/expert/act_output", (experts, s * b * share, expert_ffn), "bf16", Axis.EXPERT, 0,
                    Group.EXPERT_ACTIVATION, source, "act(gate), kept for up·"),
        SavedTensor("moe/expert/down_input", (experts, s * b * share, expert_ffn), "bf16", Axis.EXPERT, 0,
                    Group.EXPERT_ACTIVATION_OUTPUT, source, "up·act(gate), the down bmm's input"),
    )
    return Part(params, saved, mms)


def routed_experts(router: Router, expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k,
                   tokens_per_expert: Expr | None = None, share: Expr = Integer(1), activation: str = "silu",
                   source: str = MOE_SOURCE, paper: str = MOE_SOURCE) -> Part:
    """E routed experts of width f_e as HF's eager experts loop runs them (a gather of each
    expert's tokens, fused gate|up, the activation, down, the routing weight's multiply, the
    index_add_ back): stacked weights E×h×2f_e and E×f_e×h, each expert's matmuls over its
    tokens (balanced routing s·b·k/E unless ``tokens_per_expert``), and the per-expert saved
    tensors on the ``EXPERT`` axis (shape: experts, tokens per expert, width) that
    ``layout.strategies.expert_dispatch`` splits."""
    per_expert = balanced_tokens(experts, top_k) if tokens_per_expert is None else tokens_per_expert
    tokens = per_expert * share  # saved tensors: the layers' average
    note = "all E experts (N_total)"
    params = (
        _weight("moe/experts_gate_up_weight", (experts * h, 2 * expert_ffn), paper, note, share=share),
        _weight("moe/experts_down_weight", (experts * expert_ffn, h), paper, note, share=share),
    )
    mms = (
        Matmul("layer/moe/experts_gate_up", experts * share, per_expert, h, 2 * expert_ffn, True, "layer", paper),
        Matmul("layer/moe/experts_down", experts * share, per_expert, expert_ffn, h, True, "layer", paper),
    )

    def expert(name, last, dtype="bf16", note="", group=Group.BODY):
        return SavedTensor(name, (experts, tokens, last), dtype, Axis.EXPERT, 0, group, source, note)

    act = activation
    saved = (
        expert("moe/expert/token_index", 2, "int64", "(slot, token) pairs of the expert's assignments: one "
               "torch.where storage, kept by the gathers"),
        expert("moe/expert/input", h, note="the expert's tokens, gathered"),
        expert("moe/expert/gate_up_output", 2 * expert_ffn, note=f"gate|up output: {act}'s input and the up half"),
        # the groups a fused expert SwiGLU and Megatron-Core's moe_act recompute drop (layout.strategies)
        expert("moe/expert/act_output", expert_ffn, note=f"{act}(gate), kept for ·up", group=Group.EXPERT_ACTIVATION),
        expert("moe/expert/down_input", expert_ffn, note=f"{act}(gate)·up", group=Group.EXPERT_ACTIVATION_OUTPUT),
        expert("moe/expert/routing_weight", 1, router.weight_dtype, "the token's weight for this expert"),
        expert("moe/expert/down_output", h, note="kept for the routing weight's gradient"),
        expert("moe/expert/combine_input", h, note="weighted output cast back, kept by index_add_"),
    )
    return Part(params, saved, mms)


def clamped_swiglu_experts(router: Router, expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k,
                           tokens_per_expert: Expr | None = None, share: Expr = Integer(1), activation: str = "silu",
                           source: str = MOE_SOURCE, paper: str = MOE_SOURCE) -> Part:
    """gpt-oss's routed experts as HF's eager loop runs them (transformers 5.24.0
    models/gpt_oss/modeling_gpt_oss.py:68-114, GptOssExperts): per hit expert its tokens gathered,
    ``x @ gate_up_proj[e] + gate_up_proj_bias[e]`` (gate and up interleaved in one h×2f_e weight),
    ``_apply_gate`` (:82-88) — gate = gate_up[..., ::2].clamp(max=limit), up = gate_up[..., 1::2].clamp(
    −limit, limit), glu = gate·sigmoid(alpha·gate), (up + 1)·glu — then ``@ down_proj[e] + down_proj_bias[e]``,
    the routing weight's multiply and ``index_add_``. Parameters: E×h×2f_e and E×2f_e, E×f_e×h and E×h.
    Kept per assignment (traced): the (slot, token) index pair, the gathered input, the gate|up output (both
    clamps keep it: strided views of one storage), the clamped gate (kept by the multiply by its sigmoid),
    the sigmoid's output, up + 1 and glu (kept by their product), that product (the down matmul's input),
    the routing weight, the down output (kept by the weight's multiply) and the weighted output (kept by
    ``index_add_``). Multiplying by alpha, adding 1 and the biases keep nothing; the matmuls are the
    swiglu experts' (biases are not matmul FLOPs). ``activation`` is unused: the activation is fixed."""
    per_expert = balanced_tokens(experts, top_k) if tokens_per_expert is None else tokens_per_expert
    tokens = per_expert * share  # saved tensors: the layers' average
    note = "all E experts (N_total)"
    params = (
        _weight("moe/experts_gate_up_weight", (experts * h, 2 * expert_ffn), paper, note + ", gate|up interleaved",
                share=share),
        _weight("moe/experts_gate_up_bias", (experts, 2 * expert_ffn), paper, note, share=share),
        _weight("moe/experts_down_weight", (experts * expert_ffn, h), paper, note, share=share),
        _weight("moe/experts_down_bias", (experts, h), paper, note, share=share),
    )
    mms = (
        Matmul("layer/moe/experts_gate_up", experts * share, per_expert, h, 2 * expert_ffn, True, "layer", paper),
        Matmul("layer/moe/experts_down", experts * share, per_expert, expert_ffn, h, True, "layer", paper),
    )

    def expert(name, last, dtype="bf16", note="", group=Group.BODY):
        return SavedTensor(name, (experts, tokens, last), dtype, Axis.EXPERT, 0, group, source, note)

    act = Group.EXPERT_ACTIVATION  # what a fused clamped-SwiGLU kernel would recompute from gate|up
    saved = (
        expert("moe/expert/token_index", 2, "int64", "(slot, token) pairs of the expert's assignments: one "
               "torch.where storage, kept by the gathers and index_add_"),
        expert("moe/expert/input", h, note="the expert's tokens, gathered"),
        expert("moe/expert/gate_up_output", 2 * expert_ffn, note="gate|up output plus bias, kept by both clamps "
               "(gate and up are strided views of it)"),
        expert("moe/expert/gate_clamped", expert_ffn, note="gate clamped above at swiglu_limit, kept by "
               "gate·sigmoid(alpha·gate)", group=act),
        expert("moe/expert/gate_sigmoid", expert_ffn, note="sigmoid(alpha·gate), kept by its backward and the "
               "multiply", group=act),
        expert("moe/expert/up_plus_one", expert_ffn, note="up clamped to ±swiglu_limit, plus 1, kept by (up + 1)·glu",
               group=act),
        expert("moe/expert/glu", expert_ffn, note="gate·sigmoid(alpha·gate), kept by (up + 1)·glu", group=act),
        expert("moe/expert/down_input", expert_ffn, note="(up + 1)·glu, the down matmul's input",
               group=Group.EXPERT_ACTIVATION_OUTPUT),
        expert("moe/expert/routing_weight", 1, router.weight_dtype, "the token's weight for this expert"),
        expert("moe/expert/down_output", h, note="down output plus bias, kept for the routing weight's gradient"),
        expert("moe/expert/combine_input", h, note="weighted output, kept by index_add_"),
    )
    return Part(params, saved, mms)


def shared_experts(width: Expr, activation: str = "silu", gate: bool = False, share: Expr = Integer(1),
                   source: str = MOE_SOURCE, bias: bool = False) -> Part:
    """The shared expert(s) every token goes through: one gated MLP of total width ``width``
    (DeepSeekMoE §3.2; HF builds one MLP of n_shared × f_e), reading the router's input (declared
    once, by :func:`moe_router`); with ``gate``, a sigmoid gate h → 1 scales its output
    (Qwen2-MoE), which keeps the sigmoid and the shared output for the multiply. ``bias``: biases on
    its three linears (ERNIE-4.5's ``use_bias``), which keep nothing more."""
    dense = mlp("gated", width, activation, bias, prefix="moe/shared", input_name="moe/shared/input", share=share)
    part = Part(dense.params, dense.saved[1:], dense.matmuls)
    if gate:
        part = part + Part(
            (_weight("moe/shared_gate_weight", (h,), source, "h -> 1", share=share),),
            (_tokens("moe/shared/gate_sigmoid", 1, note="sigmoid of the shared-expert gate", source=source,
                     share=share),
             _tokens("moe/shared/output", h, note="the shared experts' output, kept by the gating multiply",
                     source=source, share=share)),
            (Matmul("layer/moe/shared_gate", share, b * s, h, 1, True, "layer", source),))
    return part


def moe_layer(router: Router, expert_ffn: Expr = f_e, experts: Expr = E, top_k: Expr = k,
              shared_width: Expr | None = None, shared_gate: bool = False, share: Expr = Integer(1),
              tokens_per_expert: Expr | None = None, activation: str = "silu", source: str | None = None,
              paper: str = MOE_SOURCE, shared_bias: bool = False) -> Part:
    """The MoE block as a recipe: :func:`moe_router` + :func:`routed_experts` (+
    :func:`shared_experts` when ``shared_width`` is given). ``source``: the implementation the
    saved tensors are cited from (None: each part's own default); ``paper``: the source the
    router's and the routed experts' weights and matmuls cite."""
    cite = {} if source is None else {"source": source}
    if router.dense_experts:
        part = dense_experts(expert_ffn, experts, top_k, share, paper=paper, **cite)
        if shared_width is not None:
            part = part + shared_experts(shared_width, activation, shared_gate, share, bias=shared_bias, **cite)
        return part
    gate = moe_router(router, experts, top_k, share, paper=paper, **cite)
    if router.logits_fp32 and shared_width is None:
        # the router reads its fp32 upcast and the experts' gathers keep only indices: with no shared expert
        # nothing keeps the block's activation-dtype input (traced: ERNIE-4.5 with moe_num_shared_experts 0)
        gate = Part(gate.params, tuple(t for t in gate.saved if t.name != "moe/router_input"), gate.matmuls)
    routed = clamped_swiglu_experts if router.experts == "clamped_swiglu" else routed_experts
    part = gate + routed(router, expert_ffn, experts, top_k, tokens_per_expert, share, activation, paper=paper, **cite)
    if shared_width is not None:
        part = part + shared_experts(shared_width, activation, shared_gate, share, bias=shared_bias, **cite)
    return part


def moe(router: Router, expert_ffn: Expr = f_e, shared_width: Expr | None = None, shared_gate: bool = False,
        share: Expr = Integer(1), tokens_per_expert: Expr | None = None, activation: str = "silu",
        shared_bias: bool = False) -> Part:
    """Routed experts (E of width f_e, top-k), optional shared expert(s) of total width f_s
    (optionally behind a sigmoid gate h→1), as HF's eager experts loop keeps them.

    Parameters: router E×h; stacked gate|up E×2f_e×h and down E×h×f_e.
    Tokens per expert: balanced routing s·b·k/E unless given.
    """
    return moe_layer(router, expert_ffn, E, k, shared_width, shared_gate, share, tokens_per_expert, activation,
                     shared_bias=shared_bias)
