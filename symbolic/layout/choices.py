"""The named choices a user makes, as plain data (no sympy: the CLI validates
its input with these before any expression is built).
"""
RECOMPUTE = ("none", "selective", "full")  #: activation recompute policies (Korthikanti §5), the ones plan sweeps
#: torchtitan's per-op selective activation checkpointing (``symbolic.layout.op_sac``): billed by bill and
#: timeline (a policy of a layer's op list, not one of Korthikanti's three that plan and the calculator sweep)
OP_SAC = "op-sac"
RECOMPUTE_POLICIES = RECOMPUTE + (OP_SAC,)  #: every recompute policy a layout can name
FLOAT_ACTIVATION_DTYPES = ("bf16", "fp16", "fp32", "fp8")  #: storage dtypes of float activations
ZERO_STAGES = (0, 1, 2, 3)  #: ZeRO stages over the data-parallel ranks (Rajbhandari et al. §5)
#: Megatron-Core's ``recompute_modules`` (TransformerConfig, with recompute_granularity "selective";
#: default ["core_attn"]) that this engine models: the attention core (Korthikanti §5), the
#: experts' activation function (output-discarding checkpoint, needs moe_grouped_gemm) and the
#: input and pre-MLP norms (output-discarding checkpoint, ``transformer_layer.py``) and MLA's up
#: projections with RoPE (output-discarding checkpoint, ``multi_latent_attention.py``).
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj")
#: Who dispatches the tokens to the routed experts, as far as saved tensors care: ``hf`` — HF
#: transformers' eager experts loop (a gather per expert, index_add_ back; what the trace tests
#: hold the inventories to); ``alltoall`` — Megatron-Core's MoEAlltoAllTokenDispatcher with its
#: unfused permute/unpermute and TEGroupedMLP multiplying the probabilities after the activation.
MOE_DISPATCHERS = ("hf", "alltoall")
#: what a sequence-parallel linear layer keeps of its input: Megatron-Core's sequence shard (re-gathered in
#: backward) or PyTorch DTensor's all-gathered input (torchtitan, transformers' tp_plan)
SP_INPUTS = ("sharded", "gathered")
#: Pipeline schedules (``symbolic.layout.schedules.SCHEDULES``, where each is read from its reference code):
#: Megatron's 1F1B and interleaved 1F1B, the zero-bubble ZB-H1, ZB-H2, ZB-V, DeepSeek's DualPipe and DualPipeV.
SCHEDULE_NAMES = ("1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipev")
BASE_DTYPES = ("bf16", "int8", "nf4")  #: storage of frozen base weights under LoRA (QLoRA: nf4)
LORA_TARGETS = ("all-linear", "attention")  #: the weights LoRA adapts (QLoRA: every linear layer)
OFFLOAD = ("none", "optimizer", "params")  #: what lives in CPU memory (ZeRO-Offload; FSDP CPU offload): the page's
#: every offload a layout can name: also ``optimizer-states`` — the optimizer's states alone in CPU memory, the
#: gradients staying on the GPU (Megatron-Core's HybridDeviceOptimizer, ``--optimizer-cpu-offload``); bill, timeline
#: and solve bill it, the calculator page offers the three above
OFFLOAD_MODES = OFFLOAD + ("optimizer-states",)
OPTIMIZER_IMPLS = ("foreach", "fused")  #: PyTorch's foreach optimizer (fp32 temporaries) or a fused kernel
#: The launch configs ``--from KIND SOURCE`` reads (``layout/launch/``, one module each).
LAUNCH_KINDS = ("megatron", "nemo", "megatron-bridge", "torchtitan", "deepspeed", "accelerate", "axolotl",
                "llamafactory")
