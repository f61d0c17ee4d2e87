"""One prepared run for a session lent a GPU (the workplace's `device` tool): what no test here can see.

1. **Sustained GEMM throughput** — the input the step-time model lacks (README, "Against published runs": the
   hardware files top their GEMM efficiency with mamf-finder's *fastest* product; the H100 rows imply less under a
   training load). Each bf16 GEMM of the built-in models' layer shapes at 8,192 tokens runs back to back for
   ``--seconds``, on random normal operands (zeros draw less power and run faster), timed with CUDA events in
   windows; per shape it prints the mean TFLOP/s of the steady windows (the first fifth dropped), the fraction of
   the hardware file's dense peak, the file's own step for that size, and nvidia-smi's SM clock, power and
   temperature at the end. A figure measured so is what a hardware file's ``gemm_efficiency`` may carry, with
   this script and the date as its source — not a factor fitted to runs.
2. **A training step's real memory** — the snapshot reader and the timeline have only met files built to the
   documented format. A GPT-2 (``tests/fixtures/hf/gpt2``, HF transformers, eager attention, dropout on, fp32,
   ``torch.optim.AdamW``) takes two steps under ``torch.cuda.memory._record_memory_history``; the snapshot of the
   second is written to OUT and read by ``symbolic snapshot --compare`` against the engine's timeline of the same
   config and layout, and ``torch.cuda.max_memory_allocated`` is set beside ``symbolic bill``'s total.

3. **A kernel table** in the format of ``symbolic/data/kernels/b200.json`` (GEMM by shape and pass, the causal
   attention kernel, copy bandwidth and one tiny kernel's latency): OUT/kernels-HARDWARE.json, which replaces a
   borrowed table when copied to ``symbolic/data/kernels/`` and named under ``index.json``'s ``measured``.

Writes OUT/device_check.json, OUT/kernels-HARDWARE.json (and OUT/gpt2_step.pickle). Needs torch with CUDA: without it, says so and exits 2
(``--dry-run`` runs the engine's side alone, to check the commands here). About 2 minutes with the defaults.

    PYTHONUNBUFFERED=1 PYTHONPATH=$PWD python3 benchmarks/device_check.py --out "$OUT" [--seconds 8] [--hardware h200]
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPT2 = HERE.parent / "tests" / "fixtures" / "hf" / "gpt2" / "config.json"
TOKENS = 8192
#: (model, hidden, FFN width): the built-in dense shapes, each at TOKENS rows
SHAPES = (("gpt-7b", 4096, 16384), ("llama-3-8b", 4096, 14336), ("gpt-22b", 6144, 24576), ("gpt-175b", 12288, 49152))


def gemm_shapes():
    """(name, M, K, N) of one layer's weight GEMMs (forward orientation: tokens × in → tokens × out), and 8192³."""
    out = [("square 8192", 8192, 8192, 8192)]
    for name, h, f in SHAPES:
        out += [(f"{name} qkv", TOKENS, h, 3 * h), (f"{name} projection", TOKENS, h, h),
                (f"{name} fc1", TOKENS, h, f), (f"{name} fc2", TOKENS, f, h)]
    return out


def smi() -> dict:
    try:
        line = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu,name",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20).stdout
        clock, power, temperature, name = (x.strip() for x in line.splitlines()[0].split(","))
        return {"sm_clock_mhz": float(clock), "power_w": float(power), "temperature_c": float(temperature), "name": name}
    except Exception as error:  # a reading only: its absence is reported, not fatal
        return {"error": str(error)}


