"""Proved per rank, the model-states half: what one rank of N holds after one optimizer step, against the bill.

Optional extra ``torch`` (``torch==2.13.0``, ``transformers==5.24.0``, ``peft==0.21.0``, as installed).

Each layout runs the framework's own code as rank ``r`` of a world of ``N`` on the fake backend
(:func:`symbolic.per_rank.fake_world`): a tiny transformers model, one forward and backward on a
batch of 8 tokens, one ``torch.optim.AdamW`` step; then the rank's resting states are summed by
storage (a DTensor by its local tensor's storage, shared storages once):

* **parameters**: every parameter's storage, by dtype — FSDP2's sharded parameter is a narrow of a
  padded shard (``torch/distributed/fsdp/_fully_shard/_fsdp_param.py`` ``_init_sharded_param`` at
  torch 2.13.0: ``padded_sharded_param = param_data.new_zeros(chunks[0].size())``), so a rank holds
  ``ceil(rows/d)·cols`` elements of each parameter whatever its rank;
* **gradients**: ``p.grad``'s storages — FSDP2's are views of one reduce-scatter output per group,
  cast back to the sharded parameter's dtype (``_fsdp_collectives.py`` ``foreach_reduce``:
  ``reduce_output = _to_dtype_if_needed(reduce_output, orig_dtype)``, then ``torch.as_strided``);
* **optimizer**: AdamW's ``exp_avg`` and ``exp_avg_sq`` (``zeros_like`` the parameter: the local,
  unpadded shard), and apart the 0-dim ``step`` counters (one fp32 scalar per parameter tensor,
  ``torch/optim/adam.py`` ``_init_group``: on the parameter's device when fused or capturable, else on
  the host), which the bill does not count.

The layouts (:data:`LAYOUTS`):

* ``fsdp2`` over d ∈ {1, 2, 4}: ``fully_shard`` per decoder layer then on the root, with
  ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` — torchtitan's defaults
  (``torchtitan/config/configs.py`` at pytorch/torchtitan b5bcd76c: ``mixed_precision_param =
  "bfloat16"``, ``mixed_precision_reduce = "float32"``) on an fp32 model. At rest a rank holds fp32
  parameters (the sharded parameter *is* the master copy), fp32 gradients and fp32 m, v: the bill's
  ``fp32-adam`` blocks, 16 B/param, sharded over d (ZeRO-3). The bf16 copies are the all-gather's
  outputs, unsharded per group and freed after use (reshard_after_forward True) or kept from the
  forward to the backward (False): :func:`measure_states` also sums the gathered bf16 parameters
  alive when the forward returns (``FSDPParam.all_gather_outputs``). Also with ``reduce_dtype=bf16``
  (FSDP's when none is set): the gradients are cast back to fp32 all the same.
* ``zero1``: ``torch.distributed.optim.ZeroRedundancyOptimizer`` over AdamW on a replicated fp32
  model under ``torch.autocast("cpu", bfloat16)``: parameters and gradients whole, m and v of the
  parameters this rank owns — whole tensors, assigned greedily largest first to the least-loaded
  rank (``zero_redundancy_optimizer.py`` ``_partition_parameters``), not Ψ/d.
* LoRA (``lora`` = r): PEFT's ``get_peft_model`` on a bf16 model; PEFT's ``autocast_adapter_dtype``
  (default True) upcasts the adapters to fp32, so at rest the adapters are the bill's ``fp32-adam``
  blocks and the frozen base stays bf16. Alone (d = 1, no FSDP) or under FSDP2 over d.
* TP × FSDP (``tp`` = t): torchtitan's decoder plan (colwise Q/K/V/gate/up and output layer, rowwise
  o/down and embedding) on the ``tp`` dimension of a (dp, tp) mesh, then ``fully_shard`` on ``dp``;
  the norms stay whole on each TP rank, which the bill's first-order blocks split t ways.

What the grid found in the engine and fixed: the ``--framework torchtitan`` preset billed
``bf16-adam-fp32-grads`` (18 B/param over d: a resting bf16 copy FSDP2 does not keep); it now fills
``fp32-adam`` (16 B/param, as its launch reader already read a job), with the gathered copy in bf16
(``Recipe.working_bytes``). Named, not fixed: FSDP2's dim-0 padding (``ceil(rows/d)·cols`` per
parameter: zero at sizes divisible by d, as real models' are), the last rank's short chunks, AdamW's
0-dim step counters, ZeRO-1's whole-parameter partition, TP's replicated norms.

:func:`billed_states` derives the same layout's bill (:func:`symbolic.bill.derive.make_bill` on the
same ``config.json``) and :func:`rows` sets the two side by side as :class:`~symbolic.per_rank.RankRow`
lines, one per model-state term and one for the total.
"""
from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from .per_rank import RankRow, fake_world

