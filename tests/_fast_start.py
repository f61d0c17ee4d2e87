"""A pytest plugin scripts/test loads first (``-p tests._fast_start``, before the installed plugins): every
pytest process (the controller and each xdist worker) loads nbval, which imports nbformat, whose jsonschema
imports the optional ``rfc3987_syntax`` for its "iri" format check — and that builds a Lark grammar at import,
1.9 s of CPU a process. nbformat's schemas use no "format" and it runs no format checker, so the check is
never used here: the module is marked absent (jsonschema skips what raises ImportError), nothing else changes."""
import sys

sys.modules.setdefault("rfc3987_syntax", None)
