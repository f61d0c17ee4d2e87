"""The README's pictures of the formula sheet, regenerated from the code, and what they show (issue 23).

``python scripts/docs_images.py`` (``scripts/docs-images`` runs it) writes the sheet, compiles it, renders
the first page of its activations section and of its errata as ``docs/formula-sheet-*.png`` (pdftoppm) and
records in ``docs/images.json`` what each picture shows: the page, a SHA-256 of the page's text (pdftotext;
the text, not the pixels, so a renderer's antialiasing never makes a picture stale) and its first line;
the sheet's page count; the claims' counts. ``tests/test_sheet.py`` computes the same record from the sheet
it builds and fails when a picture is stale: regenerate with this script.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "docs" / "images.json"
#: the sheet's section (its \label{sec:NAME}) whose first page each picture shows
SHEET_IMAGES = {"activations": "docs/formula-sheet-activations.png", "errata": "docs/formula-sheet-errata.png"}
RESOLUTION = 80  # dpi of the pictures


def labels(aux: Path) -> dict[str, int]:
    """The page each ``\\label`` of the sheet sits on, from pdflatex's ``.aux``."""
    return {name: int(page) for name, page in
            re.findall(r"\\newlabel\{([\w:]+)\}\{\{[^}]*\}\{(\d+)\}", Path(aux).read_text())}


def page_text(pdf: Path, first: int, last: int | None = None) -> str:
    return subprocess.run(["pdftotext", "-f", str(first), "-l", str(last or first), str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout


def record(pdf: Path, aux: Path, counts: dict[str, int]) -> dict:
    """What the pictures show, from a compiled sheet: each picture's page and text signature, the page
    count (the sheet's last label) and the claims' counts."""
    where = labels(aux)
    images = {}
    for section, image in SHEET_IMAGES.items():
        page = where[f"sec:{section}"]
        text = page_text(pdf, page)
        images[image] = {"section": section, "page": page,
                         "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
                         "first_lines": " / ".join(line for line in text.splitlines() if line.strip())[:160]}
    return {"sheet_pages": where["sheet:end"], "claims": counts, "images": images}


def claim_counts() -> dict[str, int]:
    from symbolic.claims.claims import STATUSES, check_all
    counts = Counter(r.status for r in check_all())
    return {status: counts[status] for status in STATUSES}


def build(folder: Path) -> tuple[Path, Path]:
    """The sheet written and compiled in ``folder``: (its PDF, its .aux)."""
    from symbolic.render.latex import compile_pdf, sheet
    tex = Path(folder) / "formulas.tex"
    tex.write_text(sheet(), encoding="ascii")
    pdf = compile_pdf(tex)
    return pdf, tex.with_suffix(".aux")


def main() -> int:
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as work:
        pdf, aux = build(Path(work))
        manifest = record(pdf, aux, claim_counts())
        for image, shown in manifest["images"].items():
            out = ROOT / image
            subprocess.run(["pdftoppm", "-f", str(shown["page"]), "-l", str(shown["page"]), "-r", str(RESOLUTION),
                            "-png", "-singlefile", str(pdf), str(out.with_suffix(""))], check=True)
    if MANIFEST.exists():   # the calculator's picture's record (tests/test_calculator.py screenshot writes it)
        kept = json.loads(MANIFEST.read_text()).get("calculator")
        if kept is not None:
            manifest["calculator"] = kept
    MANIFEST.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    print("wrote", *manifest["images"], MANIFEST.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
