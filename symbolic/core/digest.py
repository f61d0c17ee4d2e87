"""SHA-256 for the caches' keys and fingerprints, without ``hashlib``'s import.

``hashlib`` loads OpenSSL's ``_hashlib`` when it is imported (≈ 2.4 ms of a cold cached ``bill``, issue 24,
on these machines) though a cache key needs one hash function; CPython also builds its own SHA-256 as the
module ``_sha2`` (3.12 and later) or ``_sha256`` (3.11). Either computes the same SHA-256 digest as
``hashlib.sha256`` (FIPS 180-4; ``tests/test_cache.py`` compares them); where neither is built,
``hashlib``'s is used.
"""
from __future__ import annotations

try:  # CPython 3.12+
    from _sha2 import sha256  # noqa: F401
except ImportError:
    try:  # CPython 3.11
        from _sha256 import sha256  # noqa: F401
    except ImportError:  # another interpreter, or a CPython built without them
        from hashlib import sha256  # noqa: F401
