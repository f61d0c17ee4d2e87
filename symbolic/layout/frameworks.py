"""Framework presets: what each training framework does when its user sets nothing, read in its code.

``--framework NAME`` sets the step-time model's inputs to that framework's defaults — the attention
kernel, TP and DP communication overlap, the distributed optimizer (the ZeRO stage it implies), the
gradient bucket, the parameter-gather prefetch, the loss kernel and the main-gradient precision — and
the TIME section prints each with its source. Every default is cited to a file of the framework at a
commit (read there, never copied). An explicit flag (``--overlap``, ``--zero``, ``--flash-attention``)
still wins; without a preset the bill keeps its own defaults (an HF-config model runs what PyTorch and
transformers run today — SDPA, a fused kernel; the papers' built-in models the papers' kernels).

``loss`` uses the names of the Layout's loss-kernel field (``eager``, ``vocab-parallel``, ``fused``,
``chunked``, ``liger``); ``main_grads`` is ``fp32`` where the framework accumulates and reduces
gradients in fp32 main-gradient buffers, ``bf16`` where it reduces them in the parameters' dtype.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from ..models.config import ConfigError

MEGATRON = "NVIDIA/Megatron-LM @d98e8a64"
NEMO = "NVIDIA/NeMo @8cfedd72"
TORCHTITAN = "pytorch/torchtitan @b5bcd76c"
DEEPSPEED = "microsoft/DeepSpeed @38327e07"
LLM_FOUNDRY = "mosaicml/llm-foundry @8c8dd48f"
TORCH = "PyTorch 2.13 / transformers 5.24 (as installed)"
#: The Layout's loss-kernel names (helper `fits`' field) and the main-gradient precisions.
LOSS_KERNELS = ("eager", "vocab-parallel", "loss-parallel", "fused", "chunked", "liger")
#: What a sequence-parallel linear layer keeps of its input, by framework (``Layout.sp_inputs``).
SP_SHARDED = (f"{MEGATRON} megatron/core/tensor_parallel/layers.py: LinearWithGradAccumulationAndAsyncCommunication "
              "saves the sequence shard (ctx.save_for_backward(input, weight)) and all-gathers it again in backward")
SP_GATHERED = (f"{TORCH} torch/distributed/tensor/parallel/style.py: ColwiseParallel's linear keeps the Replicate "
               "(all-gathered) input its PrepareModuleInput made: measured on one rank (symbolic.per_rank)")
MAIN_GRADS = ("fp32", "bf16")


@dataclass(frozen=True)
class Framework:
    """One framework's defaults (each field's source in ``sources``, same key)."""

    name: str
    attention: str                 #: "fused" (a flash / cuDNN kernel) or "unfused"
    tp_comm_overlap: bool          #: TP collectives overlapped with the GEMMs
    grad_reduce_overlap: bool      #: DP gradient reduce bucketed behind the backward
    param_gather_overlap: bool     #: parameter all-gather / ZeRO-3 / FSDP prefetch behind compute
    zero: int                      #: the optimizer-state sharding its default implies (0-3)
    bucket_elements: int           #: gradient elements per reduce bucket
    loss: str                      #: one of :data:`LOSS_KERNELS`
    main_grads: str                #: one of :data:`MAIN_GRADS`
    published: tuple               #: the framework names of the published runs it stands for (error bands)
    sources: dict
    #: what a sequence-parallel linear layer keeps of its input (``choices.SP_INPUTS``; shown where sourced)
    sp_inputs: str = "sharded"
    #: the model's parameters stay fp32 — the sharded parameter *is* the master copy — and the GEMMs run
    #: on bf16 copies cast and gathered per group, freed after use (FSDP's mixed precision): at rest
    #: fp32 parameters, fp32 gradients and fp32 Adam m, v, the ``fp32-adam`` blocks, no bf16 copy
    fp32_params: bool = False
    #: the optimizer step's implementation (``layout.choices.OPTIMIZER_IMPLS``): ``fused`` (one kernel, no
    #: fp32 temporaries of the whole state) or ``foreach`` (torch.optim's default)
    optimizer_impl: str = "foreach"

    def overlap_fields(self) -> tuple[bool, bool, bool, int]:
        """``ledgers.time.Overlap``'s fields: (grad reduce, param gather, TP comm, bucket elements)."""
        return (self.grad_reduce_overlap, self.param_gather_overlap, self.tp_comm_overlap, self.bucket_elements)

    def overlap_words(self) -> str:
        """The overlap for the layout line (the TIME section describes it in full)."""
        hidden = [name for name, on in (("DP grad reduce", self.grad_reduce_overlap),
                                        ("param gather", self.param_gather_overlap),
                                        ("TP comm", self.tp_comm_overlap)) if on]
        return " + ".join(hidden) if hidden else "no"

    def step_factors(self, assumed: str = "") -> dict:
        """The preset's entries of a step's factors (the TIME section prints each setting and its source,
        and pools the error band over the runs of :attr:`published`); ``assumed``: why it was assumed where
        none was named (:func:`preset_or_assumed`), which the TIME section says."""
        out = {"framework": self.name, "framework_settings": self.settings(), "band_frameworks": self.published}
        return dict(out, framework_assumed=assumed) if assumed else out

    def settings(self) -> list[tuple[str, str, str]]:
        """(setting, value, source) for the TIME section."""
        out = []
        for item in fields(self):
            if item.name in ("name", "published", "sources", "fp32_params") or item.name not in self.sources:
                continue
            value = getattr(self, item.name)
            text = ("on" if value else "off") if isinstance(value, bool) else (
                f"{value:,}" if isinstance(value, int) and item.name == "bucket_elements" else str(value))
            out.append((item.name, text, self.sources[item.name]))
        return out


