"""The verdict: the peak of one training step on the busiest GPU, as sums of terms.

"It fits" must mean the whole step fits. Seed 004 §02–§03: what decides an
OOM is what is alive at the same instant. On a pipeline the stages differ:
the first holds the most micro-batches in flight, the last holds its layers
plus the output side (final norm, logits, the fp32 log-softmax, the loss).
Intermediate stages hold fewer micro-batches than the first and no output
side, so with even stages the busiest GPU is the first or the last stage
(first order: the model states split evenly over the stages). With uneven
first/last counts a middle stage holds L_m layers and can be the busiest (rank
1: p − 1 in flight under 1F1B), and a stage accounted by its own layers (a
per-chunk layout, placed dense layers) can be any rank: ``bill.derive`` then
takes these instants on every stage it has to (``layout.stages.verdict_mixes``).

For each stage this module lists the instants where the step's memory can
peak — the ends of the phase families of :mod:`symbolic.step.timeline`
(forward of the last layer of the chunk, the loss, the MLP and the attention
half of the backward of that layer, the optimizer step) — each as a sum of
five classes of terms:

``model_states``
    the recipe's byte blocks (the bill's ``model_states`` lines);
``activations``
    the saved tensors of the layers held (chunks in flight × layers per chunk)
    and the recompute window of the layer being back-propagated;
``output_side``
    what the loss keeps (the bill's ``output_side`` lines), on the stage
    that computes the loss;
``transients``
    kernel work tensors (:mod:`symbolic.ledgers.transients`) and the
    optimizer step's fp32 temporaries;
``communication``
    NCCL staging buffers and the gradient bucket (:class:`CommSettings`).

The step's peak on a stage is the largest of its instants, and the verdict
the largest over stages. The same terms placed instant by instant are the
timeline; ``tests/test_verdict.py`` holds the two equal for every built-in
model. Nothing here walks the layers: each instant is one closed form.

Not counted (listed by ``symbolic.bill.evaluate.not_counted`` with an
estimate): the embedding's activations on the first stage, the CUDA context
and kernel workspaces, and allocator fragmentation.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from sympy import Add, Expr, Integer, sympify

from ..core.dims import Psi, d, p, t
from ..core.tensors import DTYPE_BYTES, Group, Inventory
from ..layout.strategies import Strategy, context_parallel, sequence_parallel, tensor_parallel
from .transients import CommSettings, communication_buffers, layer_work_tensors, without_all_to_all

#: The classes an instant's bytes are split into, in the order they print.
CLASSES = ("model_states", "activations", "output_side", "transients", "communication")

SOURCE = "seed 004 §02–§03 (what is alive at the peak instant); phases as symbolic.step.timeline"


@dataclass(frozen=True)
class Instant:
    """One candidate peak instant of a stage: its bytes per class, in the papers' letters."""

    stage: str
    phase: str
    parts: dict[str, Expr]

    @property
    def total(self) -> Expr:
        return Add(*self.parts.values())


def _sum(inventory: Inventory) -> Expr:
    return Add(*(term.bytes for term in inventory))


@dataclass(frozen=True)
class StepTerms:
    """The per-layer inventories one stage's instants are made of (as the timeline builds them)."""

    saved: Inventory            #: saved per layer under the strategy
    saved_attention: Inventory  #: the attention half of a layer's saved tensors
    window_mlp: Inventory       #: recompute window while back-propagating the MLP half
    window_attention: Inventory  #: recompute window while back-propagating the attention half
    forward_work: Inventory
    mlp_work: Inventory
    attention_work: Inventory
    loss_work: Inventory