TORCH_VERSION = "torch 2.13.0"
PEFT_VERSION = "peft 0.21.0"

#: Two dimension sets per family, odd on purpose: the vocabulary and the MLP width are not multiples
#: of 2 or 4 (FSDP2 pads them), and the second set's hidden size, K/V width (3 heads of 14) and head_dim 14 (Qwen3's
#: q/k norms) are odd too. None is a size tests/_families.py uses.
DIMS = {
    "first": dict(hidden_size=72, head_dim=10, num_attention_heads=8, num_key_value_heads=4,
                  intermediate_size=101, vocab_size=133),
    "second": dict(hidden_size=54, head_dim=14, num_attention_heads=6, num_key_value_heads=3,
                   intermediate_size=90, vocab_size=150),
}
#: The 2-D set: tensor parallelism over t = 3 needs the heads, K/V heads, MLP width and vocabulary to
#: divide by 3 (DTensor's ``from_local`` in the colwise/rowwise plans assumes even shards), while the
#: TP-local shards FSDP2 splits over d = 2 stay odd (45 vocabulary rows, hidden 66 rows of o/down:
#: 33; K/V 10 rows: 5; Qwen3's q/k norms 10) so that its padding shows where it arises.
TP_DIMS = {"tp": dict(hidden_size=66, head_dim=10, num_attention_heads=6, num_key_value_heads=3,
                      intermediate_size=102, vocab_size=135)}
FAMILIES = ("llama", "qwen3")
LORA_TARGET_MODULES = {"all-linear": "all-linear", "attention": ["q_proj", "k_proj", "v_proj", "o_proj"]}


def config(family: str, dims: str = "first", layers: int = 2) -> dict:
    """The ``config.json`` dict of a tiny ``family`` model at dimension set ``dims``."""
    return dict(model_type=family, num_hidden_layers=layers, max_position_embeddings=64,
                tie_word_embeddings=False, rms_norm_eps=1e-6, **{**DIMS, **TP_DIMS}[dims])


@dataclass(frozen=True)
class StatesLayout:
    """How the rank runs. kind: ``fsdp2`` (``fully_shard`` per layer and root; d = 1 is one process
    with FSDP2's mixed precision) or ``zero1`` (ZeroRedundancyOptimizer). d: data-parallel ranks.
    rank: which rank this process is. reshard: FSDP2's ``reshard_after_forward``. lora: LoRA rank
    (0: full training); lora_targets: ``all-linear`` or ``attention``. plain: LoRA on one process
    without FSDP (d must be 1). reduce: FSDP2's ``reduce_dtype`` (``fp32``, torchtitan's default, or
    ``bf16``, FSDP's when none is set: the gradients are cast back to fp32 either way). tp: tensor-parallel
    ranks under FSDP2 (2-D: ``parallelize_module`` on the ``tp`` dimension of a (d, tp) mesh, then
    ``fully_shard`` on ``dp``, as torchtitan composes them); ``rank`` is then the global rank."""

    kind: str = "fsdp2"
    d: int = 1
    rank: int = 0
    reshard: bool = True
    lora: int = 0
    lora_targets: str = "all-linear"
    plain: bool = False
    reduce: str = "fp32"
    tp: int = 1

    def words(self) -> str:
        if self.plain:
            head = "one process"
        elif self.kind == "zero1":
            head = f"ZeroRedundancyOptimizer d={self.d}"
        else:
            head = f"FSDP2 d={self.d}" + (f" × TP t={self.tp}" if self.tp > 1 else "") + (
                "" if self.reshard else " no-reshard") + (
                "" if self.reduce == "fp32" else f" reduce {self.reduce}")
        lora = f" LoRA r={self.lora} {self.lora_targets}" if self.lora else ""
        return f"{head}{lora} rank {self.rank}"


