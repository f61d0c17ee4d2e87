"""Proved per rank: PyTorch's own parallel code, run as one rank of N on the CPU, against the bill.

Optional extra ``torch`` (pinned ``torch==2.13.0``, ``transformers==5.24.0``, ``peft``).

:mod:`symbolic.trace` proves one decoder layer on one process. What a user runs is a *combination* —
tensor parallel × sequence parallel × recompute × FSDP/ZeRO × LoRA × loss kernel — and each term's
shard axis is a claim about what one rank of the framework holds. This module runs the framework's
own code as rank ``r`` of a world of ``N``:

* a **fake process group** (``torch.testing._internal.distributed.fake_pg.FakeStore`` with the
  ``"fake"`` backend, the one torchtitan's ``--comm.mode fake_backend`` dry runs use): every
  collective returns a tensor of the right shape and moves no data, so one CPU process *is* rank r —
  its shards, its gathered buffers, its saved tensors — without the other N − 1;
* the model is transformers' own (``AutoModelForCausalLM.from_config``, tiny, at dimensions no other
  test uses), parallelised by ``torch.distributed.tensor.parallel`` with the placements torchtitan
  gives its decoder (``models/common/decoder_sharding.py`` at pytorch/torchtitan b5bcd76c: Q/K/V and
  gate/up colwise, output and down rowwise, RMSNorms ``SequenceParallel`` under SP with the
  rowwise outputs reduce-scattered to a sequence shard), checkpointed by
  ``torch.distributed.algorithms._checkpoint.checkpoint_wrapper`` as torchtitan's full AC wraps
  each block (``distributed/activation_checkpoint.py``, same commit);
* what the rank saves for backward is :func:`symbolic.trace.trace_module` (storages, de-duplicated,
  still held when the forward returns; a DTensor counted by its local shard), one layer as the
  model of 2 layers less the model of 1; the output side (final norm, output layer, loss) by the
  modules that saved it.

Each measurement is a :class:`RankRow` against the same layout's bill (:func:`symbolic.bill.derive.make_bill`
on the same ``config.json``): exact to the byte, or named with its reason.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

#: pytorch/torchtitan at the commit read for the placements and the checkpoint wrapper.
TORCHTITAN = "pytorch/torchtitan b5bcd76c"


@dataclass(frozen=True)
class Combination:
    """One layout of one tiny model, as a rank runs it.

    family: the ``model_type`` (:data:`CONFIGS`). dims: which of the family's two dimension sets.
    tp: tensor-parallel ranks (1 means off). sp: sequence parallel (needs tp > 1). recompute:
    ``none``, ``full`` (every decoder layer checkpointed) or ``op-sac`` (every decoder layer under torchtitan's
    per-op policy, :func:`op_sac_contexts`; its cache counted with the saved tensors). loss: ``eager`` (HF's loss inside the
    model, on replicated logits) or ``loss-parallel`` (the output layer's logits left vocabulary-
    sharded and ``loss_parallel``'s cross entropy: the bill's kernel of that name). lora: the LoRA rank (0: off; PEFT's ``LoraConfig``
    with ``target_modules="all-linear"``: every linear layer but the output layer, the bill's
    ``all-linear``). lora_dtype: the adapters' dtype, ``fp32`` (PEFT's default ``autocast_adapter_dtype=True``
    beside the bf16 base; the bill's ``fp32-adam`` recipe) or ``bf16`` (``autocast_adapter_dtype=False``:
    the base's dtype; the bill's ``bf16-adam``). rank: which rank of the world this process is.
    """

    family: str
    dims: str = "first"
    tp: int = 1
    sp: bool = False
    recompute: str = "none"
    loss: str = "eager"
    lora: int = 0
    lora_dtype: str = "fp32"
    rank: int = 0

    def words(self) -> str:
        parts = [f"{self.family}/{self.dims}", f"t={self.tp}" + ("+SP" if self.sp else "")]
        if self.recompute != "none":
            parts.append(f"{self.recompute} recompute")
        if self.loss != "eager":
            parts.append(f"{self.loss} loss")
        if self.lora:
            parts.append(f"LoRA r={self.lora} ({self.lora_dtype} adapters)")
        return " ".join(parts)


@dataclass(frozen=True)
class RankRow:
    """One quantity one rank holds, measured and billed, in bytes.

    quantity: what is compared (``activations/layer``, ``output side``, ``model states/...``).
    reason: empty when the two agree; otherwise why they differ — a mechanism the bill does not
    model, named, never a tolerance.
    """

    combination: str
    quantity: str
    measured: int
    billed: int
    reason: str = ""

    @property
    def exact(self) -> bool:
        return self.measured == self.billed


@contextlib.contextmanager
def fake_world(size: int, rank: int = 0):
    """This process as rank ``rank`` of a world of ``size`` on the fake backend (collectives of the
    right shapes, no data moved), and the 1-D CPU device mesh over it; torn down on exit."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=size)
    try:
        yield init_device_mesh("cpu", (size,))
    finally:
        dist.destroy_process_group()


