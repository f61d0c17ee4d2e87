"""The loss kernels a model can be trained with, by name (no sympy: the layout and the CLI read them).

Each one's saved and work tensors are in :mod:`symbolic.models.architectures.output`
(:func:`~symbolic.models.architectures.output.loss_saved`, :func:`~symbolic.models.architectures.output.loss_work`),
read from its code at a commit.
"""
from __future__ import annotations

#: ``eager`` transformers' ``ForCausalLMLoss`` (the logits upcast to fp32, ``F.cross_entropy``);
#: ``vocab-parallel`` Megatron-Core's ``VocabParallelCrossEntropy``; ``loss-parallel`` PyTorch's
#: ``torch.distributed.tensor.parallel.loss_parallel`` (``F.cross_entropy`` on vocabulary-sharded DTensor
#: logits: torchtitan, DTensor frameworks); ``fused`` flash-attn's Triton
#: cross-entropy (llm-foundry's ``fused_crossentropy``); ``chunked`` torchtune's
#: ``CEWithChunkedOutputLoss``; ``liger`` Liger-Kernel's fused linear cross-entropy.
LOSS_KERNELS = ("eager", "vocab-parallel", "loss-parallel", "fused", "chunked", "liger")

#: The kernels with no vocabulary split under tensor parallelism (``Layout``'s rule refuses tp > 1).
WHOLE_VOCABULARY = ("chunked", "liger")