@dataclass
class Measured:
    """One rank's resting states, bytes by bill-style name, and what was seen besides."""

    terms: dict
    step_counters: int          #: AdamW's 0-dim ``step`` tensors, bytes
    step_counter_count: int
    gathered_after_forward: int  #: bf16 all-gather outputs alive when the forward returns (FSDP2)
    padding: dict               #: FSDP2: per name, the bytes of dim-0 padding in the rank's storages
    owned_params: int = 0       #: zero1: parameters whose optimizer states this rank holds
    #: TP × FSDP: per name, the bytes the rank holds over the bill's first-order share Ψ/(t·d) because
    #: the norms are replicated over t (their even share over d, less Ψ/(t·d) of them)
    replication: dict = None


def _dtype(t) -> str:
    return {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}[str(t.dtype)]


def _local(t):
    return t.to_local() if hasattr(t, "to_local") else t


def _storage(t) -> tuple[int, int]:
    s = _local(t).untyped_storage()
    return s.data_ptr(), s.nbytes()


def _targets(layout: StatesLayout):
    return LORA_TARGET_MODULES[layout.lora_targets]


def _build(cfg: dict, layout: StatesLayout):
    """The model as the layout builds it: fp32 for full training (FSDP2's sharded fp32 parameters are
    the master; ZeRO-1's autocast computes in bf16), bf16 then PEFT's adapters for LoRA."""
    from .trace import hf_model

    if not layout.lora:
        return hf_model(cfg, dtype="float32")
    from peft import LoraConfig, get_peft_model

    base = hf_model(cfg, dtype="bfloat16")
    return get_peft_model(base, LoraConfig(r=layout.lora, lora_alpha=2 * layout.lora, lora_dropout=0.0,
                                           target_modules=_targets(layout)))


def _decoder_layers(model):
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inner.model.layers


def _gathered(model) -> int:
    """Bytes of FSDP2's all-gather outputs (the unsharded bf16 parameters) alive now, by storage."""
    from torch.distributed.fsdp._fully_shard._fsdp_state import _get_module_fsdp_state

    seen, total = set(), 0
    for module in model.modules():
        state = _get_module_fsdp_state(module)
        group = state._fsdp_param_group if state is not None else None
        if group is None:
            continue
        for fsdp_param in group.fsdp_params:
            for tensor in getattr(fsdp_param, "all_gather_outputs", []) or []:
                ptr, nbytes = _storage(tensor)
                if nbytes and ptr not in seen:
                    seen.add(ptr)
                    total += nbytes
    return total


@contextlib.contextmanager
def fake_world_2d(dp: int, tp: int, rank: int = 0):
    """This process as global rank ``rank`` of dp·tp on the fake backend, and the 2-D CPU mesh
    (``dp``, ``tp``) over it, as :func:`symbolic.per_rank.fake_world` builds the 1-D one."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    _forget_meshes()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=dp * tp)
    try:
        yield init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    finally:
        dist.destroy_process_group()


def _forget_meshes() -> None:
    """Clear DTensor's sharding-propagation caches: they key an op by its mesh's shape and names, not its
    process groups, so a world built after another (another rank of the same mesh) would be handed the
    earlier world's mesh and its group names, unresolvable now (torch 2.13.0
    ``torch/distributed/tensor/_sharding_prop.py``: ``LocalLRUCache``, ``_propagate_tensor_meta_cached``;
    the C++ dispatch fast path's, ``torch._C._clear_DTensor_sharding_propagator_cache``)."""
    from torch.distributed.tensor import DTensor

    import torch

    propagator = DTensor._op_dispatcher.sharding_propagator
    propagator.propagate_op_sharding.cache_clear()
    type(propagator)._propagate_tensor_meta_cached.cache_clear()
    torch._C._clear_DTensor_sharding_propagator_cache()  # the C++ fast path's own cache