@lru_cache(maxsize=1024)  # strategies and inventories are frozen: a loop over layouts repeats them
def step_terms(strategy: Strategy, base: Inventory) -> StepTerms:
    """The saved tensors, recompute windows and work tensors of one layer under
    ``strategy`` — the rule of :func:`symbolic.step.timeline.build`.

    Recompute windows: full recompute re-creates the whole layer but its input
    (MLP half) and the attention block (attention half); torchtitan's per-op policy the same
    but for its cached outputs; selective recompute
    re-creates the attention core while the attention half runs (seed 004
    §03.1, §06.3), and with Megatron-Core's ``moe_act`` the experts' activation
    while the MLP half runs. Work tensors are in the compute dtype (fp32 training makes
    the 2-byte ones fp32; FP8 *storage* leaves them alone) and sharded as the
    strategy shards (TP; SP when on; s/c per rank under context parallelism).
    """
    work = layer_work_tensors(base, strategy.loss, strategy.output_weight_grad)
    if not strategy.expert_parallel:
        work = without_all_to_all(work)
    saved = strategy.apply(base)
    compute_dtype = "bf16" if strategy.dtype == "fp8" else strategy.dtype
    whole = replace(strategy, recompute="none", dtype=compute_dtype).apply(base)
    kept = set(saved.names())
    if strategy.recompute == "full":
        window_mlp = Inventory(tuple(x for x in whole if x.group is not Group.LAYER_INPUT))
        window_attention = Inventory(tuple(x for x in whole.select("attention") if x.group is not Group.LAYER_INPUT))
    elif strategy.recompute == "op-sac":
        # torchtitan's per-op policy re-runs the whole block at its backward's start (early_stop=False), as
        # full recompute does, but hands back its cached outputs: what it keeps, and the saved tensors that
        # are those outputs' storage (layout/op_sac.py CACHED_STORAGE), are not re-created
        from ..layout.op_sac import cached_names
        cached = kept | cached_names(strategy.layer_matmuls)
        window_mlp = Inventory(tuple(x for x in whole if x.group is not Group.LAYER_INPUT and x.name not in cached))
        window_attention = Inventory(tuple(x for x in whole.select("attention")
                                           if x.group is not Group.LAYER_INPUT and x.name not in cached))
    elif strategy.recompute == "selective":
        # Megatron-Core's moe_act recomputes the experts' activation in the MLP half's backward;
        # core_attn the attention core in the attention half's (as the timeline places them)
        expert_activation = (Group.EXPERT_ACTIVATION, Group.EXPERT_ACTIVATION_OUTPUT)
        window_mlp = Inventory(tuple(x for x in whole if x.name not in kept and x.group in expert_activation))
        window_attention = Inventory(tuple(x for x in whole if x.name not in kept and x.group not in expert_activation))
    else:
        window_mlp = window_attention = Inventory(())
    if strategy.dtype == "fp32":
        work = work.map(lambda x: replace(x, dtype="fp32") if x.dtype == "bf16" else x, "dtype")
    if strategy.context_parallel:
        work = context_parallel(work)
    work = tensor_parallel(work)
    if strategy.sequence_parallel:
        work = sequence_parallel(work)
    work = strategy.dispatch(work)  # the experts' gradients as their activations: after dispatch (f_e/e_t wide)
    forward_work = work.select("forward")
    if strategy.recompute != "none":
        # the tensors recompute drops are still produced in forward, in the same kernel window
        forward_work = Inventory(forward_work.terms + tuple(
            x for x in whole if x.group is Group.ATTENTION_CORE and x.name not in kept))
    return StepTerms(saved, saved.select("attention"), window_mlp, window_attention, forward_work,
                     work.select("backward/mlp"), work.select("backward/attention"), work.select("loss"))


#: The per-layer terms an instant is made of, and the class each belongs to.
BASIS = {"per_layer": "activations", "attention_half": "activations", "window_mlp": "activations",
         "window_attention": "activations", "forward_work": "transients", "mlp_work": "transients",
         "attention_work": "transients", "loss_work": "transients", "output_side": "output_side",
         "gathered_weights": "transients"}


def basis(strategy: Strategy, base: Inventory, output_saved: Inventory,
          gathered: Expr = Integer(0)) -> dict[str, Expr]:
    """The bytes of each :data:`BASIS` term for one micro-batch and one layer (the output side: once;
    ``gathered``: ZeRO-3's gathered weights, :func:`gathered_weights`)."""
    return dict(_basis(strategy, base, output_saved, gathered))


@lru_cache(maxsize=1024)
def _basis(strategy: Strategy, base: Inventory, output_saved: Inventory, gathered: Expr) -> tuple:
    """:func:`basis`, memoised (its arguments are frozen: a loop over layouts repeats them), as items."""
    terms = step_terms(strategy, base)
    return tuple({"per_layer": _sum(terms.saved), "attention_half": _sum(terms.saved_attention),
                  "window_mlp": _sum(terms.window_mlp), "window_attention": _sum(terms.window_attention),
                  "forward_work": _sum(terms.forward_work), "mlp_work": _sum(terms.mlp_work),
                  "attention_work": _sum(terms.attention_work), "loss_work": _sum(terms.loss_work),
                  "output_side": _sum(output_saved), "gathered_weights": gathered}.items())


