"""Scale figures (issue 14): timeline depth and micro-batches, snapshot events, plan GPUs.

Prints seconds per case; nothing here is asserted (tests/test_scale.py checks the
growth with a time ratio on small instances). Run: .venv/bin/python benchmarks/scale.py [--quick]
"""
from __future__ import annotations

import gzip
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path

QUICK = "--quick" in sys.argv


def timed(label: str, fn) -> float:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    print(f"{label:<72} {elapsed:8.2f} s", flush=True)
    return elapsed


def gpt_config(layers: int) -> dict:
    """A GPT-7B-wide config (seed 001's 7B) at ``layers`` layers."""
    return {"model_type": "gpt2", "n_layer": layers, "n_embd": 4096, "n_head": 32, "n_inner": None,
            "n_positions": 4096, "vocab_size": 51200, "tie_word_embeddings": True}


def synthetic_trace(events: int, ooms: int, live_cap: int = 256) -> dict:
    """A snapshot with ``events`` alloc/free trace events (at most ``live_cap`` alive)
    in one 1 GiB segment, then ``ooms`` OOM events, each after one more alloc/free pair
    every 100 OOMs (so the allocator state changes between some of them)."""
    trace, live, addr, step = [], [], 0, 4096
    base = 1 << 32
    trace.append({"action": "segment_alloc", "addr": base, "size": 1 << 30, "stream": 0, "time_us": 0})
    t = 0
    while len(trace) < events:
        t += 1
        if len(live) < live_cap and (t % 3 or not live):
            a = base + (addr % ((1 << 30) // step)) * step
            addr += 1
            trace.append({"action": "alloc", "addr": a, "size": 2048, "stream": 0, "time_us": t, "frames": []})
            live.append(a)
        else:
            a = live.pop(0)
            trace.append({"action": "free_requested", "addr": a, "size": 2048, "stream": 0, "time_us": t})
            trace.append({"action": "free_completed", "addr": a, "size": 2048, "stream": 0, "time_us": t})
    for k in range(ooms):
        t += 1
        if k % 100 == 0 and live:
            a = live.pop(0)
            trace.append({"action": "free_completed", "addr": a, "size": 2048, "stream": 0, "time_us": t})
        trace.append({"action": "oom", "size": 2 << 30, "device_free": 0, "stream": 0, "time_us": t})
    blocks = [{"address": a, "size": 2048, "requested_size": 2048, "state": "active_allocated", "frames": []}
              for a in live]
    segment = {"device": 0, "address": base, "total_size": 1 << 30, "stream": 0, "blocks": blocks}
    return {"segments": [segment], "device_traces": [trace]}


def main() -> None:
    from symbolic.layout.layout import Layout
    from symbolic.models.hf import from_hf_dict
    from symbolic.step import timeline as T
    from symbolic.step.snapshot import analyse, load

    print("timeline (build, every instant, allocator model), GPT-7B width, s = 2048:")
    cases = [(32, {}), (128, {}), (300, {}), (300, dict(pp=4, global_batch=1000)),
             # p = 4, v = 3 (p = 10 is refused since the timeline allocates whole bytes: 300 layers of GPT-7B width
             # do not split into whole bytes over p = 10)
             (300, dict(pp=4, interleave=3, global_batch=1000)), (600, dict(pp=4, global_batch=1000))]
    for layers, kw in cases + ([] if QUICK else [(20_000, {})]):
        model = from_hf_dict(gpt_config(layers), f"gpt-L{layers}")
        layout = Layout(seq=2048, **kw)

        def run(model=model, layout=layout):
            tl = T.build(model, layout)
            tl.evaluate()
            tl.reserved()
        words = ", ".join(f"{k}={v}" for k, v in kw.items()) or "no pipeline"
        timed(f"  {layers} layers, {words}", run)
    from symbolic.models.builtin import preset
    timed("  gpt-1t (128 layers, Korthikanti Table 3), defaults", lambda: (T.build(preset("gpt-1t")).evaluate(),
                                                                           T.build(preset("gpt-1t")).reserved()))

    print("snapshot reader (load + analyse):")
    sizes = ((100_000, 10_000),) if QUICK else ((100_000, 10_000), (1_000_000, 0), (200_000, 100_000))
    with tempfile.TemporaryDirectory() as tmp:
        for events, ooms in sizes:
            path = Path(tmp) / f"snap-{events}-{ooms}.pickle.gz"
            path.write_bytes(gzip.compress(pickle.dumps(synthetic_trace(events, ooms)), compresslevel=1))
            timed(f"  {events:,} trace events + {ooms:,} OOM events ({path.stat().st_size / 2**20:.1f} MiB gzip)",
                  lambda path=path: analyse(load(path)))

    print("plan divisors:")
    from symbolic.search.plan import divisors
    for n in (10**5, 10**7, 10**16, 2**60, 10**18 + 9):
        timed(f"  divisors({n:,}) -> {len(divisors(n)):,} divisors", lambda n=n: divisors(n))
    from symbolic.search.plan import plan
    for gpus in (10**5, 10**7, 10**16):
        timed(f"  plan(gpt-175b, {gpus:.0e} GPUs, 80 GB), one micro-batch per DP rank (API; CLI caps at 10^7)",
              lambda gpus=gpus: plan(preset("gpt-175b"), gpus, 80 * 10**9))

if __name__ == "__main__":
    main()