#: The tiny models of the grid, at dimensions no other test uses (every head count, KV head count and
#: vocabulary divisible by 4, so each TP rank holds an equal shard), two sets per family: a GQA
#: llama, a qwen3 (per-head Q/K norms), and an MLA DeepSeek-V3 with every layer dense.
CONFIGS: dict[str, dict[str, dict]] = {
    "llama": {
        "first": {"hidden_size": 72, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 10,
                  "intermediate_size": 100, "vocab_size": 132},
        "second": {"hidden_size": 96, "num_attention_heads": 8, "num_key_value_heads": 8, "head_dim": 14,
                   "intermediate_size": 136, "vocab_size": 148},
    },
    "qwen3": {
        "first": {"hidden_size": 80, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 12,
                  "intermediate_size": 104, "vocab_size": 140},
        "second": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 18,
                   "intermediate_size": 92, "vocab_size": 124},
    },
    "deepseek_v3": {
        "first": {"hidden_size": 64, "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 100,
                  "vocab_size": 132, "q_lora_rank": 24, "kv_lora_rank": 20, "qk_nope_head_dim": 10,
                  "qk_rope_head_dim": 6, "v_head_dim": 12, "n_routed_experts": 4, "num_experts_per_tok": 2,
                  "moe_intermediate_size": 24, "n_shared_experts": 1, "n_group": 1, "topk_group": 1},
        "second": {"hidden_size": 56, "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 88,
                   "vocab_size": 116, "q_lora_rank": None, "kv_lora_rank": 18, "qk_nope_head_dim": 8,
                   "qk_rope_head_dim": 4, "v_head_dim": 10, "n_routed_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 24, "n_shared_experts": 1, "n_group": 1, "topk_group": 1},
    },
}
#: (s, b) of each dimension set.
TOKENS = {"first": (12, 2), "second": (20, 3)}
#: The bill's optimizer recipe whose parameter block is the adapters' dtype (``bill.derive.adapter_dtype``).
LORA_RECIPES = {"fp32": "fp32-adam", "bf16": "bf16-adam"}
#: The layers of the measured model (its layer is the model of 2 less the model of 1).
LAYERS = 2


def config(family: str, dims: str, layers: int = LAYERS) -> dict:
    """The ``config.json`` dict of ``family``'s tiny model (:data:`CONFIGS`) with ``layers`` layers; a
    DeepSeek-V3 has every layer dense (``first_k_dense_replace`` = the layers)."""
    raw = dict(CONFIGS[family][dims], model_type=family, num_hidden_layers=layers, max_position_embeddings=64)
    if family == "deepseek_v3":
        raw["first_k_dense_replace"] = layers
    return raw