FRAMEWORKS: dict[str, Framework] = {
    "megatron-core": Framework(
        "megatron-core", "fused", False, False, False, 0, 40_000_000, "vocab-parallel", "fp32",
        ("Megatron-Core", "Megatron-LM + TE", "Megatron-LM 2021"),
        {"attention": f"{MEGATRON} megatron/core/transformer/transformer_config.py: attention_backend = AttnBackend.auto "
                      "(Transformer Engine's fused / flash kernel where it runs)",
         "tp_comm_overlap": f"{MEGATRON} megatron/core/model_parallel_config.py: tp_comm_overlap: bool = False",
         "grad_reduce_overlap": f"{MEGATRON} megatron/core/distributed/distributed_data_parallel_config.py: "
                                "overlap_grad_reduce: bool = False",
         "param_gather_overlap": f"{MEGATRON} distributed_data_parallel_config.py: overlap_param_gather: bool = False",
         "zero": f"{MEGATRON} distributed_data_parallel_config.py: use_distributed_optimizer: bool = False (ZeRO-0)",
         "bucket_elements": f"{MEGATRON} megatron/core/distributed/distributed_data_parallel.py: bucket_size = "
                            "max(40000000, 1000000 * dp) (the 40 M floor)",
         "loss": f"{MEGATRON} megatron/core/model_parallel_config.py: cross_entropy_loss_fusion: bool = False "
                 "(tensor_parallel.vocab_parallel_cross_entropy)",
         "main_grads": f"{MEGATRON} megatron/training/arguments.py: bf16 sets accumulate_allreduce_grads_in_fp32 = True",
         "sp_inputs": SP_SHARDED,
         "optimizer_impl": f"{MEGATRON} megatron/core/optimizer/__init__.py:14-20: Adam is Transformer Engine's "
                           "FusedAdam (else apex's): fused"},
        optimizer_impl="fused"),
    "nemo": Framework(
        "nemo", "fused", False, True, True, 1, 40_000_000, "fused", "fp32",
        ("NeMo", "Megatron-Bridge"),
        {"attention": f"{NEMO} runs Megatron-Core: attention_backend auto ({MEGATRON} transformer_config.py)",
         "tp_comm_overlap": f"{NEMO} nemo/collections/llm/recipes/llama3_8b.py: tp_comm_overlap=False",
         "grad_reduce_overlap": f"{NEMO} nemo/collections/llm/recipes/llama3_8b.py: DistributedDataParallelConfig("
                                "overlap_grad_reduce=True)",
         "param_gather_overlap": f"{NEMO} nemo/collections/llm/recipes/llama3_8b.py: overlap_param_gather=True",
         "zero": f"{NEMO} nemo/collections/llm/recipes/optim/adam.py: use_distributed_optimizer=True (ZeRO-1)",
         "bucket_elements": f"Megatron-Core's default ({MEGATRON} distributed_data_parallel.py: max(40000000, 1000000 * dp))",
         "loss": f"{NEMO} nemo/collections/llm/gpt/model/base.py: cross_entropy_loss_fusion: bool = True",
         "main_grads": f"{NEMO} nemo/collections/llm/recipes/llama3_8b.py: grad_reduce_in_fp32=True",
         "sp_inputs": f"{NEMO} runs Megatron-Core's linear layers: {SP_SHARDED}",
         "optimizer_impl": f"{NEMO} runs Megatron-Core's optimizer ({MEGATRON} megatron/core/optimizer/__init__.py:"
                           "14-20: TE's FusedAdam): fused"},
        optimizer_impl="fused"),
    "torchtitan": Framework(
        "torchtitan", "fused", False, True, True, 3, 40_000_000, "loss-parallel", "fp32",
        ("torchtitan",),
        {"attention": f"{TORCHTITAN} torchtitan/models/llama3/__init__.py: model_registry(attn_backend='flex') "
                      "(FlexAttention, a fused kernel)",
         "tp_comm_overlap": f"{TORCHTITAN} torchtitan/config/configs.py: enable_async_tensor_parallel: bool = False",
         "grad_reduce_overlap": f"{TORCHTITAN} FSDP2 reduce-scatters each group's gradients as its backward ends "
                                f"({TORCH} torch/distributed/fsdp/_fully_shard)",
         "param_gather_overlap": f"{TORCH} FSDP2 prefetches the next group's all-gather (implicit forward/backward "
                                 "prefetch in torch/distributed/fsdp/_fully_shard)",
         "zero": f"{TORCHTITAN} torchtitan/config/configs.py: data_parallel_shard_degree: int = -1 (FSDP over "
                 "every data-parallel rank: ZeRO-3)",
         "bucket_elements": "FSDP2 reduces per parameter group (one transformer block), not by a size bucket: "
                            "Megatron's 40 M elements assumed for the last exposed bucket (a named approximation)",
         "loss": f"{TORCHTITAN} torchtitan/components/loss.py: cross_entropy_loss — on vocabulary-sharded logits "
                 "(TP) _LossParallelCrossEntropy, which keeps the shard's fp32 log_probs and the labels (PyTorch's "
                 "loss_parallel, measured per rank, keeps nll_loss's 4 B total weight besides); on one rank "
                 "F.cross_entropy(pred.float()), the same terms",
         "main_grads": f"{TORCHTITAN} torchtitan/config/configs.py: mixed_precision_reduce = 'float32'",
         "sp_inputs": f"{TORCHTITAN} torchtitan/models/common/decoder_sharding.py: the attention and FFN inputs "
                      f"redistributed from the sequence shard to Replicate before the colwise linears: {SP_GATHERED}",
         "fp32_params": f"{TORCHTITAN} torchtitan/config/configs.py: mixed_precision_param = 'bfloat16' on an fp32 "
                        f"model, FSDP2's MixedPrecisionPolicy ({TORCH} torch/distributed/fsdp/_fully_shard: the fp32 "
                        "sharded parameter is the master, gradients cast back to it in foreach_reduce); measured per "
                        "rank by symbolic/per_rank_states.py",
         "optimizer_impl": f"{TORCHTITAN} torchtitan/components/optimizer/optimizer.py:109-111: implementation = 'fused' (the "
                           "launch reader's default too)"},
        "gathered", fp32_params=True, optimizer_impl="fused"),
    "fsdp": Framework(
        "fsdp", "fused", False, True, True, 3, 40_000_000, "eager", "bf16",
        ("llm-foundry (FSDP)",),
        {"attention": f"{TORCH} transformers/modeling_utils.py: applicable_attention = 'sdpa' when none is requested "
                      "(PyTorch SDPA: a flash / memory-efficient kernel)",
         "tp_comm_overlap": "no tensor parallelism in plain FSDP",
         "grad_reduce_overlap": f"{TORCH} FSDP reduce-scatters each unit's gradients during the backward",
         "param_gather_overlap": f"{TORCH} FSDP1 backward_prefetch=BACKWARD_PRE by default; FSDP2 implicit prefetch",
         "zero": f"{TORCH} FSDP's default sharding is FULL_SHARD (ZeRO-3)",
         "bucket_elements": "FSDP reduces per wrapped unit: Megatron's 40 M elements assumed (a named approximation)",
         "loss": f"{TORCH} transformers/loss/loss_utils.py: logits = logits.float(), then nn.functional.cross_entropy "
                 "(eager)",
         "main_grads": f"{TORCH} FSDP MixedPrecision reduces in the parameters' dtype unless reduce_dtype is set",
         "sp_inputs": f"{TORCH} tensor parallelism through torch.distributed.tensor.parallel (transformers' "
                      f"tp_plan): {SP_GATHERED}",
         "optimizer_impl": f"{TORCH} torch/optim/adamw.py: foreach=None picks the foreach implementation on CUDA tensors (fused=None: not fused)"},
        "gathered"),
    "deepspeed": Framework(
        "deepspeed", "fused", False, False, False, 0, 500_000_000, "eager", "fp32",
        ("DeepSpeed ZeRO-3",),
        {"attention": f"{TORCH} a transformers model under DeepSpeed runs transformers' default attention (SDPA)",
         "tp_comm_overlap": "no tensor parallelism in DeepSpeed's ZeRO engine",
         "grad_reduce_overlap": f"{DEEPSPEED} deepspeed/runtime/zero/config.py: overlap_comm defaults to "
                                "stage == 3 (off at the default stage 0)",
         "param_gather_overlap": f"{DEEPSPEED} deepspeed/runtime/zero/config.py: overlap_comm off at stage 0 "
                                 "(stage3_prefetch_bucket_size 5e7 applies at stage 3)",
         "zero": f"{DEEPSPEED} deepspeed/runtime/zero/config.py: stage: ZeroStageEnum = 0",
         "bucket_elements": f"{DEEPSPEED} deepspeed/runtime/zero/config.py: reduce_bucket_size = 5e8",
         "loss": f"{TORCH} transformers' loss: logits.float() then cross_entropy (eager)",
         "main_grads": f"{DEEPSPEED} the bf16/fp16 optimizers keep fp32 master weights and gradients",
         "optimizer_impl": f"{TORCH} torch/optim/adamw.py: foreach=None picks the foreach implementation on CUDA tensors (fused=None: not fused)"}),
    "llm-foundry": Framework(
        "llm-foundry", "fused", False, True, True, 3, 40_000_000, "fused", "bf16",
        ("llm-foundry (FSDP)",),
        {"attention": f"{LLM_FOUNDRY} llmfoundry/models/utils/config_defaults.py: 'attn_impl': 'flash'",
         "tp_comm_overlap": "no tensor parallelism in the benchmark table's runs (FSDP only)",
         "grad_reduce_overlap": f"{TORCH} FSDP (Composer) reduce-scatters each unit's gradients in the backward",
         "param_gather_overlap": f"{TORCH} FSDP1 backward_prefetch=BACKWARD_PRE (Composer's default)",
         "zero": f"{LLM_FOUNDRY} scripts/train/benchmarking/submit_benchmarks.py: --fsdp_config_shard_strategy "
                 "FULL_SHARD (ZeRO-3)",
         "bucket_elements": "FSDP reduces per wrapped block: Megatron's 40 M elements assumed (a named approximation)",
         "loss": f"{LLM_FOUNDRY} llmfoundry/models/mpt/modeling_mpt.py: loss_fn = 'fused_crossentropy' "
                 "(flash-attn's fused cross-entropy)",
         "main_grads": f"{LLM_FOUNDRY} FSDP mixed_precision PURE/DEFAULT: gradients reduced in bf16",
         "optimizer_impl": f"{TORCH} torch/optim/adamw.py: foreach=None picks the foreach implementation on CUDA tensors (fused=None: not fused)"}),
}


