"""The bibliography: every source the engine cites, under the key that
``docs/sources.md`` lists it by (with its arXiv id, or its title and subject
for the three source documents), and the patterns that find the keys in a
citation as the engine writes it ("Korthikanti et al. 2022 §4.1",
"ZeRO §3.1; seed 001 §3").

Plain data: :func:`keys` is what the bill's source notes, the calculator page
and the formula sheet use to point a reader at ``docs/sources.md``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    key: str
    cite: str       #: how the engine cites it
    title: str
    arxiv: str = ""  #: arXiv id, "" where there is none
    about: str = ""  #: what the engine takes from it (one line)
    pattern: str = ""  #: regular expression that finds the citation in a source string


BIBLIOGRAPHY: tuple[Source, ...] = (
    Source("Korthikanti2022", "Korthikanti et al. 2022",
           "Reducing Activation Recomputation in Large Transformer Models", "2205.05198",
           "activation memory per layer (Eq 1/2/4/5/6, Table 2), Table 3's configurations", r"Korthikanti"),
    Source("Narayanan2021", "Narayanan et al. 2021",
           "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", "2104.04473",
           "parameter count (Eq 2), FLOPs (§5.1, Eq 3), pipeline bubble (§2.2)", r"Narayanan|Megatron Eq"),
    Source("Kaplan2020", "Kaplan et al. 2020", "Scaling Laws for Neural Language Models", "2001.08361",
           "N = 12Lh², 6N training FLOPs per token", r"Kaplan"),
    Source("ZeRO2019", "Rajbhandari et al. 2019 (ZeRO)",
           "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", "1910.02054",
           "16 bytes/parameter of mixed-precision Adam (§3.1), ZeRO stages (§5)", r"ZeRO|Rajbhandari"),
    Source("Radford2019", "Radford et al. 2019 (GPT-2)", "Language Models are Unsupervised Multitask Learners", "",
           "the final LayerNorm, learned positions", r"GPT-2"),
    Source("Liu2023", "Liu et al. 2023", "Ring Attention with Blockwise Transformers for Near-Infinite Context",
           "2310.01889", "context parallelism", r"Liu et al\. 2023|[Rr]ing attention"),
    Source("Dao2022", "Dao et al. 2022", "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
           "2205.14135", "the fused attention kernel's residue (O, LSE)", r"Dao et al\. 2022|FlashAttention(?!-2)"),
    Source("Dao2023", "Dao 2023", "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
           "2307.08691", "the kernel HF's sdpa path calls", r"Dao 2023|FlashAttention-2"),
    Source("Touvron2023", "Touvron et al. 2023", "Llama 2: Open Foundation and Fine-Tuned Chat Models", "2307.09288",
           "the Llama layer (RMSNorm, SwiGLU, RoPE, untied output)", r"Touvron"),
    Source("Ainslie2023", "Ainslie et al. 2023", "GQA: Training Generalized Multi-Query Transformer Models from "
           "Multi-Head Checkpoints", "2305.13245", "grouped-query attention", r"Ainslie|GQA"),
    Source("Shazeer2020", "Shazeer 2020", "GLU Variants Improve Transformer", "2002.05202", "the SwiGLU MLP",
           r"Shazeer 2020|SwiGLU"),
    Source("Shazeer2017", "Shazeer et al. 2017", "Outrageously Large Neural Networks: The Sparsely-Gated "
           "Mixture-of-Experts Layer", "1701.06538", "the mixture-of-experts layer", r"Shazeer et al\. 2017"),
    Source("Fedus2021", "Fedus et al. 2021", "Switch Transformers: Scaling to Trillion Parameter Models with Simple "
           "and Efficient Sparsity", "2101.03961", "expert layers, N_total against N_active", r"Fedus"),
    Source("Jiang2024", "Jiang et al. 2024", "Mixtral of Experts", "2401.04088", "Mixtral 8x7B", r"Jiang|Mixtral"),
    Source("Dai2024", "Dai et al. 2024", "DeepSeekMoE: Towards Ultimate Expert Specialization in Mixture-of-Experts "
           "Language Models", "2401.06066", "shared experts", r"Dai et al|DeepSeekMoE"),
    Source("DeepSeekV2", "DeepSeek-AI 2024, DeepSeek-V2", "DeepSeek-V2: A Strong, Economical, and Efficient "
           "Mixture-of-Experts Language Model", "2405.04434", "multi-head latent attention (MLA, §2.1)",
           r"DeepSeek-V2"),
    Source("DeepSeekV3", "DeepSeek-AI 2024, DeepSeek-V3", "DeepSeek-V3 Technical Report", "2412.19437",
           "the 671B configuration, sigmoid routing, multi-token prediction (§2.2)", r"DeepSeek-V3|2412\.19437"),
    Source("Chowdhery2022", "Chowdhery et al. 2022", "PaLM: Scaling Language Modeling with Pathways", "2204.02311",
           "model FLOPs against hardware FLOPs", r"Chowdhery"),
    Source("Shoeybi2019", "Shoeybi et al. 2019", "Megatron-LM: Training Multi-Billion Parameter Language Models "
           "Using Model Parallelism", "1909.08053", "the tensor-parallel split", r"Shoeybi"),
    Source("Micikevicius2017", "Micikevicius et al. 2017", "Mixed Precision Training", "1710.03740",
           "fp32 master weights", r"Micikevicius"),
    Source("Brown2020", "Brown et al. 2020 (GPT-3)", "Language Models are Few-Shot Learners", "2005.14165",
           "the 175B configuration", r"Brown et al"),
    Source("Smith2022", "Smith et al. 2022 (MT-NLG)", "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
           "2201.11990", "the 530B configuration", r"Smith et al|MT-NLG"),
    Source("Chen2016", "Chen et al. 2016", "Training Deep Nets with Sublinear Memory Cost", "1604.06174",
           "activation recompute", r"Chen et al\. 2016"),
    Source("Hu2021", "Hu et al. 2021 (LoRA)", "LoRA: Low-Rank Adaptation of Large Language Models", "2106.09685",
           "adapters r(d_in + d_out) per adapted matrix; the frozen base holds no gradients or states",
           r"Hu et al\. 2021"),
    Source("Dettmers2023", "Dettmers et al. 2023 (QLoRA)", "QLoRA: Efficient Finetuning of Quantized LLMs",
           "2305.14314", "4-bit NormalFloat weights, double-quantised constants (0.127 bits/param), paged optimizers",
           r"QLoRA|Dettmers et al\. 2023"),
    Source("Dettmers2022", "Dettmers et al. 2022 (LLM.int8())", "LLM.int8(): 8-bit Matrix Multiplication for "
           "Transformers at Scale", "2208.07339", "int8 weights with fp32 row scales",
           r"LLM\.int8|Dettmers et al\. 2022"),
    Source("Dettmers2021", "Dettmers et al. 2021 (8-bit optimizers)", "8-bit Optimizers via Block-wise Quantization",
           "2110.02861", "8-bit Adam: int8 m and v with an fp32 absmax per 2048", r"Dettmers et al\. 2021"),
    Source("Ren2021", "Ren et al. 2021 (ZeRO-Offload)", "ZeRO-Offload: Democratizing Billion-Scale Model Training",
           "2101.06840", "gradients and optimizer states in CPU memory, the update on the CPU",
           r"ZeRO-Offload|Ren et al"),
    Source("Shazeer2018", "Shazeer & Stern 2018 (Adafactor)", "Adafactor: Adaptive Learning Rates with Sublinear "
           "Memory Cost", "1804.04235", "the factored second moment: rows + columns of each matrix",
           r"Shazeer & Stern|Adafactor"),
    Source("Touvron2023a", "Touvron et al. 2023 (LLaMA)", "LLaMA: Open and Efficient Foundation Language Models",
           "2302.13971", "the LLaMA 13B/33B/65B configurations QLoRA finetunes (Table 2)", r"2302\.13971"),
    Source("seed000", "seed 000", "每层激活显存的估算式 (Estimating activation memory per layer)", "",
           "the per-layer formula sbh(10 + 24/t + 5as/(ht)) term by term; the TP table; pipeline micro-batches",
           r"seed 000"),
    Source("seed001", "seed 001", "the four ledgers of training memory and compute (untitled note)", "",
           "parameters, model states, activations, FLOPs with units and conditions; the six-step calculator; "
           "the 7B/175B/530B examples", r"seed 001"),
    Source("seed004", "seed 004", "DeepSeek V4 Infra Deep Dive 4.4: PyTorch 训练显存管理 (PyTorch training memory "
           "management)", "", "memory over a step: allocated/reserved, four lifetime classes, snapshots and OOM, "
           "optimisations", r"seed 004"),
    Source("MegatronLM", "Megatron-LM", "NVIDIA Megatron-LM / Megatron-Core", "",
           "parallel layouts, the distributed optimizer", r"Megatron(?! Eq)|Megatron-LM|Megatron-Core"),
    Source("PyTorch", "PyTorch", "PyTorch 2.13 (autograd saved tensors, FlopCounterMode, CUDA caching allocator)", "",
           "what autograd saves and counts; the snapshot format", r"PyTorch|torch"),
    Source("HFTransformers", "HF transformers", "HuggingFace transformers 5.24.0", "",
           "the traced layers; the config.json fields", r"HF transformers|HuggingFace"),
    Source("NCCL", "NCCL", "NVIDIA NCCL", "", "communication buffers", r"NCCL"),
)

BY_KEY = {source.key: source for source in BIBLIOGRAPHY}

#: Where the bibliography is written out for readers.
DOCUMENT = "docs/sources.md"


def keys(citation: str) -> list[str]:
    """The bibliography keys a citation as the engine writes it refers to, in
    the order they appear in it: ``keys("ZeRO §3.1; seed 001 §3") == ["ZeRO2019", "seed001"]``."""
    found = []
    for source in BIBLIOGRAPHY:
        match = re.search(source.pattern, citation or "")
        if match:
            found.append((match.start(), source.key))
    return [key for _, key in sorted(found)]


def cite(citation: str) -> str:
    """The citation followed by its keys: ``"ZeRO §3.1; seed 001 §3 [ZeRO2019, seed001]"``."""
    found = keys(citation)
    return f"{citation} [{', '.join(found)}]" if found else citation


def reference(key: str) -> str:
    """One line of the bibliography: ``[Korthikanti2022] Korthikanti et al. 2022, Reducing ..., arXiv 2205.05198``."""
    source = BY_KEY[key]
    return (f"[{key}] {source.cite}, {source.title}" + (f", arXiv {source.arxiv}" if source.arxiv else "")
            + (f" — {source.about}" if source.about else ""))