def tp_plan(family: str, sp: bool, q_lora: bool = True) -> dict:
    """The decoder layer's ``parallelize_module`` plan: torchtitan's placements
    (``models/common/decoder_sharding.py`` at b5bcd76c — ``colwise_config``/``rowwise_config``/
    ``norm_config``) on transformers' module names. The attention and MLP inputs are redistributed to
    ``Replicate`` (an all-gather under SP) by ``PrepareModuleInput``; an MLA's down projections and
    latent norms are not split (replicated, as Megatron-Core's ``linear_q_down_proj`` /
    ``linear_kv_down_proj``), so the attention receives a plain local tensor; its query projection is
    ``q_b_proj`` after a low-rank ``q_a_proj`` (``q_lora``), else one ``q_proj``."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    out = Shard(1) if sp else Replicate()
    attention = ({f"self_attn.{'q_b_proj' if q_lora else 'q_proj'}": ColwiseParallel(),
                  "self_attn.kv_b_proj": ColwiseParallel()}
                 if family == "deepseek_v3" else
                 {f"self_attn.{x}_proj": ColwiseParallel() for x in "qkv"})
    plan = {**attention, "self_attn.o_proj": RowwiseParallel(output_layouts=out),
            "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
            "mlp.down_proj": RowwiseParallel(output_layouts=out)}
    if family == "deepseek_v3" and not sp:
        return plan
    if sp:
        plan.update({"input_layernorm": SequenceParallel(), "post_attention_layernorm": SequenceParallel(),
                     "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                     desired_input_kwarg_layouts={"hidden_states": Replicate()},
                                                     use_local_output=True),
                     "mlp": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),),
                                               use_local_output=True)})
    return plan


def _with_loss(model, loss: str):
    """The model and its loss as one module, so the loss's saved tensors are traced with the rest:
    ``eager`` is HF's own (``labels=``: ``ForCausalLMLoss``, the logits upcast to fp32 and
    ``cross_entropy``); ``loss-parallel`` is ``cross_entropy`` on the vocabulary-sharded logits under
    ``torch.distributed.tensor.parallel.loss_parallel`` (torchtitan's ``loss_parallel``), the same
    upcast first."""
    import torch

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, position_ids):
            # use_cache=False, as a training step runs (HF's own checkpointing turns the cache off: a
            # recomputed layer would append its keys to the cache a second time)
            if loss == "eager":
                return self.model(input_ids=input_ids, position_ids=position_ids, labels=input_ids,
                                  use_cache=False).loss
            logits = self.model(input_ids=input_ids, position_ids=position_ids, use_cache=False).logits
            # HF's ForCausalLMLoss: upcast, shift by one, mean over the tokens
            shifted = torch.nn.functional.pad(input_ids, (0, 1), value=-100)[..., 1:]
            return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), shifted.flatten(),
                                                     ignore_index=-100)
    return WithLoss()


def _built(combination: Combination, layers: int, mesh):
    """The combination's model with ``layers`` layers, parallelised, checkpointed, adapted, wrapped with its loss."""
    from .trace import hf_model

    raw = config(combination.family, combination.dims, layers)
    model = hf_model(raw, "sdpa", seed=0)
    if combination.lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=combination.lora, lora_alpha=2 * combination.lora,
                                                 lora_dropout=0.0, target_modules="all-linear"),
                               autocast_adapter_dtype=combination.lora_dtype == "fp32")
        model = model.base_model.model  # the adapted HF model itself (PEFT's wrappers add no tensors)
    if combination.tp > 1:
        from torch.distributed.tensor import Replicate, Shard
        from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                       parallelize_module)
        vocab_parallel = combination.loss == "loss-parallel"
        top = {"lm_head": ColwiseParallel(input_layouts=Shard(1) if combination.sp else Replicate(),
                                          output_layouts=Shard(-1) if vocab_parallel else Replicate(),
                                          use_local_output=not vocab_parallel)}
        if combination.sp:
            top.update({"model.embed_tokens": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
                        "model.norm": SequenceParallel()})
        parallelize_module(model, mesh, top)
        for layer in model.model.layers:
            parallelize_module(layer, mesh, tp_plan(combination.family, combination.sp,
                                                    raw.get("q_lora_rank") is not None))
    if combination.recompute == "full":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
        for i, layer in enumerate(model.model.layers):  # torchtitan's FullAC: one wrapper per block
            model.model.layers[i] = checkpoint_wrapper(layer, preserve_rng_state=True, early_stop=False)
    if combination.recompute == "op-sac":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
        for i, layer in enumerate(model.model.layers):  # torchtitan's _apply_op_sac: one wrapper per block
            model.model.layers[i] = checkpoint_wrapper(layer, context_fn=op_sac_contexts, preserve_rng_state=True,
                                                       early_stop=False)
    return _with_loss(model, combination.loss)