#: The fields a preset may fill, in the order the layout line names them: the Layout's and the
#: step-time model's ``overlap`` (``PresetChoice.fields``).
PRESET_FIELDS = ("flash_attention", "zero", "loss", "optimizer", "sp_inputs", "optimizer_impl", "overlap")


@dataclass(frozen=True)
class PresetChoice:
    """What a preset did to a layout: the Layout it gives and the fields it filled, as (field, value)
    pairs (``overlap`` among them when the step-time overlap is the preset's). A field the user typed
    (or a launch config set) is never among them."""

    framework: str
    layout: object                 #: the :class:`~symbolic.layout.layout.Layout`
    fields: tuple[tuple[str, object], ...]
    #: why the preset was assumed where no ``--framework`` was given (:func:`inferred_framework`); "" when named
    inferred: str = ""

    def as_dict(self) -> dict:
        """``framework_preset`` in ``--json``: the preset and what it filled (and why, when inferred)."""
        out = {"framework": self.framework, "filled": {name: value for name, value in self.fields}}
        if self.inferred:
            out["inferred"] = self.inferred
        return out

    def words(self) -> str:
        """For the layout line (:func:`filled_words`)."""
        return filled_words(self.framework, dict(self.fields), self.inferred)


def filled_words(name: str, filled: dict, inferred: str = "") -> str:
    """``from --framework megatron-core: fused attention, bf16-adam-fp32-grads, no overlap``: the fields a
    preset filled, as the layout line names them (``filled``: field -> value, :attr:`PresetChoice.fields`);
    an assumed preset (``inferred``: why, :func:`inferred_framework`) says so and how to choose another."""
    shown = {"flash_attention": lambda v: "fused attention" if v else "unfused attention",
             "zero": lambda v: f"ZeRO-{v}", "loss": lambda v: f"{v} loss", "optimizer": str,
             "sp_inputs": lambda v: f"SP linear inputs {v}", "optimizer_impl": lambda v: f"{v} optimizer step",
             "overlap": lambda v: f"{v} overlap"}
    head = (f"{name}'s defaults, assumed ({inferred}; --framework NAME to choose, none for the bill's own)"
            if inferred else f"from --framework {name}")
    return f"{head}: " + ", ".join(shown[field](value) for field, value in filled.items())