def sustained_gemms(torch, seconds: float, peak: float, efficiency) -> list[dict]:
    rows = []
    for name, m, k, n in gemm_shapes():
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        flops = 2 * m * k * n
        for _ in range(10):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        per_window = max(1, int(0.05 * peak * 0.5 / flops))   # about 50 ms of work per window at half the peak
        windows, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(per_window):
                torch.matmul(a, b)
            end.record()
            end.synchronize()
            windows.append(per_window * flops / (begin.elapsed_time(end) / 1e3))
        steady = windows[len(windows) // 5:] or windows
        mean = sum(steady) / len(steady)
        rows.append({"shape": name, "M": m, "K": k, "N": n, "gflop_per_call": flops / 1e9, "windows": len(windows),
                     "sustained_tflops": mean / 1e12, "min_window_tflops": min(steady) / 1e12,
                     "max_window_tflops": max(steady) / 1e12, "fraction_of_peak": mean / peak,
                     "hardware_file_step": float(efficiency(flops)), **smi()})
        print(f"{name:22} {m}x{k}x{n}: {mean / 1e12:7.1f} TFLOP/s sustained ({mean / peak:.1%} of peak; "
              f"file's step {float(efficiency(flops)):.3f}; windows {min(steady) / 1e12:.0f}-{max(steady) / 1e12:.0f}) "
              f"{rows[-1].get('sm_clock_mhz', '?')} MHz {rows[-1].get('power_w', '?')} W")
        del a, b
        torch.cuda.empty_cache()
    return rows


#: The passes of one weight GEMM, as the kernel tables key them (symbolic.ledgers.kernels): the output m × n,
#: the reduction k, from the forward's (tokens M, in K, out N).
PASS_SHAPES = (("forward", lambda M, K, N: (M, N, K)), ("input_gradient", lambda M, K, N: (M, K, N)),
               ("weight_gradient", lambda M, K, N: (N, K, M)))
#: (batch, sequence, heads, head dim) of the causal attention kernel rows measured.
ATTENTION_SHAPES = ((1, 4096, 32, 128), (1, 4096, 64, 128), (1, 8192, 32, 128))


def kernel_table(gpu: str, peak: float, hbm_bandwidth: float, gemm_seconds, attention_seconds, copy_gib_per_s: float,
                 kernel_latency_s: float, commit: str) -> dict:
    """A kernel file in the shape of symbolic/data/kernels/b200.json from measured times: ``gemm_seconds(m, n, k)``
    per call, ``attention_seconds(b, s, heads, d)`` → (forward, backward) of a causal kernel (counted dense, as
    SimuMax counts: 2·b·s²·heads·2d forward, 2.5× backward), the copy bandwidth in GiB/s (read + write) and
    one tiny kernel's time."""
    src = {"source": f"benchmarks/device_check.py on {gpu}, {time.strftime('%Y-%m-%d')}", "repository": "this repository",
           "path": "benchmarks/device_check.py", "commit": commit}
    rows = []
    for _, M, K, N in gemm_shapes():
        for stage, shape in PASS_SHAPES:
            m, n, k = shape(M, K, N)
            rows.append([stage, m, n, k, 2 * m * n * k / gemm_seconds(m, n, k) / peak])
    forward, backward = [], []
    for b, s_, heads, d in ATTENTION_SHAPES:
        base = b * s_ ** 2 * heads * 2 * d
        f, g = attention_seconds(b, s_, heads, d)
        forward.append([b, s_, heads, heads, d, d, True, 2 * base / f / peak])
        backward.append([b, s_, heads, heads, d, d, True, 5 * base / g / peak])
    tflops = peak / 1e12
    attention = dict(src, dtype="bf16", peak_tflops=tflops,
                     shape="[batch, seq_len, heads, kv_heads, qk_head_dim, v_head_dim, qkv_contiguous, efficiency]",
                     flops_counted="torch SDPA is_causal=True timed against the dense count 2*b*s^2*heads*(2d); backward 2.5x")
    return {"gpu": gpu, "note": "measured by benchmarks/device_check.py: copy the file to symbolic/data/kernels/ and "
                                "name it under index.json 'measured' to replace a borrowed table",
            "tables": {
                "gemm": dict(src, key="torch.matmul bf16, random normal operands", dtype="bf16", peak_tflops=tflops,
                             shape="[pass, m, n, k, efficiency]", rows=sorted(rows)),
                "attention_forward": dict(attention, key="torch.nn.functional.scaled_dot_product_attention forward",
                                          rows=forward),
                "attention_backward": dict(attention, key="scaled_dot_product_attention backward", rows=backward),
                "memory": dict(src, key="Tensor.copy_ of 1 GiB; one 4-element add", datasheet_hbm_bandwidth=hbm_bandwidth,
                               unit="gbps in GiB/s", kernels={"default": {"gbps": copy_gib_per_s, "efficiency": 1.0,
                                                                          "latency_us": kernel_latency_s * 1e6}})}}


def measure_kernels(torch, hw, seconds: float) -> dict:
    """Time the kernel table's shapes on this GPU (CUDA events, random operands, after a warm-up)."""
    def timed(call, repeat):
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(repeat):
            call()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) / 1e3 / repeat

    def gemm_seconds(m, n, k):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        repeat = max(3, int(seconds * hw.peak_bf16_flops * 0.3 / (2 * m * n * k) / 10))
        return timed(lambda: torch.matmul(a, b), repeat)

    def attention_seconds(b, s_, heads, d):
        q, k, v = (torch.randn(b, heads, s_, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        forward = timed(lambda: sdpa(q, k, v, is_causal=True), 20)
        out = sdpa(q, k, v, is_causal=True)
        grad = torch.randn_like(out)
        both = timed(lambda: torch.autograd.grad(sdpa(q, k, v, is_causal=True), (q, k, v), grad), 10)
        return forward, max(both - forward, 1e-9)

    x = torch.empty(2**29, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    copy = timed(lambda: y.copy_(x), 20)
    tiny = torch.zeros(4, device="cuda")
    latency = timed(lambda: tiny.add_(1), 200)
    commit = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return kernel_table(torch.cuda.get_device_name(), hw.peak_bf16_flops, hw.hbm_bandwidth, gemm_seconds,
                        attention_seconds, 2 * x.numel() * 2 / copy / 2**30, latency, commit)


def engine(args, *extra) -> dict:
    """The engine's own CLI on the GPT-2 config, as a user would run it (JSON)."""
    command = [sys.executable, "-m", "symbolic", *extra, "--micro-batch", str(args.micro_batch), "--seq", str(args.seq),
               "--dtype", "fp32", "--optimizer", "fp32-adam", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return {"command": " ".join(command[2:]), "error": done.stderr.strip()[-2000:]}
    return {"command": " ".join(command[2:]), "result": json.loads(done.stdout)}


def gpt2_step(torch, args, out: Path) -> dict:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config.from_json_file(str(GPT2))
    config._attn_implementation = "eager"  # the HF eager inventory the engine bills for GPT-2
    model = GPT2LMHeadModel(config).cuda().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (args.micro_batch, args.seq), device="cuda")

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the first step creates the optimizer states
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(max_entries=200_000)
    step()
    torch.cuda.synchronize()
    snapshot = out / "gpt2_step.pickle"
    torch.cuda.memory._dump_snapshot(str(snapshot))
    torch.cuda.memory._record_memory_history(enabled=None)
    return {"max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
            "max_memory_reserved_bytes": torch.cuda.max_memory_reserved(), "snapshot": snapshot.name,
            "snapshot_compare": engine(args, "snapshot", str(snapshot), "--compare", str(GPT2))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder for device_check.json and the snapshot ($OUT)")
    parser.add_argument("--seconds", type=float, default=8.0, help="seconds per GEMM shape (default 8)")
    parser.add_argument("--hardware", default="h200", help="the hardware file to compare with (default h200)")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--dry-run", action="store_true", help="the engine's side only (no GPU needed)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from symbolic.ledgers.hardware import load

    hw = load(args.hardware)
    report = {"hardware_file": hw.name, "peak_bf16_flops": hw.peak_bf16_flops,
              "bill": engine(args, "bill", str(GPT2), "--gpu-memory", f"{int(hw.hbm_bytes)}B")}
    if not args.dry_run:
        try:
            import torch
        except ImportError:
            print("device_check: torch is not installed here; run it where a CUDA torch is (or --dry-run)", file=sys.stderr)
            return 2
        if not torch.cuda.is_available():
            print("device_check: torch sees no CUDA device; run it on the GPU machine (or --dry-run)", file=sys.stderr)
            return 2
        report["device"] = torch.cuda.get_device_name()
        report["torch"] = torch.__version__
        report["smi_before"] = smi()
        report["gemms"] = sustained_gemms(torch, args.seconds, hw.peak_bf16_flops, hw.efficiency)
        table = measure_kernels(torch, hw, args.seconds)
        (out / f"kernels-{args.hardware}.json").write_text(json.dumps(table, indent=1))
        print(f"wrote {out / f'kernels-{args.hardware}.json'}: {len(table['tables']['gemm']['rows'])} GEMM rows "
              "(the format of symbolic/data/kernels/b200.json)")
        report["gpt2_step"] = gpt2_step(torch, args, out)
        bill = report["bill"].get("result", {})
        measured = report["gpt2_step"]["max_memory_allocated_bytes"]
        if bill.get("total_bytes"):
            print(f"GPT-2 step: max_memory_allocated {measured / 2**30:.3f} GiB; the bill's verdict "
                  f"{bill['total_bytes'] / 2**30:.3f} GiB")
        compare = report["gpt2_step"]["snapshot_compare"]
        print("snapshot --compare:", json.dumps(compare.get("result", {}).get("compare", compare.get("error")))[:2000])
    (out / "device_check.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"wrote {out / 'device_check.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
