"""Time of a trace-fit of one LLaMA layer on CPU: run, record, fit, compare.

HF transformers' ``LlamaDecoderLayer`` (sdpa attention, bf16) at distinct
small (s, b, h, a, g, f), as ``tests/test_llama.py`` fits it; then the same
layer at Llama-3-8B widths, fitted in (s, b) only as ``symbolic trace --hf``
does. Prints figures; asserts nothing (the tests hold the values).

    .venv/bin/python benchmarks/trace_fit.py [--full-width]
"""
import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full-width", action="store_true",
                        help="also fit one Llama-3-8B-wide layer (h=4096, f=14336) in s and b (slower)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    import torch

    from symbolic import trace as tr
    from symbolic.core.dims import b, s
    t1 = time.perf_counter()
    torch.set_num_threads(max(1, torch.get_num_threads()))

    problem = tr.llama_layer_fit_problem()
    points, basis = problem.points, problem.basis
    t2 = time.perf_counter()
    fitted = tr.fit(problem.factory, points, basis, custom_flops=tr.cpu_sdpa_flops())
    t3 = time.perf_counter()
    same = not tr.compare(fitted.saved_total, problem.saved) and not tr.compare(fitted.forward_flops, problem.forward) \
        and not tr.compare(fitted.backward_flops, problem.backward) and not fitted.unfitted
    t4 = time.perf_counter()

    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(f"import torch + transformers + symbolic: {t1 - t0:.2f} s")
    print(f"LlamaDecoderLayer (sdpa, bf16), {len(basis)} monomials in s, b, h, a, g, f; {len(points)} runs "
          f"({len(points) - len(basis)} checking the fit)")
    print(f"  config (first transformers import) + design points {t2 - t1:.2f} s; "
          f"trace + fit {t3 - t2:.2f} s ({(t3 - t2) / len(points) * 1e3:.0f} ms a run); compare {t4 - t3:.3f} s")
    print(f"  fitted saved bytes: {fitted.saved_total}  (== declared: {same})")

    if args.full_width:
        cfg8b = tr.hf_config({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
                              "num_key_value_heads": 8, "intermediate_size": 14336}, "sdpa")
        basis2 = [s**i * b**j for j in (0, 1) for i in range(3)]
        points2 = tr.design_points(basis2, {s: [3, 4, 5, 6], b: [1, 2, 3]})
        t5 = time.perf_counter()
        fitted2 = tr.fit(tr.hf_layer_factory(cfg8b), points2, basis2, custom_flops=tr.cpu_sdpa_flops())
        t6 = time.perf_counter()
        print(f"Llama-3-8B-wide layer (218M parameters), {len(points2)} runs in s, b: {t6 - t5:.1f} s "
              "(building the layer once included)")
        print(f"  fitted saved bytes: {fitted2.saved_total}")


if __name__ == "__main__":
    main()
