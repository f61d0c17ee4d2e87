"""Test-wide settings: the bill's derivation cache goes to a folder of this run, not the user's."""
import os
import tempfile

os.environ.setdefault("SYMBOLIC_CACHE_DIR", tempfile.mkdtemp(prefix="symbolic-test-cache-"))

# Text output is as wide as $COLUMNS (symbolic.render.terminal.output_width): the tests read it at
# the pipe's 160 columns unless a test sets a width itself (tests/test_widths.py).
os.environ.pop("COLUMNS", None)