def _tensor_parallel(model, mesh) -> None:
    """torchtitan's decoder placements (``models/common/decoder_sharding.py`` at pytorch/torchtitan
    b5bcd76c, without sequence parallelism): Q/K/V and gate/up colwise, output and down rowwise, the
    embedding rowwise (vocabulary-sharded, output replicated), the output layer colwise with replicated
    logits (HF's loss on them); the RMSNorms (and Qwen3's q/k norms) stay replicated."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    parallelize_module(inner, mesh, {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
                                     "lm_head": ColwiseParallel(output_layouts=Replicate())})
    for block in _decoder_layers(model):
        parallelize_module(block, mesh, {
            "self_attn.q_proj": ColwiseParallel(), "self_attn.k_proj": ColwiseParallel(),
            "self_attn.v_proj": ColwiseParallel(), "self_attn.o_proj": RowwiseParallel(),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel()})


def measure_states(cfg: dict, layout: StatesLayout = StatesLayout(), tokens: int = 8) -> Measured:
    """Run ``layout`` on ``cfg`` as rank ``layout.rank`` of ``layout.d`` (fake backend, CPU), one
    forward, backward and AdamW step, and return what the rank holds (module docstring)."""
    import torch

    if layout.plain and layout.d != 1:
        raise ValueError("plain: one process, d = 1")
    _forget_meshes()  # each run a new world: no op sharding cached from an earlier one
    if layout.plain:
        world = contextlib.nullcontext()
    elif layout.tp > 1:
        world = fake_world_2d(layout.d, layout.tp, layout.rank)
    else:
        world = fake_world(layout.d, layout.rank)
    with world as mesh:
        model = _build(cfg, layout)
        pad = {}
        if layout.tp > 1:
            _tensor_parallel(model, mesh["tp"])
            mesh = mesh["dp"]
        if layout.kind == "fsdp2" and not layout.plain:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

            # torchtitan's defaults: compute in bf16, reduce gradients in fp32 (module docstring)
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype={
                "fp32": torch.float32, "bf16": torch.bfloat16}[layout.reduce])
            # the shapes FSDP2 shards over d: each parameter's TP-local shard (the whole parameter at t = 1)
            shapes = {name: tuple(_local(p).shape) for name, p in model.named_parameters()}
            full = {name: tuple(p.shape) for name, p in model.named_parameters()}
            for block in _decoder_layers(model):
                fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=layout.reshard)
            fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=layout.reshard)
            pad = shapes
        trainable = [p for p in model.parameters() if p.requires_grad]
        ids = torch.arange(tokens).remainder(cfg["vocab_size"]).unsqueeze(0)
        if layout.kind == "zero1":
            from torch.distributed.optim import ZeroRedundancyOptimizer

            optimizer = ZeroRedundancyOptimizer(trainable, optimizer_class=torch.optim.AdamW, lr=1e-3)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
        else:
            optimizer = torch.optim.AdamW(trainable, lr=1e-3)
            loss = model(input_ids=ids, labels=ids).loss
        gathered = _gathered(model) if layout.kind == "fsdp2" and not layout.plain else 0
        loss.backward()
        optimizer.step()
        return _tally(model, optimizer, layout, gathered, pad, full if pad else {})


def _tally(model, optimizer, layout: StatesLayout, gathered: int, shapes: dict, full: dict) -> Measured:
    """The rank's storages after the step, under the bill's line names (``symbolic/ledgers/states.py``
    ``state_terms``: ``<dtype> parameters``, ``<dtype> gradients``, ``Adam m (<dtype>)``, ...; under
    LoRA the frozen base split as the bill splits it and the adapters prefixed). Under FSDP2
    (``shapes``: the shapes FSDP2 shards, TP-local under 2-D) ``padding`` is each name's bytes over the
    even share (element bytes × numel / d, summed over the parameters it holds) and ``replication`` that
    even share less the bill's t·d-way share of the whole parameters (``full``)."""
    terms: dict = defaultdict(int)
    even: dict = defaultdict(Fraction)
    share: dict = defaultdict(Fraction)
    seen: set = set()
    prefix = f"LoRA adapters ({layout.lora_targets}, rank r): " if layout.lora else ""
    d = layout.d if shapes else 1

    def add(name, tensor, param_name):
        ptr, nbytes = _storage(tensor)
        if shapes:
            size = _local(tensor).element_size()
            even[name] += Fraction(size * math.prod(shapes[param_name]), d)
            share[name] += Fraction(size * math.prod(full[param_name]), d * layout.tp)
        if ptr in seen or nbytes == 0:  # a group's gradients share one reduce-scatter buffer: once
            return
        seen.add(ptr)
        terms[name] += nbytes

    names = {p: n for n, p in model.named_parameters()}
    for param, name in names.items():
        if param.requires_grad:
            add(f"{prefix}{_dtype(param)} parameters", param, name)
        elif "layers." in name and param.dim() >= 2:
            add(f"frozen base weights ({_dtype(param)})", param, name)
        else:
            add(f"frozen norms, embeddings, output layer ({_dtype(param)})", param, name)
    for param, name in names.items():
        if param.grad is not None:
            add(f"{prefix}{_dtype(param.grad)} gradients", param.grad, name)
    counters = count = owned = 0
    zero1 = hasattr(optimizer, "optim")
    states = optimizer.optim.state if zero1 else optimizer.state
    for param, state in states.items():
        owned += param.numel() if zero1 else 0
        for key, value in state.items():
            local = _local(value)
            if local.dim() == 0:  # AdamW's step counter: counted apart, the bill has no line for it
                counters += local.untyped_storage().nbytes()
                count += 1
                continue
            label = {"exp_avg": "Adam m", "exp_avg_sq": "Adam v"}[key]
            add(f"{prefix}{label} ({_dtype(local)})", value, names[param])
    padding = {name: terms[name] - even[name] for name in terms} if shapes else {}
    replication = {name: even[name] - share[name] for name in terms} if shapes else {}
    return Measured(dict(terms), counters, count, gathered, padding, owned, replication)


