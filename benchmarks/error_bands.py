"""Write symbolic/data/validation/error_bands.json: the step-time model's measured error on the published runs,
per framework and GPU kind (symbolic.search.throughput.error_bands), with the date, the commit and the
runs file's SHA-256 — the band each bill prints beside its step time (symbolic.bill.bands).

    .venv/bin/python benchmarks/error_bands.py [--check]

--check: exit 1 if the shipped file's bands differ from a fresh computation (the test runs it).
"""
import argparse
import datetime
import hashlib
import json
import subprocess
import sys
from pathlib import Path


def compute() -> dict:
    from symbolic.search.throughput import DATA, error_bands, predict_all

    return {"data": "derivations/throughput/public.json",
            "data_sha256": hashlib.sha256(DATA.read_bytes()).hexdigest(),
            "bands": error_bands(predict_all(DATA))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    args = parser.parse_args()
    from symbolic.bill.bands import BANDS

    fresh = compute()
    if args.check:
        shipped = json.loads(BANDS.read_text())
        same = {k: shipped.get(k) for k in ("data_sha256", "bands")} == {k: fresh[k] for k in ("data_sha256", "bands")}
        print("error bands current" if same else f"error bands stale: rerun {__file__}")
        return 0 if same else 1
    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    out = {"generated": datetime.date.today().isoformat(), "commit": commit,
           "note": "the step-time model's error on the shipped published runs (predicted − measured) / measured "
                   "TFLOP/s in the source's convention; framework null: every framework on that GPU",
           **fresh}
    BANDS.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {BANDS}: {len(out['bands'])} bands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
