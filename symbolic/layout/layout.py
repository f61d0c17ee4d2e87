"""The training layout: parallel sizes, batch, precision and strategies.

A frozen dataclass with neutral defaults (1 means disabled) and a validator
that checks it against a model, naming the field and the fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Callable

TYPE_CHECKING = False  # (typing.TYPE_CHECKING without importing typing: ≈ 2 ms of a cold bill)

from ..models.losses import LOSS_KERNELS, WHOLE_VOCABULARY
from ..models.config import ConfigError, ModelConfig, check_position_table, positive_int
from .choices import (
    BASE_DTYPES,
    FLOAT_ACTIVATION_DTYPES,
    LORA_TARGETS,
    MOE_DISPATCHERS,
    OFFLOAD_MODES,
    OPTIMIZER_IMPLS,
    SP_INPUTS,
    OP_SAC,
    RECOMPUTE_MODULES,
    RECOMPUTE_POLICIES,
    ZERO_STAGES,
)
from .experts import validate_expert_parallel
from .frameworks import papers_model
from .suggest import largest_divisor, smallest_multiple_at_least, try_flags
from .recipes import RECIPES
from .precision import PRECISIONS
from .stages import MEGATRON_STAGES, indivisible_layers, stage_key_rank, stage_layers  # noqa: F401 (re-exported: the layout's rule)

if TYPE_CHECKING:
    from .strategies import Strategy


#: The memory levers of a layout (fine-tuning and offload): the fields plan, solve and the timeline
#: carry beside the swept ones, and print when set.
MEMORY_LEVERS = ("lora", "lora_targets", "base_dtype", "double_quant", "offload", "activation_offload")


@dataclass(frozen=True)
class Layout:
    """How a model is trained.

    micro_batch: b, sequences per micro-batch. seq: s; 0 means the model's.
    tp, pp, dp: tensor-, pipeline-, data-parallel sizes (t, p, d).
    sp: sequence parallelism over the TP group. recompute: none, selective, full, or op-sac
    (torchtitan's per-op selective checkpointing, :mod:`symbolic.layout.op_sac`).
    zero: ZeRO stage 0-3 over the dp ranks. optimizer: a recipe of
    ``recipes.RECIPES``. interleave: model chunks per pipeline stage
    (v); 1 means the plain 1F1B schedule. dtype: float activation dtype.
    global_batch: sequences per iteration; 0 means micro_batch × dp (one
    micro-batch per data-parallel rank, no gradient accumulation).
    cp: context-parallel size c (1 means disabled): every sequence split over
    c ranks (ring attention, Liu et al. 2023; Megatron-LM's
    ``--context-parallel-size``). The GPUs are t·p·d·c; dp counts the
    data-parallel replicas only (each one c ranks wide).
    ep: expert-parallel size e (Megatron-Core's ``expert_model_parallel_size``):
    the routed experts split over e ranks folded into the t·d·c ranks of a
    pipeline stage, so the GPUs stay t·p·d·c. etp: expert tensor-parallel size
    e_t (``expert_tensor_parallel_size``); 0 means = tp, Megatron's default.
    moe_capacity: tokens of the busiest expert over the balanced share
    (capacity or imbalance factor, a positive rational; 1 = balanced routing):
    it scales the routed-expert activations of the GPU accounted, not the FLOPs
    (the whole step's work is the same for any routing), unless
    moe_pad_to_capacity: Megatron-Core's ``moe_pad_expert_input_to_capacity``
    (drop-and-pad): every expert computes on its capacity, C_f × the balanced
    share, so the routed experts' FLOPs are C_f × (needs moe_capacity > 1 and
    the alltoall dispatcher). moe_dispatcher: ``hf`` (HF's eager experts loop,
    what the traces check) or ``alltoall`` (Megatron-Core's dispatcher:
    ``strategies.megatron_alltoall_dispatch``).
    Rules: :func:`symbolic.layout.experts.validate_expert_parallel`.
    recompute_modules: with ``recompute="selective"``, Megatron-Core's
    ``recompute_modules`` (``choices.RECOMPUTE_MODULES``); empty means its
    default, ``core_attn``. fused_swiglu: the experts' SwiGLU as one fused
    kernel (``strategies.fused_expert_activation``).

    Memory levers (each a set of model-state terms, ``ledgers.states.state_terms``):
    lora: LoRA rank r (0: full training); the base weights are frozen — no
    gradients, no optimizer states (Hu et al. 2021). lora_targets: the
    weights adapted, ``all-linear`` (QLoRA) or ``attention``. base_dtype: the
    frozen base's weight matrices in ``bf16``, ``int8`` (LLM.int8) or ``nf4``
    (QLoRA, arXiv 2305.14314); needs lora. double_quant: QLoRA's double
    quantisation of the NF4 constants. offload: ``optimizer`` (ZeRO-Offload,
    arXiv 2101.06840: gradients and optimizer states in CPU memory, the update
    on the CPU), ``optimizer-states`` (the optimizer states alone, the
    gradients on the GPU: Megatron-Core's HybridDeviceOptimizer) or ``params``
    (FSDP CPU offload / ZeRO-Infinity: parameters too, a layer's weights
    gathered to the GPU while it runs).
    optimizer_impl: ``foreach`` (PyTorch's default: fp32 temporaries of the
    shard at the step) or ``fused`` (apex/DeepSpeed/TE FusedAdam: none).
    flash_attention: the fused attention kernel on a layer that would keep
    the s×s scores (GPT): no (b, a, s, s) tensor, the log-sum-exp instead
    (``strategies.flash_attention``); LLaMA and MoE layers have it already.
    activation_offload: saved activations stream to CPU memory as they are
    produced; a double buffer (the layer computed and the one in transfer)
    stays on the GPU (seed 004 §05.2).

    fp8_activations: the linear layers' saved inputs kept in FP8 for backward
    (``strategies.fp8_gemm_inputs``: Transformer Engine, DeepSeek-V3 §3.3.3); set by every low-precision
    ``precision``. Alone (``precision`` bf16) the old reading: FP8 inputs and FP8 GEMMs, no weight copies
    (what ``plan``'s sweeps carry).
    precision: the training precision recipe (``precision.PRECISIONS``: bf16, fp8-delayed, fp8-current,
    fp8-blockwise, mxfp8, nvfp4): the GEMMs' dtype per pass, the saved linear inputs, the weight copies
    Transformer Engine keeps and delayed scaling's amax histories (``ledgers.precision``).
    fp8_transpose_cache: the GPU's FP8 GEMMs take the TN layout alone (compute capability below 10: Hopper,
    Ada), so a per-tensor FP8 recipe keeps a transposed copy of each weight (``bill.priced`` sets it from
    the hardware file's compute capability; True, Hopper's, where no GPU is known).
    pipeline_layout: Megatron-Core's ``pipeline_model_parallel_layout``, the layers of each of the p·v
    virtual stages ("Et*3|(t*4|)*14,t*2L"; :mod:`symbolic.layout.stages`); "" means none.
    first_stage_layers, last_stage_layers: uneven pipeline stages, Megatron-Core's
    ``num_layers_in_first_pipeline_stage`` / ``num_layers_in_last_pipeline_stage``
    (0 means even, its None): :func:`stage_layers`. The first stage then holds
    L_1 = :meth:`first_stage_layer_count` layers, the last L_p =
    :meth:`last_stage_layer_count`.
    """

    micro_batch: int = 1
    seq: int = 0
    tp: int = 1
    pp: int = 1
    dp: int = 1
    sp: bool = False
    recompute: str = "none"
    zero: int = 0
    optimizer: str = "bf16-adam"
    interleave: int = 1
    dtype: str = "bf16"
    global_batch: int = 0
    cp: int = 1
    ep: int = 1
    etp: int = 0
    moe_capacity: Fraction = Fraction(1)
    recompute_modules: tuple = ()
    fused_swiglu: bool = False
    lora: int = 0
    lora_targets: str = "all-linear"
    base_dtype: str = "bf16"
    double_quant: bool = True
    offload: str = "none"
    optimizer_impl: str = "foreach"
    flash_attention: bool = False
    activation_offload: bool = False
    fp8_activations: bool = False
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    moe_dispatcher: str = "hf"
    moe_pad_to_capacity: bool = False
    pipeline_layout: str = ""
    #: the loss kernel (``symbolic.models.architectures.output.LOSS_KERNELS``): eager (transformers),
    #: vocab-parallel (Megatron-Core), fused (flash-attn / llm-foundry), chunked (torchtune), liger
    loss: str = "eager"
    #: what a sequence-parallel linear layer keeps of its input (``choices.SP_INPUTS``): ``sharded``, Megatron-Core's
    #: sequence shard re-gathered in backward; ``gathered``, PyTorch DTensor's all-gathered input (torchtitan)
    sp_inputs: str = "sharded"
    #: the pipeline schedule (``schedules.SCHEDULES``): "" means Megatron's, 1F1B or interleaved 1F1B as
    #: ``interleave`` says; ``zb-v`` and ``dualpipev`` hold two chunks per rank (interleave 2, set here)
    schedule: str = ""
    precision: str = "bf16"
    fp8_transpose_cache: bool = True

    def __post_init__(self):
        if self.precision != "bf16" and self.precision in PRECISIONS and PRECISIONS[self.precision].low_precision:
            object.__setattr__(self, "fp8_activations", True)   # every low-precision recipe saves FP8 inputs
        if self.schedule in ("zb-v", "dualpipev") and self.interleave == 1:
            object.__setattr__(self, "interleave", 2)   # the V's two chunks of L/(2p) layers per rank

    @property
    def schedule_name(self) -> str:
        """The schedule run: ``schedule``, or Megatron's own (``1f1b``, ``interleaved``) from ``interleave``."""
        return self.schedule or ("interleaved" if self.interleave > 1 else "1f1b")

    @property
    def own_schedule(self) -> bool:
        """Whether the schedule is one beyond Megatron-LM's two (zero-bubble, DualPipe): its in-flight
        counts, chunk placement and bubble are read from its order (``schedules``)."""
        return self.schedule_name not in ("1f1b", "interleaved")

    def pipeline_schedule(self):
        """The :class:`~symbolic.layout.schedules.Schedule` run (ConfigError on an unknown name)."""
        from .schedules import schedule_named
        return schedule_named(self.schedule_name)

    @property
    def middle_stage(self) -> bool:
        """Whether the symbolic verdict accounts a middle stage too: Megatron-Core's first/last-stage
        counts with p > 2, where every stage between holds the same L_m = (L − L_1 − L_p)/(p − 2)
        layers (``stages.stage_layers``) and can hold more than the first stage's L_1 × in flight. Even
        stages hold alike, so the first (the most in flight) dominates them; a per-chunk layout is
        accounted rank by rank (``stages.stage_mix``)."""
        return bool(self.first_stage_layers or self.last_stage_layers) and self.pp > 2 and not self.pipeline_layout

    @property
    def uneven_stages(self) -> bool:
        """Whether the pipeline's stages hold given layer counts (Megatron-Core's first/last stage, or a
        per-chunk ``pipeline_layout``)."""
        return bool(self.first_stage_layers or self.last_stage_layers or self.pipeline_layout)

    def stage_layer_counts(self, model: ModelConfig) -> tuple[int, ...]:
        """Transformer layers on each pipeline stage, first to last (:func:`stage_layers`)."""
        return stage_layers(model.layers, self.pp, self.interleave, self.first_stage_layers,
                            self.last_stage_layers, self.pipeline_layout)

    def first_stage_layer_count(self, model: ModelConfig) -> int:
        """Transformer layers on the first pipeline stage, the stage accounted (L/p when even)."""
        return self.stage_layer_counts(model)[0]

    def last_stage_layer_count(self, model: ModelConfig) -> int:
        """Transformer layers on the last pipeline stage (L/p when even)."""
        return self.stage_layer_counts(model)[-1]

    def strategy(self, stage: str = "first", matmuls=None) -> "Strategy":
        """The activation strategy of pipeline ``stage`` (``first`` or ``last``;
        the same stage when pp = 1), holding :meth:`in_flight` micro-batch
        chunks: symbolic (the papers' p, or the interleaved count in p and v)
        when the schedule's own count applies, the integer when the
        micro-batches per iteration cap it. ``matmuls``: the model's matmul
        inventory, which ``op-sac`` counts (kept only under that policy)."""
        from .strategies import Strategy  # sympy: imported when an expression is wanted

        return Strategy(tensor_parallel=True, sequence_parallel=self.sp, recompute=self.recompute,
                        dtype=self.dtype, pipeline=self.pp > 1, interleaved=self.interleave > 1,
                        context_parallel=self.cp > 1, expert_parallel=self.ep > 1,
                        expert_tensor_parallel=self.etp not in (0, self.tp),
                        expert_capacity=Fraction(self.moe_capacity) != 1,
                        recompute_modules=tuple(self.recompute_modules), fused_swiglu=self.fused_swiglu,
                        in_flight=self.in_flight_expression(stage), stage=stage,
                        fp8_gemm_inputs=self.fp8_activations, uneven_stages=self.uneven_stages,
                        moe_dispatcher=self.moe_dispatcher, pad_to_capacity=self.moe_pad_to_capacity,
                        sp_inputs=self.sp_inputs, loss=self.loss, output_weight_grad=not self.lora,
                        layer_matmuls=matmuls if self.recompute == OP_SAC else None)

    def values(self, model: ModelConfig) -> dict[str, int]:
        """Dimension values, papers' letters, for the model under this layout."""
        values = model.values()
        values.update(s=self.seq or model.seq, b=self.micro_batch, t=self.tp, p=self.pp, d=self.dp,
                      v=self.interleave, c=self.cp)
        if model.experts:
            values.update(e=self.ep, e_t=self.etp or self.tp, C_f=Fraction(self.moe_capacity))
        if self.lora:
            values["r"] = self.lora
        if self.uneven_stages:
            stages = self.stage_layer_counts(model)
            values.update(L_1=stages[0], L_p=stages[-1])
            if self.middle_stage:
                values["L_m"] = stages[1]
        return values

    @property
    def levers(self) -> bool:
        """Whether a fine-tuning or offload lever (or a factored optimizer, whose states need the
        parameters' shapes) is on: the commands that do not model them refuse."""
        return (bool(self.lora) or self.base_dtype != "bf16" or self.offload != "none"
                or (self.optimizer in RECIPES and RECIPES[self.optimizer].factored))

    @property
    def sweep_levers(self) -> bool:
        """Levers the vectorised plan/solve expressions do not carry (the bill and the timeline do);
        the fused attention kernel they carry in the model's structure key (``bill.evaluate.layout_structure``)."""
        return (self.levers or self.activation_offload or self.moe_dispatcher != "hf"
                or self.moe_pad_to_capacity or self.sp_inputs != "sharded")

    @property
    def gemm_dtype(self) -> str:
        """The weight GEMMs' precision for the step time: ``fp8`` when the layout trains in FP8 — its
        linear layers' inputs kept in FP8 (Transformer Engine's FP8 recipe casts them for its FP8
        GEMMs) or FP8 working weights (an ``fp8-*`` optimizer recipe) — else ``bf16``."""
        if self.precision != "bf16" and self.precision in PRECISIONS:
            return PRECISIONS[self.precision].gemm   # the recipe's: fp8, or fp4 (NVFP4)
        fp8_weights = self.optimizer in RECIPES and RECIPES[self.optimizer].bytes_of("parameters") == 1
        return "fp8" if self.fp8_activations or fp8_weights else "bf16"

    @property
    def gpus(self) -> int:
        """GPUs the layout occupies: t·p·d·c."""
        return self.tp * self.pp * self.dp * self.cp

    def iteration_micro_batches(self) -> int:
        """Micro-batches per data-parallel rank per iteration: m = global_batch / (b·d).

        d counts the data-parallel replicas only: the c context-parallel ranks of
        a replica work on the same sequences, split along s (Megatron-LM:
        global batch = micro-batch × data-parallel size × micro-batches)."""
        return (self.global_batch or self.micro_batch * self.dp) // (self.micro_batch * self.dp)

    def in_flight(self, stage: str = "first") -> int:
        """Micro-batch chunks pipeline ``stage`` holds at its fullest (see :func:`in_flight`; a schedule
        beyond Megatron's: the most its order holds, ``schedules.peak_in_flight``)."""
        if self.own_schedule and self.pp > 1:
            from .schedules import peak_in_flight, simulated_micro_batches
            schedule = self.pipeline_schedule()
            m = simulated_micro_batches(schedule, self.pp, self.iteration_micro_batches())
            return peak_in_flight(schedule, self.pp, self.interleave, m, stage_rank_of(stage, self.pp))
        return in_flight(self.pp, self.interleave, self.iteration_micro_batches(), stage)

    def in_flight_capped(self, stage: str = "first") -> int | None:
        """:meth:`in_flight` when the micro-batches per iteration cap the schedule's
        own count (or on the last stage), None where the papers' symbolic count
        applies (1F1B first stage with m ≥ p: p; interleaved first stage with
        m > p: Narayanan's count; the middle stage, rank 1, the same counts one
        rank on: p − 1, and two warm-up chunks fewer). No sympy: the derivation
        cache's key uses it."""
        if self.pp == 1:
            return None
        if self.own_schedule:
            return self.in_flight(stage)  # its order's count: no papers' symbolic count to keep
        m, p, v = self.iteration_micro_batches(), self.pp, self.interleave
        if stage in ("first", "middle") and self.in_flight(stage) == in_flight(p, v, max(m, 2 * p), stage):
            return None  # the uncapped schedule: the papers' symbolic count (rank 1's: one less chunk in 1F1B)
        return self.in_flight(stage)

    def in_flight_expression(self, stage: str = "first"):
        """:meth:`in_flight` as the strategy's ``in_flight``: None for the
        schedule's own symbolic count, else the integer (:meth:`in_flight_capped`)."""
        capped = self.in_flight_capped(stage)
        if capped is None:
            return None
        from sympy import Integer
        return Integer(capped)

    def memory_levers(self) -> dict[str, object]:
        """The memory levers (:data:`MEMORY_LEVERS`) this layout sets away from full training's defaults."""
        plain = Layout()
        return {name: getattr(self, name) for name in MEMORY_LEVERS if getattr(self, name) != getattr(plain, name)}

    def is_valid(self, model: ModelConfig) -> bool:
        """Whether :meth:`validate` accepts this layout for ``model``."""
        try:
            self.validate(model)
        except ConfigError:
            return False
        return True

    def _validate_modules(self, model: ModelConfig) -> None:
        """Megatron-Core's recompute modules and the fused expert SwiGLU, against the model."""
        unknown = [name for name in self.recompute_modules if name not in RECOMPUTE_MODULES]
        if unknown:
            raise ConfigError(f"recompute module {unknown[0]!r} is not modelled; choose from "
                              f"{', '.join(RECOMPUTE_MODULES)} (Megatron-Core's recompute_modules)")
        if self.recompute_modules and self.recompute != "selective":
            raise ConfigError("recompute modules are Megatron-Core's selective recompute: add --recompute selective; "
                              + try_flags("--recompute selective"))
        if ("moe_act" in self.recompute_modules or self.fused_swiglu) and not model.experts:
            raise ConfigError(f"moe_act and the fused expert SwiGLU act on routed experts; {model.name} has none")
        if "mla_up_proj" in self.recompute_modules and (model.recipe is None or model.recipe.attention != "mla"):
            raise ConfigError(f"the mla_up_proj recompute module acts on multi-head latent attention; {model.name} "
                              "has none: drop mla_up_proj")
        if "layernorm" in self.recompute_modules and model.recipe is not None and model.recipe.placement == "post":
            raise ConfigError(f"the layernorm recompute module recomputes Megatron-Core's input_layernorm and "
                              f"pre_mlp_layernorm, the norms before attention and the MLP; {model.name} normalises "
                              "after them (post-norm): drop layernorm")

    def _validate_op_sac(self, model: ModelConfig) -> None:
        """torchtitan's per-op policy (:mod:`.op_sac`) is modelled on a dense, bias-free layer of one-mm
        linear layers and one SDPA kernel; what would change its op list is refused here, by name."""
        recipe = model.recipe
        why = ""
        if model.experts:
            why = (f"{model.name} routes to experts: their grouped GEMMs and the router's forced recompute "
                   "(per_op_sac_force_recompute_mm_shapes_by_fqns) are not modelled")
        elif model.arch not in ("llama", "composed"):
            why = f"{model.name}'s layer has biased linear layers (addmm, not in torchtitan's save list)"
        elif recipe is not None and (recipe.attention != "gqa" or recipe.mlp != "gated" or recipe.qkv_bias
                                     or recipe.o_bias or recipe.mlp_bias or recipe.fused_qkv or recipe.fused_gate_up
                                     or recipe.residual != "sequential" or recipe.softcap):
            why = (f"{model.name}'s layer is not the LLaMA-style one the policy is modelled on (grouped-query "
                   "attention in one SDPA kernel, a gated MLP, separate bias-free q/k/v and gate/up matrices)")
        elif self.lora:
            why = "LoRA's adapter matmuls are counted by the policy too: that op list is not modelled"
        elif self.cp > 1:
            why = "context parallelism's ring attention under the policy is not modelled"
        elif self.dtype == "fp8" or self.fp8_activations:
            why = "FP8 (torchtitan's float8 converters, whose scales aten.max saves) is not modelled"
        elif self.activation_offload:
            why = "the policy's saved outputs live in its own cache, not in the saved tensors activation offload streams"
        if why:
            raise ConfigError(f"--recompute op-sac (torchtitan's per-op selective checkpointing): {why}; "
                              "choose --recompute full, selective or none")

    def _validate_dispatcher(self, model: ModelConfig) -> None:
        """The MoE dispatcher and capacity padding, against the model."""
        if self.moe_dispatcher not in MOE_DISPATCHERS:
            raise ConfigError(f"moe-dispatcher must be one of {', '.join(MOE_DISPATCHERS)}, "
                              f"not {self.moe_dispatcher!r}")
        if not model.experts:
            raise ConfigError("--moe-dispatcher and --moe-pad-to-capacity act on routed experts; "
                              f"{model.name} has none")
        if self.moe_pad_to_capacity and self.moe_dispatcher != "alltoall":
            raise ConfigError("--moe-pad-to-capacity is Megatron-Core's moe_pad_expert_input_to_capacity: "
                              "add --moe-dispatcher alltoall; " + try_flags("--moe-dispatcher alltoall"))
        if self.moe_pad_to_capacity and Fraction(self.moe_capacity) <= 1:
            raise ConfigError("--moe-pad-to-capacity pads every expert to its capacity C_f·s·b·k/E: set "
                              "--moe-capacity-factor above 1 (at 1 no row is padded under balanced routing); "
                              + try_flags("--moe-capacity-factor 1.25"))

    def validate(self, model: ModelConfig) -> "Layout":
        """This layout for ``model``, or :class:`ConfigError` naming the field
        and the fix: the sizes, then every rule of :data:`LAYOUT_RULES` (the
        one rule set bill, timeline, plan, solve, derive --model and the
        calculator share). Returns the layout with its no-op flags turned off
        (:func:`settle_no_ops`: SP at t = 1, ZeRO at d·c = 1)."""
        for name in ("micro_batch", "tp", "pp", "dp", "interleave", "cp"):
            size = getattr(self, name)
            if type(size) is not int or size <= 0:  # positive_int's refusal; the common case checked here,
                positive_int(name, size)            # as plan validates thousands of layouts
        if self.seq:
            positive_int("seq", self.seq)
        if self.schedule:  # its own rules first: a V's two chunks per rank are not a typed --interleave
            from .schedules import check_schedule, schedule_named
            check_schedule(schedule_named(self.schedule), self.pp, self.interleave, self.iteration_micro_batches())
            if self.own_schedule and self.interleave > 1:
                try:
                    if self.uneven_stages:
                        self.stage_layer_counts(model)
                    elif model.layers % (self.pp * self.interleave):
                        raise ConfigError(indivisible_layers(model.layers, self.pp, self.interleave))
                except ConfigError as error:
                    raise ConfigError(f"--schedule {self.schedule} splits each rank's layers into two chunks (a V): "
                                      + str(error)) from None
        if self.recompute not in RECOMPUTE_POLICIES:
            raise ConfigError(f"recompute must be one of {', '.join(RECOMPUTE_POLICIES)}, not {self.recompute!r}")
        if self.recompute == OP_SAC:
            self._validate_op_sac(model)
        if self.sp_inputs not in SP_INPUTS:
            raise ConfigError(f"sp-inputs must be one of {', '.join(SP_INPUTS)}, not {self.sp_inputs!r}")
        if self.recompute_modules or self.fused_swiglu:
            self._validate_modules(model)
        if self.moe_dispatcher != "hf" or self.moe_pad_to_capacity:
            self._validate_dispatcher(model)
        if self.zero not in ZERO_STAGES:
            raise ConfigError(f"zero must be one of 0, 1, 2, 3, not {self.zero!r}")
        if self.optimizer not in RECIPES:
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; recipes: {', '.join(RECIPES)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if self.dtype not in FLOAT_ACTIVATION_DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(FLOAT_ACTIVATION_DTYPES)}, not {self.dtype!r}")
        if isinstance(self.lora, bool) or not isinstance(self.lora, int) or self.lora < 0:
            raise ConfigError(f"lora must be a rank ≥ 1 (0: full training), not {self.lora!r}")
        if self.lora > model.hidden:  # an adapter B·A of h×r, r×h has rank at most h: beyond it, no more rank
            raise ConfigError(f"lora rank {self.lora} exceeds the hidden size h = {model.hidden}: a rank-r update "
                              f"of an h-wide layer has rank at most h; choose a rank in 1..{model.hidden}")
        for name, allowed in (("lora_targets", LORA_TARGETS), ("base_dtype", BASE_DTYPES), ("offload", OFFLOAD_MODES),
                              ("optimizer_impl", OPTIMIZER_IMPLS), ("loss", LOSS_KERNELS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name.replace('_', '-')} must be one of {', '.join(allowed)}, "
                                  f"not {getattr(self, name)!r}")
        if self.base_dtype != "bf16" and not self.lora:
            raise ConfigError(f"base-dtype {self.base_dtype}: a quantised base is frozen — train adapters on it "
                              "with --lora R (QLoRA), or keep --base-dtype bf16; " + try_flags("--lora 16"))
        values = self.values(model)

        def tp_fix() -> str:  # found only for a refusal (plan validates every swept layout)
            # the largest tp ≤ this one that every tensor-parallel split divides (heads, K/V heads, FFN width)
            return try_flags(f"--tp {largest_divisor(self.tp, model.heads, values.get('g', model.heads), values['f'])}")

        if model.heads % self.tp:
            raise ConfigError(f"heads ({model.heads}) must be divisible by tp ({self.tp}): "
                              f"choose a tp that divides the head count; {tp_fix()}")
        if "g" in values and values["g"] % self.tp:
            raise ConfigError(f"key/value heads ({values['g']}) must be divisible by tp ({self.tp}): "
                              f"each tensor-parallel rank holds whole K/V heads; {tp_fix()}")
        validate_expert_parallel(model, self)  # expert width by etp, ep by E, ep·etp by t·d·c
        if values["f"] % self.tp:
            raise ConfigError(f"ffn width ({values['f']}) must be divisible by tp ({self.tp}); {tp_fix()}")
        check_position_table(model, values["s"])
        if values["s"] % self.cp:
            cp_fix = try_flags(f"--cp {largest_divisor(self.cp, values['s'])}")
            raise ConfigError(f"seq ({values['s']}) must be divisible by cp ({self.cp}): each context-parallel "
                              f"rank holds s/cp tokens; {cp_fix}")
        if self.sp and values["s"] % (self.tp * self.cp):
            # Megatron-LM splits the sequence by cp first, then SP splits each rank's s/cp by t.
            split = self.tp * self.cp
            shorter = values["s"] - values["s"] % split
            raise ConfigError((f"seq ({values['s']}) must be divisible by tp×cp ({self.tp}×{self.cp}) under "
                               "sequence parallelism" if self.cp > 1 else
                               f"seq ({values['s']}) must be divisible by tp ({self.tp}) under sequence parallelism")
                              + "; " + try_flags(f"--seq {shorter or smallest_multiple_at_least(values['s'], split)}"))
        if self.pipeline_layout and self.pp == 1:
            raise ConfigError("pipeline-layout lays out a pipeline: set pp > 1, or drop it")
        if self.uneven_stages:
            self.stage_layer_counts(model)
        elif model.layers % (self.pp * self.interleave):
            raise ConfigError(indivisible_layers(model.layers, self.pp, self.interleave))
        if self.interleave > 1 and self.pp == 1:
            raise ConfigError("interleave needs a pipeline: set pp > 1 or interleave 1; " + try_flags("--interleave 1"))
        if self.global_batch:
            positive_int("global_batch", self.global_batch)
            if self.global_batch % (self.micro_batch * self.dp):
                step = self.micro_batch * self.dp
                raise ConfigError(f"global_batch ({self.global_batch}) must be a multiple of "
                                  f"micro_batch×dp ({self.micro_batch}×{self.dp}); "
                                  + try_flags(f"--global-batch {smallest_multiple_at_least(self.global_batch, step)}"))
        settled = settle_no_ops(self)[0]   # a flag that changes nothing is off before any rule judges it
        for rule in LAYOUT_RULES:
            refusal = rule(settled, model)
            if refusal:
                raise ConfigError(refusal)
        return settled


def steady_state_batch(global_batch: int, pp: int, micro_batch: int, dp: int) -> int:
    """``--global-batch`` as given; without it a pipeline (p > 1) in its steady state: m = p micro-batches
    per iteration, p in flight on the first stage (Korthikanti §4.2.3, Megatron's memory estimator),
    global batch p·b·d; without a pipeline 0 (one micro-batch per data-parallel rank)."""
    if global_batch or not isinstance(pp, int) or pp <= 1:
        return global_batch
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (micro_batch, dp)):
        return global_batch  # the layout's validation names the bad size
    return pp * micro_batch * dp


def default_loss(model: ModelConfig, tp: int = 1) -> str:
    """The loss kernel the model's usual stack runs: the papers' GPT models (a learned position table
    sized by s: Korthikanti's Table 3, seed 001's 7B — trained with Megatron-LM) Megatron's
    vocab-parallel cross-entropy; any other (an HF config) transformers' eager loss on one rank, and a
    vocabulary-parallel loss under tensor parallelism (``tp`` > 1): every framework that runs TP computes
    the loss on the rank's vocabulary shard — Megatron-Core's ``VocabParallelCrossEntropy``, torchtitan's
    ``loss_parallel`` (within b·s bytes of it, measured per rank) — where transformers' eager loss would
    gather the whole vocabulary on every rank (10·s·b·V bytes: ``output.loss_saved``)."""
    if papers_model(model):
        return "vocab-parallel"
    return "vocab-parallel" if tp > 1 else "eager"


def loss_under_tp(model: ModelConfig, loss: str) -> str | None:
    """For a sweep over t (``plan``) whose layouts share ``loss``: the kernel its layouts with t > 1 take
    instead — the model's default under tensor parallelism (:func:`default_loss`) where ``loss`` is the
    model's usual one on one rank; None where they take ``loss`` too (a kernel chosen, or the same)."""
    if loss != default_loss(model):
        return None
    under = default_loss(model, 2)
    return under if under != loss else None


#: The stages the symbolic verdict accounts: the first (rank 0, the most in flight), the last (rank
#: p − 1, the output side), and ``middle`` — rank 1, the busiest of the stages between them, which
#: all hold the same L_m layers under Megatron-Core's first/last-stage rule (``stages.stage_layers``).
STAGES = ("first", "last", "middle")


def stage_rank_of(stage: str, pp: int) -> int:
    """The pipeline rank a symbolic stage stands for: ``first`` 0, ``middle`` 1 (the middle stages hold
    alike and rank 1 has the most of them in flight), ``last`` p − 1 (``stages.stage_key_rank``)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, not {stage!r}")
    return stage_key_rank(stage, pp)


def in_flight(pp: int, interleave: int, micro_batches: int, stage: str = "first") -> int:
    """Micro-batch chunks a pipeline stage holds at its fullest (the activations it keeps).

    No pipeline: 1. 1F1B (Narayanan et al. 2021 §2.2.1; Korthikanti §4.2.3):
    rank r runs min(m, p − r) forwards before its first backward — the first
    stage min(m, p), the busiest middle stage (rank 1) min(m, p − 1), the last
    stage 1. Interleaved (Megatron-LM's
    ``forward_backward_pipelining_with_interleaving``): rank r runs
    2(p − 1 − r) + (v − 1)p warm-up chunk forwards and one more, capped at the
    m·v chunks of the iteration; when m = p every rank runs all m·v forwards
    first. Each chunk is L/(p·v) layers. ``m``: micro-batches per pipeline per
    iteration. ``stage``: a name of :data:`STAGES` (``middle``: rank 1, with p > 2).
    """
    p, v, m = pp, interleave, micro_batches
    if p == 1:
        stage_rank_of(stage, 2)  # the name checked
        return 1
    rank = stage_rank_of(stage, p)
    if v == 1:
        return min(m, p - rank)
    if m == p:
        return m * v
    warm_up = 2 * (p - 1 - rank) + (v - 1) * p
    return min(warm_up + 1, m * v)


#: A layout rule: (layout, model) -> the one-line refusal naming the field and the fix, or None.
LayoutRule = Callable[[Layout, ModelConfig], "str | None"]


def _zero_with_pipeline(layout: Layout, model: ModelConfig) -> str | None:
    # DeepSpeed's PipelineEngine asserts ZeRO stage < 2 ("ZeRO-2 and ZeRO-3 are incompatible with
    # pipeline parallelism"): gradients and parameters sharded per micro-batch would be gathered
    # and reduced once per micro-batch.
    if layout.zero >= 2 and layout.pp > 1:
        return (f"zero {layout.zero} with pp {layout.pp}: ZeRO-2/3 are not combined with pipeline "
                "parallelism (DeepSpeed's pipeline engine supports ZeRO-1); use --zero 0 or 1, or pp 1; "
                + try_flags("--zero 1"))
    return None


def settle_no_ops(layout: Layout) -> tuple[Layout, tuple[str, ...]]:
    """(``layout`` with the flags that change nothing turned off, a note for each), as the frameworks
    do rather than refuse: SP at t = 1 (Megatron-LM ``megatron/training/arguments.py`` @d98e8a64
    sets ``sequence_parallel = False`` when ``tensor_model_parallel_size == 1`` and warns "Disabling
    sequence parallelism because tensor model parallelism is disabled"); a ZeRO stage or distributed optimizer over one data-parallel rank
    (d·c = 1: nothing to shard, every state kept whole, as ZeRO-0). Every ledger is the same either way."""
    from dataclasses import replace

    if not (layout.sp and layout.tp == 1) and not (layout.zero and layout.dp * layout.cp == 1):
        return layout, ()  # nothing to settle: most layouts (plan validates thousands)
    notes = []
    if layout.sp and layout.tp == 1:
        layout = replace(layout, sp=False)
        notes.append("sp with tp 1 turned off, as Megatron-LM does (\"Disabling sequence parallelism because "
                     "tensor model parallelism is disabled\"): it splits over the tensor-parallel group")
    if layout.zero and layout.dp * layout.cp == 1:
        notes.append(f"zero {layout.zero} with d·c = 1 priced as ZeRO-0: one data-parallel rank has nothing to "
                     "shard, every model state is kept whole")
        layout = replace(layout, zero=0)
    return layout, tuple(notes)


def _interleave_needs_whole_rounds(layout: Layout, model: ModelConfig) -> str | None:
    # Megatron-LM's get_forward_backward_func asserts it for the interleaved schedule.
    m = layout.iteration_micro_batches()
    if layout.interleave > 1 and layout.pp > 1 and m % layout.pp and not layout.own_schedule:
        rounds = smallest_multiple_at_least(max(m, 1), layout.pp)  # micro-batches per pipeline, whole rounds
        return (f"interleave {layout.interleave} with {m} micro-batch(es) per iteration: the interleaved "
                f"schedule needs the micro-batches per pipeline (global_batch / (micro_batch × dp)) to be a "
                f"multiple of pp ({layout.pp}) — set --global-batch to a multiple of "
                f"{layout.pp * layout.micro_batch * layout.dp}, or interleave 1; "
                + try_flags(f"--global-batch {rounds * layout.micro_batch * layout.dp}"))
    return None


def _params_offload_without_model_parallelism(layout: Layout, model: ModelConfig) -> str | None:
    # FSDP's CPU offload and ZeRO-Infinity's parameter offload shard whole layers over data-parallel
    # ranks; neither runs with Megatron's tensor or pipeline parallelism.
    if layout.offload == "params" and (layout.tp > 1 or layout.pp > 1):
        return (f"offload params with tp {layout.tp}, pp {layout.pp}: parameter offload (FSDP CPU offload, "
                "ZeRO-Infinity) runs without tensor or pipeline parallelism — use tp 1 and pp 1, or --offload "
                "optimizer; " + try_flags("--offload optimizer"))
    return None


def _loss_kernel_parallelism(layout: Layout, model: ModelConfig) -> str | None:
    # Liger's fused linear cross-entropy multiplies by the whole output weight (no vocabulary split);
    # torchtune's chunked loss gathers a tensor-parallel DTensor's full vocabulary (logits.full_tensor())
    # before its fp32 upcast: neither keeps s·b·V/t.
    if layout.loss in WHOLE_VOCABULARY and layout.tp > 1:
        return (f"loss {layout.loss} with tp {layout.tp}: "
                + ("Liger's fused linear cross-entropy has no vocabulary split" if layout.loss == "liger" else
                   "torchtune's chunked loss gathers the full vocabulary (DTensor.full_tensor) before its upcast")
                + " — use tp 1, or --loss vocab-parallel / fused")
    return None


#: The rules of the frameworks the papers used, shared by every command (bill, timeline, plan,
#: solve, derive --model, calculator). Extend with :func:`add_layout_rule`.
#: (SP at t = 1 and ZeRO at d·c = 1 are no refusal: :func:`settle_no_ops` turns them off with a note.)
LAYOUT_RULES: list[LayoutRule] = [_zero_with_pipeline, _interleave_needs_whole_rounds,
                                  _params_offload_without_model_parallelism, _loss_kernel_parallelism]


def add_layout_rule(rule: LayoutRule) -> LayoutRule:
    """Register ``rule`` with every command's validation (usable as a decorator)."""
    if rule not in LAYOUT_RULES:
        LAYOUT_RULES.append(rule)
    return rule


def layout_rules() -> tuple[LayoutRule, ...]:
    """The rules every command applies, in order."""
    return tuple(LAYOUT_RULES)