# --- the bill's side -----------------------------------------------------------------------------------

def bill_layout(layout: StatesLayout, framework: str | None = None):
    """The bill's :class:`~symbolic.layout.layout.Layout` for what ``layout`` holds at rest: the
    ``fp32-adam`` blocks (fp32 parameters — FSDP2's sharded master, ZeRO-1's replicated model, PEFT's
    upcast adapters — fp32 gradients, fp32 m and v), ZeRO-3 for FSDP2 over d > 1, ZeRO-1 for
    ZeroRedundancyOptimizer, LoRA's rank and targets. ``framework``: instead, what
    ``--framework NAME`` fills in (:func:`symbolic.layout.frameworks.apply_preset`) on ``dp=d``."""
    from .layout.frameworks import FRAMEWORKS, apply_preset
    from .layout.layout import Layout

    lora = dict(lora=layout.lora, lora_targets=layout.lora_targets) if layout.lora else {}
    if framework is not None:
        return apply_preset(Layout(dp=layout.d, tp=layout.tp, **lora), FRAMEWORKS[framework], overlap=False).layout
    zero = 1 if layout.kind == "zero1" else (3 if layout.d > 1 else 0)
    return Layout(dp=layout.d, tp=layout.tp, zero=zero, optimizer="fp32-adam", **lora)


def billed_states(cfg: dict, layout: StatesLayout, framework: str | None = None) -> dict:
    """The bill's per-GPU model-state lines for ``layout`` (:func:`bill_layout`), name → bytes, from
    :func:`symbolic.bill.derive.make_bill` on the same ``config.json``."""
    from .bill.derive import make_bill
    from .models import hf

    model = hf.from_hf_dict(dict(cfg), f"{cfg['model_type']}-tiny")
    bill = make_bill(model, bill_layout(layout, framework))
    return {line.name: line.value for line in bill.ledger("model_states")}


# --- the grid ------------------------------------------------------------------------------------------

#: The layouts of the grid, each run as one rank: one process (FSDP2's mixed precision over a world of
#: 1), FSDP2 over 2 and 4 (rank 0, and the last rank of 4, whose shards are the short ones), FSDP2
#: without resharding after forward, ZeRO-1, LoRA alone and under FSDP2.
LAYOUTS = (
    StatesLayout(),
    StatesLayout(d=2),
    StatesLayout(d=4),
    StatesLayout(d=4, rank=3),
    StatesLayout(d=2, reshard=False),
    StatesLayout(d=2, reduce="bf16"),
    StatesLayout(kind="zero1", d=2),
    StatesLayout(kind="zero1", d=4, rank=1),
    StatesLayout(lora=6, plain=True),
    StatesLayout(lora=6, d=2, lora_targets="attention"),
    StatesLayout(lora=5, d=4, rank=3),
)
#: TP × FSDP on a (dp, tp) = (2, 3) mesh, at :data:`TP_DIMS`: global rank 0 and the last (dp 1, tp 2).
TP_LAYOUTS = (StatesLayout(d=2, tp=3), StatesLayout(d=2, tp=3, rank=5))

