"""Runs inside llm-analysis's own environment (see setup_llm_analysis.sh): reads configurations as
JSON on stdin, evaluates each with llm-analysis in a Python loop, prints the loop time and results."""
import json
import logging
import sys
import time
from importlib.metadata import version

from llm_analysis.analysis import ActivationRecomputation, DSZeRO, LLMAnalysis
from llm_analysis.config import (ModelConfig, ParallelismConfig, get_dtype_config_by_name,
                                 get_gpu_config_by_name)
from llm_analysis.logger import logger

logger.setLevel(logging.ERROR)
RECOMPUTE = {"none": ActivationRecomputation.NONE, "selective": ActivationRecomputation.SELECTIVE,
             "full": ActivationRecomputation.FULL}


def evaluate(c, gpu, dtype):
    model = ModelConfig(name="gpt", num_layers=c["L"], n_head=c["a"], hidden_dim=c["h"], vocab_size=c["V"],
                        max_seq_len=c["s"], ffn_embed_dim=4 * c["h"])
    parallel = ParallelismConfig(tp_size=c["t"], pp_size=c["p"], dp_size=c["d"], sp_size=c["t"] if c["sp"] else 1)
    analysis = LLMAnalysis(model, gpu, dtype, parallel, flops_efficiency=0.5)
    return analysis.training(batch_size_per_gpu=c["b"], global_batch_size=c["global_batch"], seq_len=c["s"],
                             activation_recomputation=RECOMPUTE[c["recompute"]], ds_zero=DSZeRO(c["zero"]),
                             flash_attn=False, softmax_dropout=True, layernorm_dtype_bytes=2)


def main():
    configs = json.load(sys.stdin)
    gpu, dtype = get_gpu_config_by_name("a100-sxm-80gb"), get_dtype_config_by_name("w16a16e16")
    start = time.process_time()  # CPU seconds: a shared machine slows the wall clock, not the work
    results = [evaluate(c, gpu, dtype) for c in configs]
    seconds = time.process_time() - start
    keep = ("weight_memory_per_gpu", "gradient_memory_per_gpu", "optimizer_state_memory_per_gpu",
            "activation_memory_per_gpu", "(weight+op_state+grad+act)_memory_per_gpu",
            "num_flops_total_per_micro_batch", "latency_per_iter", "num_params_total")
    json.dump({"version": version("llm-analysis"), "seconds": seconds, "count": len(configs),
               "results": [{k: r[k] for k in keep} for r in results[:int(sys.argv[1])]]}, sys.stdout)


if __name__ == "__main__":
    main()