def apply_preset(layout, preset: Framework | None, typed=frozenset(), overlap: bool = True,
                 inferred: str = "") -> PresetChoice | None:
    """``layout`` with the preset's defaults in every field the user did not type (``typed``: the option
    names given, the fields a launch config set), or None without a preset. A typed value — even one equal
    to the option's default, ``--optimizer bf16-adam`` — is kept. The rules, each the framework's:

    - attention: a fused kernel (``flash_attention``) where the preset runs one;
    - zero: the distributed optimizer's stage, where there is a data-parallel group (d·c > 1) and not
      ZeRO-2/3 under a pipeline (Megatron refuses it; FSDP's pipelines shard per stage);
    - loss: the preset's loss kernel, unless it needs the whole vocabulary on one GPU (chunked, liger)
      and t > 1;
    - optimizer: where the framework keeps fp32 parameters and computes on bf16 copies (FSDP's mixed
      precision, :attr:`Framework.fp32_params`), ``fp32-adam``'s blocks at rest under bf16 or fp16
      activations — the launch readers' recipe for the same frameworks (``launch/``); else fp32 main
      gradients (``bf16-adam-fp32-grads``) under bf16 activations, where the framework accumulates and
      reduces them in fp32 (Megatron sets accumulate_allreduce_grads_in_fp32 under --bf16 only: fp16
      keeps the recipe given);
    - sp_inputs: under sequence parallelism, what the framework's linear layers keep of their input
      (Megatron-Core the shard, DTensor frameworks the all-gathered input);
    - overlap (``overlap=True``: a command with a step time): the preset's communication overlap.

    ``inferred``: why the preset was assumed (:func:`preset_or_assumed`), kept on the choice for the layout line.
    """
    from dataclasses import replace

    from ..models.losses import WHOLE_VOCABULARY

    if preset is None:
        return None
    changes: dict = {}
    if preset.attention == "fused" and not layout.flash_attention and "flash_attention" not in typed:
        changes["flash_attention"] = True
    if preset.zero and "zero" not in typed and layout.zero != preset.zero and layout.dp * layout.cp > 1 \
            and not (preset.zero >= 2 and layout.pp > 1):
        changes["zero"] = preset.zero
    if "loss" not in typed and preset.loss != layout.loss and not (preset.loss in WHOLE_VOCABULARY and layout.tp > 1):
        changes["loss"] = preset.loss
    if preset.fp32_params and layout.dtype in ("bf16", "fp16") and layout.optimizer == "bf16-adam" \
            and "optimizer" not in typed:
        changes["optimizer"] = "fp32-adam"  # no resting bf16 copy: the fp32 parameter is the master
    elif preset.main_grads == "fp32" and layout.dtype == "bf16" and layout.optimizer == "bf16-adam" \
            and "optimizer" not in typed:
        changes["optimizer"] = "bf16-adam-fp32-grads"
    if layout.sp and "sp_inputs" not in typed and preset.sp_inputs != layout.sp_inputs:
        changes["sp_inputs"] = preset.sp_inputs
    if "optimizer_impl" not in typed and preset.optimizer_impl != layout.optimizer_impl:
        changes["optimizer_impl"] = preset.optimizer_impl  # the launch readers' reading of the same framework
    filled = tuple(changes.items()) + ((("overlap", preset.overlap_words()),) if overlap and "overlap" not in typed
                                       else ())
    return PresetChoice(preset.name, replace(layout, **changes) if changes else layout, filled, inferred)


