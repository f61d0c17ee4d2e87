"""Which layers each pipeline stage and each of its model chunks holds, and what a stage keeps alive.

Megatron-Core (NVIDIA/Megatron-LM at d98e8a6, 2026-08-22) assigns the L decoder layers to p
pipeline ranks × v virtual chunks in one of three ways, and this module follows each:

* even (``megatron/core/transformer/transformer_block.py`` ``get_num_layers_to_build``): every
  chunk L/(p·v) layers; ``num_layers % pipeline_model_parallel_size == 0`` and the stage's layers
  ``% vp_size == 0`` are asserted;
* uneven first/last stages (``num_layers_in_first_pipeline_stage`` /
  ``num_layers_in_last_pipeline_stage``): the given stages hold their counts, the others divide the
  rest evenly, and under the interleaved schedule every stage's count must be a multiple of v (each
  chunk of a stage holds count/v layers; ``transformer_config.py`` raises "number of layers at
  first stage ... must be divisible by virtual pipeline parallel degree");
* a per-chunk layout (``pipeline_model_parallel_layout``,
  ``megatron/core/transformer/pipeline_parallel_layer_layout.py``): a string of the p·v virtual
  stages separated by ``|`` in layer order — virtual stage ``vpp_rank·p + pp_rank`` — each a run of
  ``E`` (embedding), ``t`` (decoder layer), ``m`` (MTP layer), ``L`` (loss); ``x*n`` and ``(…)*n``
  repeat, commas are cosmetic, empty stages are allowed. It is the only way to lay 61 layers on
  PP4 × VPP4 (61 is not a multiple of 4, so no first/last split is valid).

In every case layer ids follow the chunks in that flat order (``get_transformer_layer_offset``):
round j of the virtual stages holds the layers after round j − 1's.

A stage's fullest moments come from Megatron-LM's interleaved 1F1B schedule
(``megatron/core/pipeline_parallel/schedules.py`` ``forward_backward_pipelining_with_interleaving``,
``get_model_chunk_id``; v = 1 is plain 1F1B), simulated op by op: which (micro-batch, chunk)
forwards are alive when each forward or backward runs. With chunks of different layer mixes (the
dense-first layers of DeepSeek-V3 in the first chunk, a short chunk beside the embedding) those
moments hold different layers, so every moment not dominated by another is a candidate of the peak.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from ..models.config import ConfigError, ModelConfig
from .schedules import schedule  # noqa: F401 (Megatron-LM's order of a rank's ops: read here, kept importable)

MEGATRON_COMMIT = "NVIDIA/Megatron-LM d98e8a6"
LAYOUT_SOURCE = (f"Megatron-Core pipeline_model_parallel_layout (megatron/core/transformer/"
                 f"pipeline_parallel_layer_layout.py, {MEGATRON_COMMIT})")
SCHEDULE_SOURCE = (f"Megatron-LM schedules.py forward_backward_pipelining_with_interleaving / "
                   f"get_model_chunk_id ({MEGATRON_COMMIT})")

#: The characters of a layout string (PipelineParallelLayerLayout.parse_str_to_list's char2layer_type).
LAYOUT_CHARS = {"E": "embedding", "t": "decoder", "m": "mtp", "L": "loss"}
#: The longest layout a user may give, unrolled (the largest published models have ~10^2 layers).
MAX_LAYOUT_ITEMS = 100_000

#: The kind of a layer whose model has one kind only; ``moe`` and ``dense`` split a model with dense layers.
KINDS = ("layer", "moe", "dense")


def parse_pipeline_layout(text: str, pp: int) -> tuple[str, ...]:
    """The virtual stages of a Megatron-Core layout string, in its flat (layer) order.

    Parsed as ``PipelineParallelLayerLayout.parse_str_to_list``: commas removed, ``(…)*n`` then
    ``x*n`` unrolled, split at ``|``. Each stage is a string over E, t, m, L. Raises
    :class:`ConfigError` (one line) on a character Megatron does not know, on a length that is not
    a multiple of ``pp``, and on a layout too long to be a model's."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("pipeline-layout must be a Megatron-Core layout string such as 'Et|(tt|)*3,tL'")
    flat = text.replace(",", "").replace(" ", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        def unroll(match: re.Match) -> str:
            count = int(match.group(2)) if len(match.group(2)) <= 6 else MAX_LAYOUT_ITEMS + 1
            if len(match.group(1)) * count > MAX_LAYOUT_ITEMS:
                raise ConfigError(f"pipeline-layout {text[:40]!r} unrolls to more than {MAX_LAYOUT_ITEMS:,} "
                                  "items: give one layer per 't', a model's layer count")
            return match.group(1) * count
        flat = re.sub(pattern, unroll, flat)
        if len(flat) > MAX_LAYOUT_ITEMS:
            raise ConfigError(f"pipeline-layout unrolls to more than {MAX_LAYOUT_ITEMS:,} items")
    stages = tuple(flat.split("|"))
    for stage in stages:
        bad = next((ch for ch in stage if ch not in LAYOUT_CHARS), None)
        if bad is not None:
            raise ConfigError(f"pipeline-layout: {bad!r} is not a layer of Megatron-Core's layout (E embedding, "
                              "t decoder layer, m MTP layer, L loss; | between stages, x*n and (...)*n repeat)")
    if len(stages) % pp:
        raise ConfigError(f"pipeline-layout has {len(stages)} stages, not a multiple of pp ({pp}): Megatron-Core "
                          "needs p·v virtual stages (pipeline_model_parallel_layout must be divisible by "
                          "pipeline_model_parallel_size)")
    return stages


def validate_pipeline_layout(stages: tuple[str, ...], layers: int, pp: int, interleave: int) -> None:
    """Megatron-Core's ``validate_layer_layout`` rules the engine needs, and its own placement.

    The layout's virtual stages over p must be the layout's v (Megatron asserts
    ``virtual_pipeline_model_parallel_size`` equals the detected one); the flat order starts with the
    embedding and ends with the loss, once each; the decoder layers number L. MTP layers (``m``)
    are refused: the engine states DeepSeek-V3's MTP module apart and does not bill it. The engine
    accounts the embedding on the first stage and the loss on the last: E must open pp rank 0's first
    chunk and L close pp rank p − 1's last."""
    v = len(stages) // pp
    if v != interleave:
        raise ConfigError(f"pipeline-layout has {len(stages)} stages = pp {pp} × {v}: set --interleave {v} "
                          f"(Megatron-Core: virtual_pipeline_model_parallel_size conflicts with the layout)")
    flat = "".join(stages)
    if flat.count("E") != 1 or flat.count("L") != 1 or not flat.startswith("E") or not flat.endswith("L"):
        raise ConfigError("pipeline-layout must start with the embedding E and end with the loss L, each once "
                          "(Megatron-Core validate_layer_layout)")
    if not stages[0].startswith("E") or not stages[-1].endswith("L"):
        raise ConfigError("pipeline-layout: the embedding E must open the first stage and the loss L close the "
                          "last (the engine accounts them on the first and the last pipeline stage)")
    if "m" in flat:
        raise ConfigError("pipeline-layout: MTP layers (m) are not billed — DeepSeek-V3's MTP module is stated "
                          "apart; drop the m (Megatron-Core with mtp_num_layers = 0)")
    decoders = flat.count("t")
    if decoders != layers:
        raise ConfigError(f"pipeline-layout has {decoders} decoder layers (t), the model {layers}: Megatron-Core "
                          "requires them equal (validate_layer_layout); give one t per layer")


def chunk_ranges(layers: int, pp: int, interleave: int = 1, first: int = 0, last: int = 0,
                 layout: str = "", placement: str = "loop") -> tuple[tuple[range, ...], ...]:
    """The decoder layer ids of each pp rank's v chunks: ``out[rank][chunk]`` is a ``range``.

    ``layout``: a Megatron-Core layout string (:func:`parse_pipeline_layout`); else ``first`` /
    ``last`` (0: Megatron's None) with its rule that every stage's count is a multiple of v; else
    even chunks. Layer ids run through the virtual stages in flat order (round by round, rank by
    rank), as ``get_transformer_layer_offset``. Raises :class:`ConfigError` where Megatron refuses.
    ``placement`` (``schedules.Schedule.placement``): which virtual stages a rank holds — ``loop``
    (Megatron's), ``v`` (stages r and 2p − 1 − r), ``dual`` (DualPipe: stages r and p − 1 − r of p).
    """
    v = interleave
    if layout:
        stages = parse_pipeline_layout(layout, pp)
        validate_pipeline_layout(stages, layers, pp, v)
        sizes = [stage.count("t") for stage in stages]
    else:
        per_stage = stage_layers(layers, pp, v, first, last)
        sizes = [per_stage[rank] // v for _ in range(v) for rank in range(pp)]
    out: list[list[range]] = [[] for _ in range(pp)]
    start = 0
    flat = []
    for size in sizes:
        flat.append(range(start, start + size))
        start += size
    if placement == "v":       # the V (torchtitan's style="v"): rank r holds virtual stages r and 2p − 1 − r
        return tuple((flat[rank], flat[2 * pp - 1 - rank]) for rank in range(pp))
    if placement == "dual":    # DualPipe: p stages, rank r holds stage r and stage p − 1 − r
        return tuple((flat[rank], flat[pp - 1 - rank]) for rank in range(pp))
    for index, chunk in enumerate(flat):  # flat order: virtual stage vpp_rank·p + pp_rank
        out[index % pp].append(chunk)
    return tuple(tuple(chunks) for chunks in out)


def balanced_layout(layers: int, pp: int, interleave: int) -> str:
    """A layout string for ``layers`` over pp × interleave virtual stages, as even as whole layers
    allow, the shorter chunks beside the embedding and the loss (first and last virtual stage, then
    inwards): what the refusal of an indivisible count suggests."""
    n = pp * interleave
    base, extra = divmod(layers, n)
    sizes = [base + 1] * n
    short = n - extra
    order = [i for pair in zip(range(n), range(n - 1, -1, -1)) for i in pair]
    for index in list(dict.fromkeys(order))[:short]:
        sizes[index] = base
    parts = []
    for index, size in enumerate(sizes):
        body = f"t*{size}" if size > 1 else ("t" if size else "")
        parts.append(("E" if index == 0 else "") + body + ("L" if index == n - 1 else ""))
    # run-length: consecutive equal stages as (x|)*k (the first holds E and the last L: never in a run)
    out, i = [], 0
    while i < len(parts):
        j = i
        while j + 1 < len(parts) and parts[j + 1] == parts[i]:
            j += 1
        run = j - i + 1
        out.append(f"({parts[i]}|)*{run}" if run > 1 else parts[i] + "|")
        i = j + 1
    return "".join(out)[:-1]


# --- stage layer counts: Megatron-Core's first/last rule ------------------------------------------

MEGATRON_STAGES = ("Megatron-Core megatron/core/transformer/transformer_block.py get_num_layers_to_build "
                   "(num_layers_in_first/last_pipeline_stage; --decoder-first/last-pipeline-num-layers)")


def stage_layers(layers: int, pp: int, interleave: int = 1, first: int = 0, last: int = 0,
                 layout: str = "") -> tuple[int, ...]:
    """Transformer layers on each of the ``pp`` pipeline stages, first to last.

    ``layout``: a Megatron-Core ``pipeline_model_parallel_layout`` string; each stage then holds the
    decoder layers of its v chunks (:func:`symbolic.layout.stages.chunk_ranges`), any counts.

    Megatron-Core's ``get_num_layers_to_build``: with neither ``first`` nor
    ``last`` (0 = Megatron's None) every stage holds L/p; with either, that
    stage holds the given count and the layers left are divided evenly over
    the stages left — "With uneven pipelineing the left over layers must be
    divisible by left over stages" — and under the interleaved schedule every
    stage's count must be divisible by the chunks per stage (its assertion
    ``num_layers_per_pipeline_rank % vp_size == 0``). Stages with no layer are
    refused here (Megatron builds them empty). Raises :class:`ConfigError`
    naming the field and the fix when the split is not valid.
    """
    if layout:
        if first or last:
            raise ConfigError("pipeline-layout cannot be set with first/last-stage layers (Megatron-Core: "
                              "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments)")
        return tuple(sum(len(r) for r in chunks) for chunks in chunk_ranges(layers, pp, interleave, layout=layout))
    if not (first or last):
        if layers % (pp * interleave):
            raise ConfigError(indivisible_layers(layers, pp, interleave))
        return (layers // pp,) * pp
    for name, value in (("first_stage_layers", first), ("last_stage_layers", last)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{name} must be a whole number of layers (0: even stages), not {value!r}")
    if pp == 1:
        raise ConfigError("first/last-stage layers split a pipeline: set pp > 1, or drop them")
    if interleave > 1 and layers % interleave:
        raise ConfigError(f"with interleave {interleave} every stage's layer count must be divisible by {interleave} "
                          f"(Megatron-Core: num_layers_per_pipeline_rank % vp_size == 0), and {layers} is not a "
                          f"multiple of {interleave}, so no first/last split can be: choose interleave 1, one "
                          f"that divides {layers}, or a per-chunk layout (bill, timeline) such as --pipeline-layout "
                          f"'{_suggested_layout(layers, pp, interleave)}'")
    given = (first > 0) + (last > 0)
    if interleave > 1 and first and last and pp == 2:
        # get_transformer_layer_offset divides the middle chunk's layers by the middle stages, 0 here
        raise ConfigError("first- and last-stage layers both set with pp 2 and interleave: Megatron-Core has no middle "
                          "stage to divide by (get_transformer_layer_offset raises ZeroDivisionError at d98e8a6); "
                          "set one of them, or give a per-chunk --pipeline-layout")
    left, rest = pp - given, layers - first - last
    if rest < 0 or (left == 0 and rest):
        raise ConfigError(f"first_stage_layers + last_stage_layers ({first}+{last}) must "
                          + (f"equal the layers ({layers}) with pp {pp}" if left == 0 and rest > 0 else
                             f"not exceed the layers ({layers})"))
    if left and (rest <= 0 or rest % left):
        raise ConfigError(f"the {rest} layers left after the first/last stages must divide evenly over the "
                          f"{left} other stages ({MEGATRON_STAGES}): choose counts that leave a multiple of {left}")
    middle = rest // left if left else 0
    stages = ((first or middle),) + (middle,) * (pp - 2) + ((last or middle),)
    if interleave > 1 and any(n % interleave for n in stages):
        raise ConfigError(f"with interleave {interleave} every stage's layer count must be divisible by "
                          f"{interleave} (Megatron-Core: num_layers_per_pipeline_rank % vp_size == 0), not "
                          f"{'/'.join(map(str, stages))}: choose other counts or interleave 1")
    return stages


def balanced_splits(layers: int, pp: int) -> tuple[tuple[int, int], ...]:
    """The uneven splits a plan searches when ``layers`` do not divide over ``pp`` stages: Megatron-Core's
    ``num_layers_in_first_pipeline_stage`` / ``num_layers_in_last_pipeline_stage`` (``--decoder-first-pipeline-
    num-layers`` / ``--decoder-last-pipeline-num-layers``; 0 = its None, the stage as the middle ones), as
    :func:`stage_layers` reads them, for every distinct list of stage counts in which no stage holds more than
    ⌈L/p⌉ layers — the fewest a pipeline's fullest stage can hold, and the fullest stage paces the step
    (``ledgers.time.pacing_stage``). Each list once, in its shortest spelling (a count equal to the middle
    stages' left as 0). DeepSeek-V3's 61 layers on 16 stages: (1, 0), (2, 3), (3, 2), (0, 1) — first/middle/last
    1/4/4, 2/4/3, 3/4/2, 4/4/1. Empty where ``layers`` divide (even stages) or p = 1."""
    if pp < 2 or layers % pp == 0 or layers < pp:
        return ()
    most = -(-layers // pp)
    found = []
    for middle in range(1, most + 1) if pp > 2 else (0,):
        rest = layers - (pp - 2) * middle
        for first in range(1, most + 1):
            last = rest - first
            if not 1 <= last <= most:
                continue
            if pp == 2:
                split = (first, 0)  # one given stage: the other holds the rest (get_num_layers_to_build)
            else:
                split = (0 if first == middle else first, 0 if last == middle else last)
            if split != (0, 0) and split not in found:
                found.append(split)
    return tuple(found)


def lightest_ends(splits: tuple[tuple[int, int], ...], layers: int, pp: int) -> tuple[int, int]:
    """Of :func:`balanced_splits`, the one whose first and last stages are the lightest: the smallest of the two
    largest (the first stage holds the most micro-batches in flight and the embedding, the last the output side),
    ties to the lighter first stage. DeepSeek-V3's 61 layers on 16 stages: (2, 3), 2/4/3."""
    def ends(split):
        stages = stage_layers(layers, pp, 1, *split)
        return (max(stages[0], stages[-1]), stages[0])
    return min(splits, key=ends)


def account_for_split_layout(layers: int, pp: int, interleave: int = 1, embedding: bool = False,
                             loss: bool = False) -> str:
    """Megatron-Core's ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``
    as the per-chunk layout string it builds (``get_num_layers_to_build``,
    megatron/core/transformer/transformer_block.py, and its checks in transformer_config.py,
    {commit}): the embedding and the loss each count as one layer, the L + e + l "layers" divide over
    the p stages (``num_layers % pipeline_model_parallel_size == 0``) and each stage's share over its v
    chunks (``num_layers_per_pipeline_rank % vp_size == 0``); every chunk builds that many, less one on
    the first chunk of the first stage (the embedding) and on the last chunk of the last stage (the
    loss). Raises :class:`ConfigError` naming the rule where a count does not divide or a chunk would
    build fewer than 0 layers.""".format(commit=MEGATRON_COMMIT)
    if not (embedding or loss):
        raise ConfigError("account-for-embedding/loss-in-pipeline-split: set at least one of them")
    counted = layers + int(embedding) + int(loss)
    rule = (f"Megatron-Core transformer_config.py ({MEGATRON_COMMIT}): with account_for_embedding/loss_in_pipeline_"
            f"split the {layers} layers count as {counted}")
    if counted % pp:
        raise ConfigError(f"{rule}, which must be divisible by pp ({pp}): choose a pp that divides {counted}")
    per_stage = counted // pp
    if per_stage % interleave:
        raise ConfigError(f"{rule}: {per_stage} a stage, which must be divisible by the interleave ({interleave}): "
                          f"choose an interleave that divides {per_stage}")
    per_chunk = per_stage // interleave
    chunks = [per_chunk] * (pp * interleave)
    chunks[0] -= int(embedding)
    chunks[-1] -= int(loss)
    if min(chunks) < 0:
        raise ConfigError(f"{rule}: not enough layers in the first or last virtual pipeline stage (Megatron-Core's "
                          "assertion in get_num_layers_to_build)")
    parts = [("E" if i == 0 else "") + "t" * n + ("L" if i == len(chunks) - 1 else "") for i, n in enumerate(chunks)]
    return "|".join(parts)


def _suggested_layout(layers: int, pp: int, interleave: int) -> str:
    return balanced_layout(layers, pp, interleave)


@lru_cache(maxsize=4096)  # a function of three ints; a sweep (plan's, the tests') refuses the same ones often
def indivisible_layers(layers: int, pp: int, interleave: int) -> str:
    """The refusal of L layers that do not divide over pp × interleave, with Megatron-Core's rule and the fixes."""
    rule = ("Megatron-Core: num_layers % pipeline_model_parallel_size == 0 and each stage's layers % vp_size == 0"
            if interleave > 1 else "Megatron-Core: num_layers % pipeline_model_parallel_size == 0")
    fixes = ("uneven stages (--first-stage-layers/--last-stage-layers, each a multiple of the interleave)"
             if interleave > 1 and layers % interleave == 0 else
             "uneven stages (--first-stage-layers, --last-stage-layers)" if interleave == 1 else "")
    layout = (f"a per-chunk layout (bill, timeline) such as --pipeline-layout "
              f"'{_suggested_layout(layers, pp, interleave)}'")
    # the largest pp ≤ this one whose stages hold whole chunks (a pipeline: pp ≥ 2 under interleaving)
    from .suggest import largest_divisor, try_flags

    fewer = largest_divisor(pp, layers // interleave if layers % interleave == 0 else 0, floor=2 if interleave > 1
                            else 1) if layers % interleave == 0 else None
    concrete = try_flags(f"--pp {fewer}" if fewer else "--interleave 1" if layers % pp == 0 else "--pp 1")
    return (f"layers ({layers}) must be divisible by pp×interleave ({pp}×{interleave}) ({rule}): choose sizes "
            f"that divide the layer count, " + (f"{fixes}, or " if fixes else "or ") + layout + f"; {concrete}")



# --- the schedule ---------------------------------------------------------------------------------

def simulated_micro_batches(pp: int, interleave: int, micro_batches: int) -> int:
    """The micro-batches the schedule is simulated with: m itself up to 8p; beyond, 8p (with the same
    remainder mod p). The schedule is periodic: its warm-up (< (v + 1)·p forwards) and its cool-down
    do not depend on m once m ≥ 2p, and its steady state repeats every p·v ops, so more micro-batches
    add no new moment (``tests/test_stages.py`` holds 8p and 12p equal)."""
    if micro_batches <= 8 * pp:
        return micro_batches
    return 8 * pp + micro_batches % pp


@dataclass(frozen=True)
class Moment:
    """One op of a stage's schedule, as far as memory goes: the ``chunk`` run (``forward`` or
    ``backward``), and the layers of every other in-flight chunk instance, held whole, by kind."""

    direction: str
    chunk: int
    held: tuple[tuple[str, int], ...]
    #: the other chunk instances in flight (not part of the moment's identity: only their layers count)
    chunks_held: int = field(default=0, compare=False)

    def held_count(self, kind: str) -> int:
        return dict(self.held).get(kind, 0)

    def label(self, v: int) -> str:
        held = " + ".join(f"{n} {kind}" for kind, n in self.held if n) or "none"
        return f"chunk {self.chunk + 1}/{v}, held: {held}"


@dataclass(frozen=True)
class StageMix:
    """What one pipeline stage holds: its chunks' layer kinds (in layer order), whether it holds the
    embedding and the loss, and the moments of its schedule that can be its peak."""

    stage: str
    rank: int
    chunks: tuple[tuple[str, ...], ...]
    moments: tuple[Moment, ...]
    embedding: bool
    loss: bool
    #: the chunk after whose forward the loss runs: -1 its last (Megatron's, the V's); DualPipe's rank p − 1
    #: holds the last stage as its chunk 0
    loss_chunk: int = -1

    def is_loss_chunk(self, chunk: int) -> bool:
        """Whether the loss runs after the forward of ``chunk`` on this stage."""
        return self.loss and chunk == (self.loss_chunk if self.loss_chunk >= 0 else len(self.chunks) - 1)

    def layers(self, kind: str | None = None) -> int:
        """The stage's decoder layers (of ``kind``)."""
        return sum(1 for chunk in self.chunks for k in chunk if kind is None or k == kind)

    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k in KINDS if self.layers(k))

    def key(self) -> tuple:
        """Hashable and JSON-able: the derivation cache's key."""
        return (self.stage, self.chunks, tuple((m.direction, m.chunk, m.held) for m in self.moments),
                self.embedding, self.loss) + ((self.loss_chunk,) if self.loss_chunk >= 0 else ())


#: Families read by their own modules whose dense layers are the first L_d as DeepSeek's are (HF: a dense
#: MLP iff ``layer_idx < first_k_dense_replace``): GLM-4.5 (modeling_glm4_moe.py:402), dots.llm1.
FIRST_DENSE = ("glm4_moe", "dots1")


def dense_layer_ids(model: ModelConfig) -> frozenset | None:
    """The layer ids with a dense MLP, when the model says where they are; None when it does not.

    DeepSeek-V2/V3 (HF ``DeepseekV3DecoderLayer``: a dense MLP iff ``layer_idx <
    first_k_dense_replace``): the first L_d. A model without dense layers: none. Other families
    (Qwen2-MoE's ``mlp_only_layers`` / ``decoder_sparse_step``) are stored as a count only: None."""
    dense = dict(model.dims).get("L_d", 0)
    if not dense:
        return frozenset()
    if model.recipe is not None and model.recipe.family in ("deepseek_v2", "deepseek_v3") + FIRST_DENSE:
        return frozenset(range(dense))
    return None


def exact_stages(model: ModelConfig, layout) -> bool:
    """Whether the stages are accounted by their real layers (:func:`stage_mix`): a per-chunk
    layout, a schedule placing a rank's chunks in a V or DualPipe's pairs (a rank holds both ends of the
    model), or a model whose dense layers are placed (DeepSeek's first L_d). Otherwise every layer is
    the inventory's one layer and a stage L/p (or L_1, L_p) of them, as the papers count."""
    if getattr(layout, "pipeline_layout", ""):
        return True
    if getattr(layout, "own_schedule", False) and layout.pp > 1 and layout.pipeline_schedule().placement != "loop":
        return True   # the V and DualPipe: rank 0 holds the first and the last stage (embedding, output layer)
    ids = dense_layer_ids(model)
    return bool(ids)


def _prune(moments: list[Moment]) -> tuple[Moment, ...]:
    """The moments no other moment of the same direction and chunk holds at least as much of, every kind."""
    unique = list(dict.fromkeys(moments))
    kept = []
    for m in unique:
        dominated = any(o is not m and o.direction == m.direction and o.chunk == m.chunk
                        and all(o.held_count(k) >= m.held_count(k) for k in KINDS)
                        and any(o.held_count(k) > m.held_count(k) for k in KINDS)
                        for o in unique)
        if not dominated:
            kept.append(m)
    return tuple(kept)


def stage_rank(stage, pp: int) -> int:
    """The pipeline rank a stage name means: ``first`` 0, ``last`` p − 1, an integer rank itself, or
    the verdict's key of one (``rank<r>``, :func:`stage_key`)."""
    if stage == "first":
        return 0
    if stage == "last":
        return pp - 1
    if isinstance(stage, str) and stage.startswith("rank") and stage[4:].isdigit() and int(stage[4:]) < pp:
        return int(stage[4:])
    if isinstance(stage, int) and not isinstance(stage, bool) and 0 <= stage < pp:
        return stage
    raise ConfigError(f"stage {stage!r}: 'first', 'last' or a pipeline rank 0 … {pp - 1}")


def stage_mix(model: ModelConfig, layout, stage: str = "first") -> StageMix:
    """The layers pipeline ``stage`` (``first``, ``last``, or a rank 0 … p−1 for a middle stage) of
    ``layout`` holds for ``model``, and the moments of its schedule that can be its peak (see the module
    docstring)."""
    pp, v = layout.pp, layout.interleave
    own = getattr(layout, "own_schedule", False) and pp > 1
    placement = layout.pipeline_schedule().placement if own else "loop"
    ranges = chunk_ranges(model.layers, pp, v, layout.first_stage_layers, layout.last_stage_layers,
                          getattr(layout, "pipeline_layout", ""), placement)
    rank = stage_rank(stage, pp)
    dense = dense_layer_ids(model)
    if dense is None:
        raise ConfigError(f"{model.name}: its dense layers are stored as a count, not their places; the stages "
                          "cannot be accounted layer by layer (drop --pipeline-layout; the bill averages them)")

    def kind(layer: int) -> str:
        if not dense:
            return "layer"
        return "dense" if layer in dense else "moe"

    chunks = tuple(tuple(kind(i) for i in r) for r in ranges[rank])
    m = simulated_micro_batches(pp, v, layout.iteration_micro_batches()) if pp > 1 else 1
    live: list[tuple[int, int]] = []
    moments = []
    if own:  # the schedule's own order (schedules.order): memory freed at W where W is deferred
        from . import schedules
        plan = layout.pipeline_schedule()
        ops4 = schedules.order(plan, pp, v, schedules.simulated_micro_batches(plan, pp,
                                                                               layout.iteration_micro_batches()), rank)
        free = schedules.freed_at(ops4)
        ops = [(op if op == "F" else ("B" if free.get((mb, c)) == i else "-"), mb, c)
               for i, (op, mb, c, _) in enumerate(ops4)]
    else:
        ops = schedule(pp, v, m, rank) if pp > 1 else [("F", 0, 0), ("B", 0, 0)]
    for op, micro_batch, chunk in ops:
        if op == "F":
            others = list(live)
            live.append((micro_batch, chunk))
        elif op == "-":  # a B whose W is deferred, or a W: the instance stays held (counted whole)
            others = [x for x in live if x != (micro_batch, chunk)]
        else:
            live.remove((micro_batch, chunk))
            others = list(live)
        counts = {k: 0 for k in KINDS}
        for _, c in others:
            for k in chunks[c]:
                counts[k] += 1
        moments.append(Moment("forward" if op == "F" else "backward", chunk,
                              tuple((k, counts[k]) for k in KINDS if counts[k]), len(others)))
    if own and placement != "loop":
        # the V: rank 0 holds virtual stages 0 and 2p − 1; DualPipe: ranks 0 and p − 1 both hold stages 0 and p − 1
        ends = rank == 0 or (placement == "dual" and rank == pp - 1)
        return StageMix(stage, rank, chunks, _prune(moments), embedding=ends, loss=ends,
                        loss_chunk=0 if (placement == "dual" and rank == pp - 1 and pp > 1) else -1)
    return StageMix(stage, rank, chunks, _prune(moments), embedding=rank == 0, loss=rank == pp - 1)


def uneven_stage_ways(stage: str):
    """What an uneven ``stage`` divides the layers' parameters by, so that a layer term's L becomes the
    stage's own count: L/L_1 (first), L/L_m (middle), L/L_p (last) — first order, as the even split's p."""
    from ..core.dims import L, L_1, L_m, L_p
    return L / {"first": L_1, "middle": L_m, "last": L_p}[stage]


def kind_substitution(kind: str) -> dict:
    """What makes the inventory's averaged layer one layer of ``kind``: its MoE terms carry the share
    (L − L_d)/L and its dense MLP L_d/L (``models.architectures.parts.dense_share``), so L_d = 0 is
    an MoE layer and L_d = L a dense one; ``layer`` (one kind only) leaves it as it is."""
    from ..core.dims import L, L_d
    return {"layer": {}, "moe": {L_d: 0}, "dense": {L_d: L}}[kind]


def in_kind(expr, kind: str):
    """``expr`` (a per-layer term of the averaged inventory) for one layer of ``kind``."""
    from sympy import sympify
    substitution = kind_substitution(kind)
    return sympify(expr).xreplace(substitution) if substitution else sympify(expr)


def stage_parameters(param_inv, mix: StageMix, pipeline: bool, select=None, ways=None):
    """The parameters pipeline stage ``mix`` holds, term by term: each layer term once per layer of the
    stage in its kind, the embedding on the first stage, the final norm and the untied output layer
    on the last (a tied word embedding on the last stage too when ``pipeline``: Megatron-Core keeps
    the output layer's copy there, ``shared_embedding_or_output_weight``). ``select(term)``: only
    those terms; ``ways(term)``: each term divided so (its split over the GPU's group)."""
    from sympy import Add, Integer
    out = []
    tied_output = pipeline and mix.loss and not mix.embedding and not any(
        term.scope == "output" and term.name.endswith("projection_weight") for term in param_inv)
    for term in param_inv:
        if select is not None and not select(term):
            continue
        if term.scope == "layer":
            count = Add(*(mix.layers(kind) * in_kind(term.count, kind) for kind in mix.kinds()))
        elif term.scope == "embedding":
            held = mix.embedding or (tied_output and term.name == "embedding/word")
            count = term.count if held else Integer(0)
        else:  # the output side: final norm, untied output layer
            count = term.count if (mix.loss or not pipeline) else Integer(0)
        out.append(count / (ways(term) if ways is not None else 1))
    return Add(*out)


# --- which stages the verdict accounts ----------------------------------------------------------------

def stage_key(rank: int, pp: int) -> str:
    """The name a pipeline rank's verdict formulas are keyed by: ``first`` (rank 0), ``last`` (p − 1),
    ``rank<r>`` for a stage between them accounted by its own layers."""
    return "first" if rank == 0 else "last" if rank == pp - 1 else f"rank{rank}"


def stage_key_rank(key: str, pp: int) -> int:
    """The pipeline rank of a verdict stage's key (:func:`stage_key`, read by :func:`stage_rank`;
    ``middle``: the symbolic middle stage, rank 1 — the busiest of the middle stages, which hold alike)."""
    return 1 if key == "middle" else stage_rank(key, pp)


def stage_words(key: str, pp: int) -> str:
    """A verdict stage in words, 1-based as a reader counts stages: ``stage 2 of 4``; the symbolic middle
    stage says that it stands for every middle stage (their layers alike, rank 1 the most in flight)."""
    number = f"stage {stage_key_rank(key, pp) + 1} of {pp}"
    if key == "middle":
        return f"{number} (the busiest of the middle stages)"
    return number


@lru_cache(maxsize=256)  # the derivation's key and the derivation itself ask it of the same layout
def verdict_mixes(model: ModelConfig, layout) -> tuple[tuple[str, StageMix], ...]:
    """(key, :func:`stage_mix`) of every pipeline stage the verdict of a stage accounted by its own layers
    must look at, first, the middle ranks in order, last.

    Every rank 0 … p − 1 is a candidate (a middle stage of a per-chunk layout, or of DeepSeek's placed
    dense layers under first/last counts, can hold more than either end). A middle rank is left out
    when another middle rank holds the same layers (same kinds in the same chunks, neither the
    embedding nor the loss) and each of its moments is matched by one of the other's of the same
    direction and chunk holding at least as many layers of every kind: its instants are then each at
    most one of the other's (same model states, same per-layer terms), so it can never be the peak. Under
    1F1B a middle rank holding the same layers as a lower one is so dominated (p − r in flight); the
    bill's verdict equals the timeline's largest over every rank (``tests/test_verdict.py``)."""
    pp = layout.pp
    if pp == 1:
        return (("first", stage_mix(model, layout, "first")),)
    first, last = stage_mix(model, layout, "first"), stage_mix(model, layout, "last")
    middles = [stage_mix(model, layout, stage_key(rank, pp)) for rank in range(1, pp - 1)]

    def covers(big: StageMix, small: StageMix) -> bool:
        return (big.chunks == small.chunks and big.embedding == small.embedding and big.loss == small.loss
                and all(any(o.direction == m.direction and o.chunk == m.chunk
                            and all(o.held_count(k) >= m.held_count(k) for k in KINDS) for o in big.moments)
                        for m in small.moments))

    kept: list[StageMix] = []
    for mix in middles:
        if any(covers(other, mix) for other in kept):
            continue
        kept = [other for other in kept if not covers(mix, other)] + [mix]
    return (("first", first), *((stage_key(mix.rank, pp), mix) for mix in kept), ("last", last))