UNEXPLAINED = "UNEXPLAINED"
_FSDP_PARAM = f"{TORCH_VERSION} torch/distributed/fsdp/_fully_shard/_fsdp_param.py _init_sharded_param"


def _shapes(cfg: dict, layout: StatesLayout) -> dict:
    """The unsharded parameter shapes of the model ``layout`` builds (no process group needed)."""
    return {name: tuple(p.shape) for name, p in _build(cfg, layout).named_parameters()}


def _signed(x) -> str:
    """``+3456`` or ``-5184``: an exact difference with its sign."""
    return ("+" if x >= 0 else "") + str(x)


def _reason(name: str, measured: int, billed, found: Measured, layout: StatesLayout, psi: int) -> str:
    """Why ``measured`` differs from ``billed``: a mechanism whose size is computed apart and equals the
    difference exactly, or :data:`UNEXPLAINED`."""
    if measured == billed:
        return ""
    diff = measured - billed
    pad = found.padding.get(name)
    if pad is not None and pad == diff:
        if diff > 0:
            return (f"FSDP2 keeps each parameter's dim 0 padded to a multiple of d={layout.d} "
                    f"({_FSDP_PARAM}: chunks[0].size()): {diff} B over the bill's even share")
        return (f"rank {layout.rank} of {layout.d} holds the short last chunks of dim 0 (torch.chunk; "
                f"AdamW's zeros_like of the unpadded local shard): {-diff} B under the bill's even share")
    spread = (found.replication or {}).get(name)
    if layout.tp > 1 and pad is not None and spread and pad + spread == diff:
        return (f"the norms stay whole on each of the t={layout.tp} ranks (torchtitan's plan replicates them; the "
                f"bill's blocks split every tensor t ways, first order): {_signed(spread)} B; FSDP2's dim-0 "
                f"padding of the TP-local shards: {_signed(pad)} B")
    if layout.kind == "zero1" and name.startswith("Adam ") and measured == 4 * found.owned_params:
        return (f"ZeroRedundancyOptimizer assigns whole parameters, largest first, to the least-loaded rank "
                f"({TORCH_VERSION} torch/distributed/optim/zero_redundancy_optimizer.py _partition_parameters): "
                f"rank {layout.rank} owns {found.owned_params} of {psi} parameters, not Ψ/d = {Fraction(psi, layout.d)}")
    return UNEXPLAINED