def compositions(in_flight: Expr, layers: Expr, has_loss: bool,
                 activation_offload: bool = False) -> list[tuple[str, list[tuple[Expr, str]]]]:
    """Each candidate instant but the optimizer step as (phase, [(multiplicity, basis term)]).

    ``in_flight`` (k) chunks of ``layers`` (n) layers: the k − 1 earlier chunks held whole and the
    current one up to its last layer make k·n layers' saved tensors (one less, plus the attention
    half, while that layer's attention half is back-propagated). ``activation_offload``: the saved
    tensors stream to CPU memory; the GPU keeps a double buffer — two layers' worth — at every
    instant (seed 004 §05.2), as the timeline's activation-offload option."""
    one = Integer(1)
    if activation_offload:
        double = Integer(2)
        gathered = (one, "gathered_weights")
        out = [("forward, last layer of the chunk", [(double, "per_layer"), (one, "forward_work"), gathered])]
        if has_loss:
            out.append(("loss", [(double, "per_layer"), (one, "loss_work"), (one, "output_side"), gathered]))
        out.append(("backward, last layer (MLP half)", [(double, "per_layer"), (one, "window_mlp"),
                                                        (one, "mlp_work"), gathered]))
        out.append(("backward, last layer (attention half)", [(double, "per_layer"), (one, "window_attention"),
                                                              (one, "attention_work"), gathered]))
        return out
    held = in_flight * layers
    gathered = (one, "gathered_weights")  # alive while any layer computes, not at the optimizer step
    out = [("forward, last layer of the chunk", [(held, "per_layer"), (one, "forward_work"), gathered])]
    if has_loss:
        out.append(("loss", [(held, "per_layer"), (one, "loss_work"), (one, "output_side"), gathered]))
    out.append(("backward, last layer (MLP half)", [(held, "per_layer"), (one, "window_mlp"), (one, "mlp_work"),
                                                    gathered]))
    out.append(("backward, last layer (attention half)", [(held - 1, "per_layer"), (one, "attention_half"),
                                                          (one, "window_attention"), (one, "attention_work"),
                                                          gathered]))
    return out


def gathered_weights(param_inv, param_bytes, zero: int) -> Expr:
    """ZeRO-3's working set: the parameters gathered to compute (Rajbhandari et al. 2019 §5.3;
    DeepSpeed stage 3 all-gathers each submodule's parameters before its forward and backward and
    frees them after, prefetching the next): the largest weight matrix of a layer, gathered, and one
    prefetched, ``param_bytes`` each entry, split by t. 0 below ZeRO-3 (the weights are whole)."""
    if zero != 3:
        return Integer(0)
    from sympy import Mul
    matrices = tuple(Mul(*term.shape[-2:]) for term in param_inv if term.scope == "layer" and len(term.shape) >= 2)
    return 2 * param_bytes * _largest(matrices) / t


@lru_cache(maxsize=1 << 10)
def _largest(matrices: tuple) -> Expr:
    """``Max(*matrices)``, once per distinct tuple in a process: sympy's Max compares its symbolic
    arguments pairwise to drop those it can prove smaller (``_find_localzeros``, ~0.1 s a call), and every
    derivation at ZeRO-3 and the calculator page's formulas ask it of the same few inventories."""
    from sympy import Max
    return Max(*matrices)


