"""Test-wide settings: the bill's derivation cache goes to a folder of this run, not the user's."""
import os
import tempfile

os.environ.setdefault("SYMBOLIC_CACHE_DIR", tempfile.mkdtemp(prefix="symbolic-test-cache-"))
# Under pytest-xdist (scripts/test runs ``-n auto --dist loadscope``) this file runs in the controller
# first, so every worker inherits the one folder above: a kind derived by one worker is read by the others
# (the cache writes whole files with os.replace, symbolic.bill.cache.write_entry).

# One compute thread per test process: the suite's tensors are tiny and scripts/test runs one pytest-xdist
# worker per core, so torch's (OpenMP) and OpenBLAS's thread pools only spin against the other workers
# (test_family_traces serially: 39.9 -> 24.2 s CPU, 27.9 -> 25.4 s wall, the same counts). Set here, before
# any test imports torch or numpy; the CLI subprocesses and notebook kernels a test starts inherit it.
for _threads in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")

# Text output is as wide as $COLUMNS (symbolic.render.terminal.output_width): the tests read it at
# the pipe's 160 columns unless a test sets a width itself (tests/test_widths.py).
os.environ.pop("COLUMNS", None)