#: The selective-checkpoint caches the blocks' forwards made (:func:`op_sac_contexts`), read by :func:`measure`.
SAC_CACHES: list = []


def op_sac_save_list() -> set:
    """torchtitan's ``_op_sac_save_list`` (``models/llama3/infra/parallelize.py`` at 238fa99, the commit
    ``--from torchtitan`` reads), the ops a build of torch 2.13 for the CPU has, and the CPU counterpart of the
    flash kernel: ``aten._scaled_dot_product_flash_attention_for_cpu`` (what SDPA runs here; it returns the
    output and the log-sum-exp, as the CUDA flash kernel it stands for)."""
    import torch

    ops = {torch.ops.aten.mm.default, torch.ops.aten.max.default,
           torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
    for name in ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
                 "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
                 "_scaled_dot_product_fused_attention_overrideable"):
        ops.add(getattr(torch.ops.aten, name).default)
    ops.add(torch.ops._c10d_functional.reduce_scatter_tensor.default)
    ops.add(torch._higher_order_ops.flex_attention)
    return ops


def op_sac_contexts():
    """One block's selective-checkpoint contexts with torchtitan's policy, written from
    ``_apply_op_sac._get_custom_policy`` (``distributed/activation_checkpoint.py`` at 238fa99): a CUDA→CPU
    copy saved; the n-th ``aten.mm`` of the block saved when n is odd (no forced-recompute shapes: the
    default ``moe.router.gate`` matches no linear of a dense block); every other op saved when in
    :func:`op_sac_save_list`, else recomputed. The forward's cache is kept in :data:`SAC_CACHES`."""
    from collections import defaultdict

    import torch
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    save = op_sac_save_list()
    meta = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        if (func == torch.ops.aten._to_copy.default and "cuda" in str(args[0].device)
                and str(kwargs.get("device", "")) == "cpu"):
            return CheckpointPolicy.MUST_SAVE
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        to_save = func in save and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if to_save else CheckpointPolicy.PREFER_RECOMPUTE

    forward, recompute = create_selective_checkpoint_contexts(policy)
    SAC_CACHES.append(forward.storage)
    return forward, recompute


def sac_cached_bytes() -> int:
    """Bytes of the distinct storages the selective-checkpoint caches of :data:`SAC_CACHES` hold (what the
    policy saved; the checkpoint keeps them outside autograd's saved tensors, where the trace looks)."""
    from torch.utils._pytree import tree_leaves

    from .trace import _storage

    storages = {}
    for cache in SAC_CACHES:
        for entries in cache.values():
            for entry in entries.values():
                for leaf in tree_leaves(entry, is_leaf=lambda x: hasattr(x, "val")):
                    value = getattr(leaf, "val", None)
                    if hasattr(value, "untyped_storage"):
                        ptr, nbytes = _storage(value)
                        storages[ptr] = nbytes
    return sum(storages.values())


#: The modules whose saved tensors are the output side: the final norm, the output layer, and the loss
#: (HF's, in the causal LM's own forward, ``model``; the vocabulary-parallel one in the wrapper's).
OUTPUT_MODULES = ("model.model.norm", "model.lm_head")
LOSS_MODULES = ("model", "WithLoss")


@dataclass(frozen=True)
class Measured:
    """What the rank saved for backward, in bytes: one decoder layer, and the output side."""

    layer: int
    output_side: int