#: ``--framework none``: no preset, and none assumed — the bill's own defaults (transformers' on an HF config).
NO_FRAMEWORK = "none"
#: The preset assumed for a layout only a distributed framework runs, when none is named (issue 41): Megatron-Core,
#: the framework that runs every one of t, p, c and e (and whose defaults Megatron-Bridge and NeMo share).
ASSUMED = "megatron-core"


def papers_model(model) -> bool:
    """One of the papers' GPT models (a learned position table sized by s — Korthikanti's Table 3, Narayanan's,
    seed 001's 7B): priced with the papers' own kernels and recipe, the runs those papers made."""
    return model.arch == "gpt" and not model.position_table


def inferred_framework(model, layout) -> str:
    """Why a bill with no ``--framework`` takes :data:`ASSUMED`'s defaults, or "" where it keeps its own.

    A layout with tensor, pipeline, context or expert parallelism (t, p, c or e > 1) runs under a
    distributed framework — transformers' own single-process defaults (its eager fp32 loss on the whole
    vocabulary, bf16 gradients, torch.optim's foreach step) are what no such run uses; nor does a Transformer
    Engine FP8/FP4 recipe (``layout.precision``), which Megatron-Core and NeMo run. Kept as they are:
    the papers' GPT models (a position table sized by s: Korthikanti's and Narayanan's runs, priced with the
    papers' own kernels), and a data-parallel layout alone — ZeRO/FSDP is what HF Trainer runs with
    transformers' defaults (DeepSpeed, FSDP), so the bill's defaults are that run's."""
    if papers_model(model):
        return ""
    sizes = [f"{letter}={value}" for letter, value in (("t", layout.tp), ("p", layout.pp), ("c", layout.cp),
                                                        ("e", getattr(layout, "ep", 1))) if value > 1]
    if sizes:
        return f"{', '.join(sizes)} runs under a distributed framework"
    from .precision import PRECISIONS

    recipe = PRECISIONS.get(getattr(layout, "precision", "") or "bf16")
    if recipe is not None and recipe.low_precision:  # the recipes are Transformer Engine's (layout/precision.py)
        return f"{recipe.name} is a Transformer Engine recipe"
    return ""


