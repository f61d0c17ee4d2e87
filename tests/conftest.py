"""Test-wide settings: the bill's derivation cache goes to a folder of this run, not the user's."""
import os
import tempfile

os.environ.setdefault("SYMBOLIC_CACHE_DIR", tempfile.mkdtemp(prefix="symbolic-test-cache-"))
# Under pytest-xdist (scripts/test runs ``-n auto --dist loadscope``) this file runs in the controller
# first, so every worker inherits the one folder above: a kind derived by one worker is read by the others
# (the cache writes whole files with os.replace, symbolic.bill.cache.write_entry).

# Text output is as wide as $COLUMNS (symbolic.render.terminal.output_width): the tests read it at
# the pipe's 160 columns unless a test sets a width itself (tests/test_widths.py).
os.environ.pop("COLUMNS", None)