def measure(combination: Combination) -> Measured:
    """Run ``combination`` as rank ``combination.rank`` of ``combination.tp`` and measure what it saves."""
    import torch

    from .trace import trace_module

    s, b = TOKENS[combination.dims]
    world = fake_world(combination.tp, combination.rank) if combination.tp > 1 else contextlib.nullcontext()
    totals, output_side = [], 0
    with world as mesh:
        for layers in (1, 2):
            module = _built(combination, layers, mesh)
            torch.manual_seed(1)
            ids = torch.randint(0, CONFIGS[combination.family][combination.dims]["vocab_size"], (b, s))
            kwargs = {"input_ids": ids, "position_ids": torch.arange(s).expand(b, s)}
            loss = contextlib.nullcontext()
            if combination.loss == "loss-parallel":
                from torch.distributed.tensor.parallel import loss_parallel
                loss = loss_parallel()
            SAC_CACHES.clear()
            cached = []

            def after_forward(out):  # what the per-op policy cached, read before backward consumes it
                cached.append(sac_cached_bytes())
                return out
            with loss:  # backward too: loss_parallel's ops are swapped in for both passes
                trace = trace_module(module, (), kwargs, output=after_forward, count_flops=False)
            SAC_CACHES.clear()
            totals.append(trace.saved_bytes + cached[0])
            if layers == 1:
                output_side = sum(r.bytes for r in trace.saved
                                  if r.module.startswith(OUTPUT_MODULES) or r.module in LOSS_MODULES)
    return Measured(totals[1] - totals[0], output_side)


def recompute_flops(combination: Combination) -> int:
    """FLOPs one decoder layer's recompute adds to its backward, measured: ``FlopCounterMode``'s backward count of
    the combination less the same layout's without recompute (the model of 2 layers less the model of 1 each; a
    cached op of the per-op policy is handed back, not run, so it is not counted). FlopCounterMode counts a
    DTensor op at its global shape: the layer's whole FLOPs, as the bill's FLOPs lines are (all GPUs)."""
    from dataclasses import replace

    import torch

    from .trace import cpu_sdpa_flops, trace_module

    s, b = TOKENS[combination.dims]

    def backward(of: Combination) -> int:
        world = fake_world(of.tp, of.rank) if of.tp > 1 else contextlib.nullcontext()
        totals = []
        with world as mesh:
            for layers in (1, 2):
                module = _built(of, layers, mesh)
                torch.manual_seed(1)
                ids = torch.randint(0, CONFIGS[of.family][of.dims]["vocab_size"], (b, s))
                trace = trace_module(module, (), {"input_ids": ids, "position_ids": torch.arange(s).expand(b, s)},
                                     output=lambda out: out, custom_flops=cpu_sdpa_flops())
                SAC_CACHES.clear()
                totals.append(trace.backward_total)
        return totals[1] - totals[0]
    return backward(combination) - backward(replace(combination, recompute="none"))


