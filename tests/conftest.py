"""Test-wide settings: the bill's derivation cache goes to a folder of this run, not the user's."""
import os
import tempfile

os.environ.setdefault("SYMBOLIC_CACHE_DIR", tempfile.mkdtemp(prefix="symbolic-test-cache-"))