def stage_instants(stage: str, strategy: Strategy, base: Inventory, output_saved: Inventory,
                   state_blocks: dict[str, Expr], optimizer_temporary: Expr, comm: list[tuple[str, int]],
                   has_loss: bool, gathered: Expr = Integer(0), activation_offload: bool = False) -> list[Instant]:
    """The candidate peak instants of one pipeline stage.

    ``strategy``: the stage's (its chunks in flight, ``Strategy.layers_held``).
    ``output_saved``: the output side, sharded (held only if ``has_loss``).
    ``state_blocks``: model-state bytes per GPU by block (in Psi).
    ``optimizer_temporary``: the optimizer step's fp32 temporaries.
    ``comm``: (name, bytes) communication buffers, held throughout (the EP all-to-all's in the letters).
    ``gathered``: ZeRO-3's gathered weights (:func:`gathered_weights`).

    The instants are the ends of the timeline's phase families (each family
    grows with the layer index, so its end is its largest instant): the
    forward of the chunk's last layer, the loss, the MLP and the attention
    half of that layer's backward (:func:`compositions`), and the optimizer step.
    """
    terms = basis(strategy, base, output_saved, gathered)
    in_flight, layers = strategy.layers_held()
    states_bytes = Add(*state_blocks.values())
    communication = Add(*(sympify(size) for _, size in comm))

    def instant(phase: str, parts: dict[str, Expr]) -> Instant:
        return Instant(stage, phase, {"model_states": states_bytes, "activations": parts.get("activations", Integer(0)),
                                      "output_side": parts.get("output_side", Integer(0)),
                                      "transients": parts.get("transients", Integer(0)),
                                      "communication": communication})

    out = [instant(phase, dict(parts))
           for phase, parts in _composed(tuple(terms.items()), in_flight, layers, has_loss, activation_offload)]
    out.append(instant("optimizer step", {"transients": optimizer_temporary}))
    return out


@lru_cache(maxsize=1024)
def _composed(terms: tuple, in_flight: Expr, layers: Expr, has_loss: bool, activation_offload: bool) -> tuple:
    """Each instant of :func:`compositions` as (phase, its classes' bytes as items), from the
    :data:`BASIS` terms' items: memoised, since the kinds of a loop that differ only in their model
    states (ZeRO, the optimizer) or FLOPs share a stage's activations, and sympy's sums were most
    of :func:`stage_instants`."""
    terms = dict(terms)
    out = []
    for phase, composition in compositions(in_flight, layers, has_loss, activation_offload):
        parts: dict[str, Expr] = {}
        for multiplicity, name in composition:
            parts[BASIS[name]] = parts.get(BASIS[name], Integer(0)) + multiplicity * terms[name]
        out.append((phase, tuple(parts.items())))
    return tuple(out)


def optimizer_temporary(zero: int, context_parallel: Expr = Integer(1), trainable: Expr = Psi,
                        pipeline_parallel: Expr = p) -> Expr:
    """The optimizer step's temporaries: one fp32 value per trainable parameter
    of the GPU's shard (PyTorch's ``foreach`` Adam; seed 004 §02.3), the shard
    being trainable/(t·p), over d·c more with ZeRO ≥ 1. A fused optimizer
    kernel (apex/DeepSpeed FusedAdam) or a CPU step has none. ``pipeline_parallel``:
    p, or L/L_1 (L/L_p) on the first (last) of uneven stages."""
    return DTYPE_BYTES["fp32"] * trainable / (t * pipeline_parallel * (d * context_parallel if zero >= 1 else 1))


def comm_buffers(model, layout, settings: CommSettings = CommSettings()) -> list[tuple[str, Expr]]:
    """The communication buffers of ``model`` under ``layout``
    (:func:`symbolic.ledgers.transients.communication_buffers`: NCCL staging,
    the gradient bucket, the expert-parallel all-to-all's staging)."""
    return communication_buffers(model, layout, settings)


# --- stages accounted by their own layers (symbolic.layout.stages) ---------------------------------

def kind_basis(strategy: Strategy, base: Inventory, output_saved: Inventory, kinds,
               gathered: Expr = Integer(0)) -> dict[str, dict[str, Expr]]:
    """:func:`basis` for one layer of each kind (``symbolic.layout.stages.in_kind``: the averaged
    layer of a model with dense layers made an MoE or a dense one)."""
    from ..layout.stages import in_kind
    terms = basis(strategy, base, output_saved, gathered)
    return {kind: {name: in_kind(expr, kind) for name, expr in terms.items()} for kind in kinds}