def combination_rows(family: str, dims: str, layout: StatesLayout) -> list[RankRow]:
    """The rows of one model under one layout: each model-state line, the total, the step counters,
    under FSDP2 the ``--framework torchtitan`` preset's total, and without resharding the gathered
    parameters held from the forward to the backward."""
    cfg = config(family, dims)
    found = measure_states(cfg, layout)
    billed = billed_states(cfg, layout)
    combo = f"{family}/{dims} {layout.words()}"
    psi = sum(math.prod(s) for n, s in _shapes(cfg, StatesLayout()).items())
    out = []
    for name in list(billed) + [n for n in found.terms if n not in billed]:
        got, want = found.terms.get(name, 0), billed.get(name, 0)
        out.append(RankRow(combo, f"model states/{name}", got, want, _reason(name, got, want, found, layout, psi)))
    total, billed_total = sum(found.terms.values()), sum(billed.values())
    parts = [row for row in out]
    reasons = sorted({row.reason.split(":")[0] for row in parts if row.reason})
    out.append(RankRow(combo, "model states/total", total, billed_total,
                       "" if total == billed_total else (
                           "the lines' differences: " + "; ".join(reasons)
                           if total - billed_total == sum(r.measured - r.billed for r in parts)
                           and UNEXPLAINED not in reasons else UNEXPLAINED)))
    out.append(RankRow(combo, "optimizer step counters (0-dim)", found.step_counters, 0,
                       f"AdamW's step: one 0-dim fp32 tensor per parameter tensor ({found.step_counter_count} here, "
                       f"{TORCH_VERSION} torch/optim/adam.py _init_group: on the parameter's device when fused or "
                       "capturable — torchtitan's default fused AdamW on a GPU — else on the host); "
                       "the bill has no line for them"))
    if layout.kind == "fsdp2" and not layout.lora and not layout.plain:
        framework = "torchtitan" if layout.reduce == "fp32" else "fsdp"
        preset = billed_states(cfg, layout, framework)
        preset_total = sum(preset.values())
        recipe = bill_layout(layout, framework).optimizer
        extra = preset.get("bf16 parameters", 0)
        pad = sum(found.padding.values())
        spread = sum((found.replication or {}).values())
        diff = total - preset_total
        if diff == 0:
            why = ""
        elif diff == pad and recipe == "fp32-adam":
            why = (f"the preset's {recipe} blocks, as held; {_signed(pad)} B of uneven dim-0 shards (FSDP2's padding, "
                   f"a last rank's short chunks: {_FSDP_PARAM})")
        elif diff == pad + spread and spread and recipe == "fp32-adam":
            why = (f"the preset's {recipe} blocks, as held; {_signed(spread)} B of norms replicated over t (the "
                   f"bill's first order), {_signed(pad)} B of uneven dim-0 shards")
        elif diff == pad:
            why = (f"the preset's {recipe} sums to the bytes held per parameter but names other blocks: FSDP2 "
                   "keeps fp32 parameters (the master) and fp32 gradients (cast back from the bf16 reduce in "
                   f"foreach_reduce), no bf16 copy and no separate master; {_signed(pad)} B of uneven dim-0 shards")
        elif diff == pad - extra:
            why = (f"the preset's {recipe} bills a resting bf16 copy ({extra} B) that FSDP2 does not keep (the "
                   f"bf16 parameters are all-gather outputs, freed after use), besides {pad} B of dim-0 padding")
        else:
            why = UNEXPLAINED
        out.append(RankRow(combo, f"model states/total, --framework {framework} ({recipe})", total, preset_total,
                           why))
    if not layout.reshard:
        shapes = _shapes(cfg, layout)
        d = layout.d
        # every group's all-gather output, unsharded with its padding, in param_dtype bf16 (2 B)
        expected = sum(2 * math.ceil(s[0] / d) * d * math.prod(s[1:]) for s in shapes.values())
        from .bill.derive import make_bill
        from .models import hf
        bill = make_bill(hf.from_hf_dict(dict(cfg), f"{family}-tiny"), bill_layout(layout, "torchtitan"))
        line = [ln.value for ln in bill.ledger("communication") if ln.name.startswith("ZeRO-3 gathered weights")]
        gathered_billed = line[0] if line else 0
        out.append(RankRow(combo, "gathered bf16 parameters, forward to backward", found.gathered_after_forward,
                           gathered_billed,
                           f"reshard_after_forward=False keeps every group's all-gather output (bf16, unsharded, "
                           f"padded: {expected} B) from the forward to the backward; the bill's ZeRO-3 line is "
                           "the largest matrix gathered plus one prefetched (reshard after forward)"
                           if found.gathered_after_forward == expected else UNEXPLAINED))
    return out


def rows(families=FAMILIES, dims=tuple(DIMS), layouts=LAYOUTS, tp_layouts=TP_LAYOUTS) -> list[RankRow]:
    """Every combination of the grid (:data:`FAMILIES` × :data:`DIMS` × :data:`LAYOUTS`, and
    :data:`FAMILIES` × :data:`TP_DIMS` × :data:`TP_LAYOUTS`), one row per quantity."""
    return [row for family in families
            for dim, group in [(dim, layouts) for dim in dims] + [(dim, tp_layouts) for dim in TP_DIMS]
            for layout in group for row in combination_rows(family, dim, layout)]


def main() -> None:  # pragma: no cover - prints the grid
    grid = rows()
    exact = sum(row.exact for row in grid)
    for row in grid:
        mark = "=" if row.exact else "≠"
        print(f"{row.combination:45s} {row.quantity:60s} {row.measured:>9} {mark} {row.billed!s:>9}  {row.reason}")
    print(f"{exact} of {len(grid)} rows exact")


if __name__ == "__main__":  # pragma: no cover
    main()