def preset_or_assumed(name: str | None, model=None, layout=None) -> tuple[Framework | None, str]:
    """The preset named (``--framework``/``framework=``; ``none``: no preset), or, where none is named and the
    model and layout are given, :data:`ASSUMED`'s when :func:`inferred_framework` says the layout needs a
    framework: (preset or None, why it was assumed or ""). The CLI, the API and the claims' step quantity
    choose through this one rule."""
    if name is None and model is not None and layout is not None:
        why = inferred_framework(model, layout)
        if why:
            return FRAMEWORKS[ASSUMED], why
    return framework(name), ""


def framework(name: str | None) -> Framework | None:
    """The preset named ``name`` (None: no preset; ``none`` too); a ConfigError naming the choices otherwise."""
    if name is None or name == "" or str(name).strip().lower() == NO_FRAMEWORK:
        return None
    found = FRAMEWORKS.get(str(name).strip().lower())
    if found is None:
        raise ConfigError(f"--framework {name!r}: choose one of {', '.join(FRAMEWORKS)}, {NO_FRAMEWORK}")
    return found


__all__ = ["Framework", "FRAMEWORKS", "PRESET_FIELDS", "PresetChoice", "apply_preset", "framework",
           "inferred_framework", "papers_model", "preset_or_assumed", "ASSUMED", "NO_FRAMEWORK",
           "LOSS_KERNELS", "MAIN_GRADS"]