def billed(combination: Combination) -> Measured:
    """The same layout's bill (:func:`symbolic.bill.derive.make_bill` on the same ``config.json``):
    its activations per GPU over the L = 2 layers it holds, per layer, and its output side."""
    from .bill.derive import make_bill
    from .layout.layout import Layout
    from .models import hf

    s, b = TOKENS[combination.dims]
    model = hf.from_hf_dict(config(combination.family, combination.dims), f"per-rank {combination.family}")
    layout = Layout(micro_batch=b, seq=s, tp=combination.tp, sp=combination.sp, recompute=combination.recompute,
                    loss=combination.loss, lora=combination.lora, sp_inputs="gathered",
                    optimizer=LORA_RECIPES[combination.lora_dtype] if combination.lora else "bf16-adam")
    bill = make_bill(model, layout)
    return Measured(bill.totals["activation_bytes"] // LAYERS, bill.totals["output_side_bytes"])


def declared_layer(combination: Combination) -> int:
    """One layer's bytes on the rank as the bill derives them — the layout's strategy
    (``Layout.strategy().apply``, what :func:`symbolic.bill.derive.make_bill` applies) on the saved
    tensors the bill declares for the kernel this rank runs: transformers' SDPA on the CPU
    (:func:`symbolic.trace.hf_family_declared`; an MLA whose V is narrower than Q·K runs SDPA's math
    path there, where a GPU runs a fused kernel — that kernel's own terms are proved layer by layer in
    tests/test_family_traces.py; what is proved here is the split)."""
    from sympy import Integer

    from .bill.derive import lora_saved
    from .core.dims import SYMBOLS
    from .layout.layout import Layout
    from .ledgers import activations
    from .trace import hf_family_declared

    s, b = TOKENS[combination.dims]
    raw = config(combination.family, combination.dims)
    saved, _, _, values = hf_family_declared(raw, "sdpa", "cpu", dense=True)
    layout = Layout(micro_batch=b, seq=s, tp=combination.tp, sp=combination.sp, recompute=combination.recompute,
                    loss=combination.loss, lora=combination.lora, sp_inputs="gathered",
                    optimizer=LORA_RECIPES[combination.lora_dtype] if combination.lora else "bf16-adam")
    if combination.lora:
        from .bill.derive import architecture_inventories, layout_structure
        from .models import hf

        model = hf.from_hf_dict(dict(raw), f"per-rank {combination.family}")
        param_inv = architecture_inventories(layout_structure(model, layout))[0]
        saved = lora_saved(saved, param_inv, layout)
        values["r"] = combination.lora
    inventory = layout.strategy().apply(saved)
    values.update(t=combination.tp, s=s, b=b)
    total = activations.total_bytes(inventory).xreplace({SYMBOLS[k]: Integer(v) for k, v in values.items()
                                                         if k in SYMBOLS})
    return int(total)


#: The families whose CPU SDPA kernel saves what the bill's GPU kernel does (the bill itself is the
#: reference); an MLA (V narrower than Q·K) runs SDPA's math path on the CPU: its reference is the
#: bill's strategy on the CPU kernel's inventory (:func:`declared_layer`).
BILL_KERNEL_ON_CPU = ("llama", "qwen3")
#: (t, SP) of the grid: off, TP alone, TP with SP, at 2 and 4 ranks.
TENSOR_LAYOUTS = ((1, False), (2, False), (2, True), (4, False), (4, True))


def grid(families=tuple(CONFIGS), dims=("first", "second")) -> list[Combination]:
    """The combinations the grid runs: every family and dimension set × t ∈ {1, 2, 4} with and without SP ×
    no or full recompute × HF's eager loss or the vocabulary-parallel one (t > 1) × LoRA (t = 1: PEFT
    under tensor parallelism is not run). Rank 1 of each world (every rank holds equal shards here)."""
    out = []
    for family in families:
        for dim in dims:
            for tp, sp in TENSOR_LAYOUTS:
                for recompute in ("none", "full"):
                    for loss in (("eager", "loss-parallel") if tp > 1 else ("eager",)):
                        for lora, dtype in (((0, "fp32"), (4, "fp32"), (4, "bf16")) if tp == 1 else ((0, "fp32"),)):
                            out.append(Combination(family, dim, tp, sp, recompute, loss, lora, dtype,
                                                   rank=1 if tp > 1 else 0))
    return out


def rows(combinations=None) -> list[RankRow]:
    """Each combination measured on its rank and billed: one row for a decoder layer, one for the output
    side. The layer's reference is the bill (:func:`billed`) for :data:`BILL_KERNEL_ON_CPU`, else the bill's
    strategy on the CPU kernel's inventory (:func:`declared_layer`)."""
    out = []
    for combination in (grid() if combinations is None else combinations):
        measured = measure(combination)
        bill = billed(combination)
        layer = bill.layer if combination.family in BILL_KERNEL_ON_CPU else declared_layer(combination)
        words = combination.words()
        quantity = "activations/layer" + ("" if combination.family in BILL_KERNEL_ON_CPU else " (CPU kernel)")
        out.append(RankRow(words, quantity, measured.layer, layer))
        out.append(RankRow(words, "output side", measured.output_side, bill.output_side))
    return out