def moment_compositions(mix, moment, v: int, activation_offload: bool = False
                        ) -> list[tuple[str, list[tuple[int, str, str]]]]:
    """The candidate instants of one moment of a stage's schedule as (phase, [(multiplicity, kind,
    basis term)]): the chunk run walked layer by layer, the other in-flight chunks held whole.

    Forward: for each kind in the chunk, its last layer (layers 1..i saved, that layer's forward
    work); the loss after the last chunk's forward on the stage that computes it. Backward: for each
    kind, its last layer's MLP half (layers 1..i saved, the MLP window and work) and attention half
    (layers 1..i − 1, the layer's attention half, the attention window and work). Each family grows
    with i (saved tensors are non-negative), so within a run of one kind its last layer is its
    largest instant; the other instants are below one of these. ``activation_offload``: two layers
    of the kind on the GPU (the double buffer), nothing held."""
    chunk = mix.chunks[moment.chunk]
    label = moment.label(max(v, len(mix.chunks)))
    one = 1
    out = []

    def held():
        return [] if activation_offload else [(n, kind, "per_layer") for kind, n in moment.held]

    def prefix(upto: int) -> list[tuple[int, str, str]]:
        if activation_offload:
            return []
        counts: dict[str, int] = {}
        for kind in chunk[:upto]:
            counts[kind] = counts.get(kind, 0) + 1
        return [(n, kind, "per_layer") for kind, n in counts.items()]

    def last_index(kind: str) -> int:
        return max(index for index, k in enumerate(chunk, 1) if k == kind)

    def named(kind: str) -> str:
        return "" if kind == "layer" else f"{kind} "

    kinds_here = [k for k in dict.fromkeys(chunk)]
    for kind in kinds_here:
        n = last_index(kind)
        double = [(2, kind, "per_layer")] if activation_offload else []
        gathered = [(one, kind, "gathered_weights")]
        if moment.direction == "forward":
            out.append((f"forward, last {named(kind)}layer of the chunk ({label})",
                        held() + prefix(n) + double + [(one, kind, "forward_work")] + gathered))
        else:
            out.append((f"backward, last {named(kind)}layer (MLP half) ({label})",
                        held() + prefix(n) + double + [(one, kind, "window_mlp"), (one, kind, "mlp_work")] + gathered))
            attention = ([(-1, kind, "per_layer"), (one, kind, "attention_half")] if not activation_offload else [])
            out.append((f"backward, last {named(kind)}layer (attention half) ({label})",
                        held() + prefix(n) + double + attention
                        + [(one, kind, "window_attention"), (one, kind, "attention_work")] + gathered))
    if moment.direction == "forward" and mix.is_loss_chunk(moment.chunk):
        kind = chunk[-1] if chunk else mix.kinds()[0]
        double = [(2, kind, "per_layer")] if activation_offload else []
        out.append((f"loss ({label})", held() + prefix(len(chunk)) + double
                    + [(one, kind, "loss_work"), (one, kind, "output_side"), (one, kind, "gathered_weights")]))
    return out


def mixed_stage_instants(mix, v: int, strategy: Strategy, base: Inventory, output_saved: Inventory,
                         state_blocks: dict[str, Expr], optimizer_temporary: Expr, comm: list[tuple[str, int]],
                         gathered: Expr = Integer(0), activation_offload: bool = False) -> list[Instant]:
    """The candidate peak instants of a stage accounted by its own layers
    (:func:`symbolic.layout.stages.stage_mix`): every moment of its schedule not dominated by
    another (:func:`moment_compositions`), and the optimizer step. The timeline walks the largest
    forward and the largest backward moment; the two agree instant for instant."""
    terms = kind_basis(strategy, base, output_saved, mix.kinds(), gathered)
    states_bytes = Add(*state_blocks.values())
    communication = Add(*(sympify(size) for _, size in comm))

    def instant(phase: str, parts: dict[str, Expr]) -> Instant:
        return Instant(mix.stage, phase, {"model_states": states_bytes,
                                          "activations": parts.get("activations", Integer(0)),
                                          "output_side": parts.get("output_side", Integer(0)),
                                          "transients": parts.get("transients", Integer(0)),
                                          "communication": communication})

    out = []
    for moment in mix.moments:
        for phase, composition in moment_compositions(mix, moment, v, activation_offload):
            parts: dict[str, Expr] = {}
            for multiplicity, kind, name in composition:
                parts[BASIS[name]] = parts.get(BASIS[name], Integer(0)) + multiplicity * terms[kind][name]
            out.append(instant(phase, parts))
    out.append(instant("optimizer step", {"transients": optimizer_temporary}))
    return out
