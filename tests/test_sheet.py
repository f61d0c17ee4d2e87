"""The LaTeX formula sheet (symbolic.render.latex, ``symbolic sheet``)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest
from sympy import expand, latex

from symbolic.claims.claims import check, load_all
from symbolic.cli import main
from symbolic.core.dims import LATEX_NAMES
from symbolic.claims.quantities import evaluate
from symbolic.render.latex import FAMILY_PAGES, LEDGERS, NATIVE, breakable, ledger_of, simplified, tex


@pytest.fixture(scope="module")
def results():
    return [check(claim) for claim in load_all()]


@pytest.fixture(scope="module")
def source(results):
    from symbolic.render.latex import sheet
    return sheet(results)


def test_tex_escapes_and_stays_ascii():
    assert tex("a_b & 50% {x} #1 $") == r"a\_b \& 50\% \{x\} \#1 \$"
    assert tex("Q·Kᵀ ≈ 1 + s/(6h), 3h ≫ s") == r"Q$\cdot$K$^{\mathsf{T}}$ $\approx$ 1 + s/(6h), 3h $\gg$ s"
    assert tex("只开 ZeRO-1 时只有 KΨ 被 d 除") == r"[zh] ZeRO-1 [zh] K$\Psi$ [zh] d [zh]"
    assert tex("Ω") == "?"


def test_simplified_pulls_out_the_papers_monomial():
    tp = evaluate("activations.per_layer", tensor_parallel=True)
    shown = simplified(tp)
    assert expand(shown - tp) == 0
    assert latex(shown, symbol_names=LATEX_NAMES) == r"b h s \left(\frac{5 a s}{h t} + 10 + \frac{24}{t}\right)"
    params = evaluate("params", scopes=["layer", "embedding"])
    assert latex(simplified(params), symbol_names=LATEX_NAMES) == \
        r"L h^{2} \left(12 + \frac{13}{h} + \frac{V}{L h} + \frac{s}{L h}\right)"


def test_every_claim_has_a_ledger(results):
    ledgers = {ledger_of(r.claim) for r in results}
    assert ledgers <= {name for name, _, _ in LEDGERS}
    assert {"activations", "params", "model_states", "flops"} <= ledgers


def test_sheet_source(source, results):
    assert source.isascii()
    assert source.count(r"\section{") == 1 + len(NATIVE) + len(FAMILY_PAGES) + sum(
        1 for name, _, _ in LEDGERS if name != "units" or any(ledger_of(r.claim) == "units" for r in results))
    # The saved-tensor table: one row per tensor, with its shape, bytes and split axis.
    assert r"\texttt{attention/softmax\_output} & $b \times a \times s \times s$ & bf16 (2 B) & $2 a b s^{2}$ & " \
           r"tensor-parallel & attention core \\" in source
    # The strategies' simplified results, and the paper forms next to them.
    assert r"$\displaystyle \frac{b h s}{t} \left(\frac{5 a s}{h} + 34\right)$" in source
    assert r"\texttt{korthikanti/\allowbreak{}eq2}" in source
    # Model states in \Psi, with the papers' letters.
    assert r"\frac{16 \Psi}{p t}" in source
    # Every claim appears once (issue 13: the sheet printed them twice); every erratum is in the errata
    # section, with its reason, and only there.
    for result in results:
        assert source.count(r"\texttt{" + breakable(result.claim.id) + "}") == 1, result.claim.id
    errata = source[source.index(r"\section{Errata}"):]
    found = [r for r in results if r.status != "reproduced"]
    assert errata.count(r"\subsection*{") == len(found)
    for result in found:
        assert tex(result.claim.erratum.reason if result.status == "erratum" else result.message) in errata
    # issue 27: the counts apart, and the reading a reproduced claim holds under beside it
    n_errata = sum(r.status == "erratum" for r in results)
    n_undecided = sum(r.status == "underdetermined" for r in results)
    assert (n_errata, n_undecided) == (39, 11)
    assert f"{n_errata} claims of the sources are errata" in errata and f"{n_undecided} more are underdetermined" in errata
    assert errata.index(r"\textbf{\large Underdetermined}") > errata.rindex(r"\texttt{004/\allowbreak{}v3/")
    assert (r"\texttt{004/\allowbreak{}v3-\allowbreak{}budget/\allowbreak{}constant} \emph{(under: stage 2 of 4 "
            r"(15 MoE layers, no embedding, no output layer))}") in source


def _tools() -> bool:
    return all(shutil.which(tool) for tool in ("pdflatex", "pdfinfo", "pdftotext"))


needs_latex = pytest.mark.skipif(not _tools() and os.environ.get("CI") != "true",
                                 reason="pdflatex/poppler-utils not installed (scripts/test installs them)")


def _page_text(pdf, first, last=None) -> str:
    return subprocess.run(["pdftotext", "-f", str(first), "-l", str(last or first), str(pdf), "-"],
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sheet written and compiled once for the module (``sheet -o … --pdf``, pdflatex's two runs):
    (the .tex path, what the command printed)."""
    import contextlib
    import io

    if not _tools() and os.environ.get("CI") != "true":  # under CI the tools are installed: no skip
        pytest.skip("pdflatex/poppler-utils not installed (scripts/test installs them)")
    target = tmp_path_factory.mktemp("sheet") / "formulas.tex"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["sheet", "-o", str(target), "--pdf"]) == 0
    return target, out.getvalue()


@needs_latex
def test_sheet_compiles_into_pages_worth_printing(built, results):
    """Issue 13: no overfull box wider than 5 pt in pdflatex's log, no page of fewer than 10 lines,
    each section on the page its label says, the errata on pages of their own, no test log."""
    target, printed = built
    assert printed.split() == ["wrote", str(target), "wrote", str(target.with_suffix(".pdf"))]
    pdf = target.with_suffix(".pdf")
    assert pdf.read_bytes()[:5] == b"%PDF-"
    log = target.with_suffix(".log").read_text(errors="replace")
    overfull = [float(width) for width in re.findall(r"Overfull \\[hv]box \(([0-9.]+)pt too", log)]
    assert not [width for width in overfull if width > 5], overfull
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)$", info, re.M).group(1))
    labels = dict(re.findall(r"\\newlabel\{(sec:\w+|sheet:end)\}\{\{[^}]*\}\{(\d+)\}", target.with_suffix(".aux")
                                                                                          .read_text()))
    assert pages == int(labels.pop("sheet:end"))
    short = {page: lines for page in range(1, pages + 1)
             if (lines := sum(1 for line in _page_text(pdf, page).splitlines() if line.strip())) < 10}
    assert not short, short
    titles = {name: title for name, title, _ in LEDGERS} | {"errata": "Errata"} | {
        arch: title for arch, title, _ in NATIVE} | {f"fam_{label}": f"Family: {title}" for label, title, *_ in FAMILY_PAGES}
    for label, page in labels.items():
        assert titles[label.removeprefix("sec:")] in _page_text(pdf, page), (label, page)
    # the errata start a page: its first lines are the section's number and title
    number, title = _page_text(pdf, labels["sec:errata"]).split("\n\n")[:2]
    assert number.isdigit() and title == "Errata"
    errata_pages = _page_text(pdf, labels["sec:errata"], pages)
    before = _page_text(pdf, 1, int(labels["sec:errata"]) - 1)
    for result in results:
        if result.status == "erratum":
            assert result.claim.id in errata_pages.replace("\n", "") and result.claim.id not in before
    # no test log: the title page has no claim counts, the pages no status column
    assert "erratum" not in _page_text(pdf, 1) and "reproduced  " not in before
    assert "[Korthikanti2022]" in _page_text(pdf, 1, 2)  # the bibliography


def _words(pdf) -> list[list[tuple[float, float, float, float, str]]]:
    """Each page's words with their boxes (``pdftotext -bbox``: xMin, yMin, xMax, yMax in pt)."""
    html = subprocess.run(["pdftotext", "-bbox", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    word = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">(.*?)</word>')
    return [[(*map(float, m[:4]), m[4]) for m in word.findall(page)] for page in html.split("<page ")[1:]]


#: How far two word boxes may run into each other, in pt, each way. pdftotext's boxes are the fonts' ascent
#: and descent, not the glyphs': a superscript's box touches its base's (they meet, 0.005 pt), a subscript's
#: may reach 0.25 pt into a neighbour's; two rows of fractions that collide overlap by 1.7 pt (issue 23).
OVERLAP_PT = 0.5


def overlaps(words) -> list[tuple[str, str, float, float]]:
    """The pairs of words on one page whose boxes overlap by more than OVERLAP_PT both ways."""
    found = []
    ordered = sorted(words, key=lambda w: w[1])
    for i, (x0, y0, x1, y1, text) in enumerate(ordered):
        for X0, Y0, X1, Y1, other in ordered[i + 1:]:
            if Y0 >= y1 - OVERLAP_PT:  # sorted by top: no later word reaches into this one
                break
            wide, high = min(x1, X1) - max(x0, X0), min(y1, Y1) - max(y0, Y0)
            if wide > OVERLAP_PT and high > OVERLAP_PT:
                found.append((text, other, round(wide, 2), round(high, 2)))
    return found


def test_the_overlap_finder_finds_colliding_rows_and_passes_touching_ones():
    row = [(100.0, 226.0, 108.6, 234.0, "ht")]
    assert overlaps(row + [(100.0, 232.3, 108.4, 240.3, "4a")]) == [("ht", "4a", 8.4, 1.7)]  # page 29's fractions
    assert overlaps(row + [(108.6, 224.0, 112.0, 229.0, "2")]) == []      # a superscript meeting its base
    assert overlaps(row + [(100.0, 233.8, 108.4, 241.8, "5as")]) == []    # 0.2 pt: within the fonts' boxes


@needs_latex
def test_no_text_overlaps_on_any_page(built):
    """Issue 23 item 6: no two words on a page of the sheet overlap (the family pages' strategy rows of
    fractions collided: page 29 of 53)."""
    pdf = built[0].with_suffix(".pdf")
    pages = _words(pdf)
    assert len(pages) > 40
    found = {number: hits[:3] for number, words in enumerate(pages, 1) if (hits := overlaps(words))}
    assert found == {}


@needs_latex
def test_the_docs_pictures_of_the_sheet_are_current(built, results):
    """Issue 23 item 6: docs/formula-sheet-*.png show the pages the code writes now — the record
    scripts/docs_images.py wrote beside them (each pictured page's text, the page count, the claims'
    counts) equals the one made from this sheet; the README's page count is the sheet's. Stale:
    run scripts/docs-images."""
    import importlib.util
    import json
    from collections import Counter
    from pathlib import Path

    from symbolic.claims.claims import STATUSES

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("docs_images", root / "scripts" / "docs_images.py")
    docs_images = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs_images)
    counts = Counter(r.status for r in results)
    now = docs_images.record(built[0].with_suffix(".pdf"), built[0].with_suffix(".aux"),
                             {status: counts[status] for status in STATUSES})
    stored = json.loads(docs_images.MANIFEST.read_text())
    stored.pop("calculator", None)   # the calculator's picture: tests/test_calculator.py checks its record
    assert stored == now, "docs pictures are stale: run scripts/docs-images"
    for image in now["images"]:
        assert (root / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    readme = (root / "README.md").read_text()
    assert f"The sheet has {now['sheet_pages']} pages" in readme
    assert f"{counts['erratum']} errata recorded, {counts['underdetermined']} underdetermined" in readme


def test_sheet_rejects_a_bad_output_name(tmp_path, capsys):
    assert main(["sheet", "-o", str(tmp_path / "formulas.pdf")]) == 2
    assert "give a file name ending in .tex" in capsys.readouterr().err
    assert main(["sheet", "-o", str(tmp_path / "missing" / "f.tex")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_sheet_is_deterministic(source, results):
    from symbolic.render.latex import sheet
    assert sheet(results) == source


def test_sheet_has_the_llama_and_moe_inventories(source):
    """Generated from the inventories: SwiGLU's gate, GQA's g-head K, the fused kernel's log-sum-exp,
    the LLaMA per-layer bytes and parameter count, and the MoE's N_total and N_active."""
    llama = source[source.index(r"\section{LLaMA layer}"):source.index(r"\section{Mixture-of-experts layer}")]
    moe = source[source.index(r"\section{Mixture-of-experts layer}"):source.index(r"\section{Errata}")]
    assert r"\texttt{layer/mlp/gate\_weight} & $h \times f$ & $L f h$ & SwiGLU gate \\" in llama
    assert r"\texttt{attention/key} & $s \times b \times g \times \frac{h}{a}$" in llama
    assert r"\texttt{attention/logsumexp} & $b \times a \times s$ & fp32 (4 B) & $4 a b s$" in llama
    per_layer = evaluate("activations.per_layer", arch="llama", tensor_parallel=True, sequence_parallel=True)
    assert latex(simplified(per_layer), symbol_names=LATEX_NAMES) in llama
    assert latex(simplified(evaluate("params", arch="llama")), symbol_names=LATEX_NAMES) in llama
    assert "softmax" not in llama  # no s x s tensor is kept by the fused kernel
    assert r"$N_\mathrm{total}$" in moe and r"$N_\mathrm{active}$" in moe
    assert r"\texttt{moe/expert/gate\_up\_output}" in moe


def test_sheet_sets_the_papers_count_beside_the_kernels(source):
    from symbolic.models.architectures import gpt
    from symbolic.models.architectures.conventions import paper_form, with_conventions
    from symbolic.ledgers.activations import total_bytes

    assert "CUDA minus the backend terms (the paper)" in source
    paper = total_bytes(paper_form(with_conventions(gpt.saved_tensors(), "cuda")))
    assert expand(paper - evaluate("activations.per_layer")) == 0  # Eq 1, recovered by removing named terms
    assert latex(simplified(paper), symbol_names=LATEX_NAMES) in source


def _family_section(source, label):
    start = source.index(rf"\label{{sec:fam_{label}}}")
    return source[start:source.index(r"\section", start)]


def test_every_family_has_a_page_of_its_coefficients(source):
    """Issue 10 item 6: a page per family, its per-layer coefficients summed from the inventories the
    bill itemises — the saved bytes collected in s·b·h, parameters and forward FLOPs per token in h² —
    each the latex of the engine's own expression, never typed."""
    from symbolic.core.dims import SYMBOLS
    from symbolic.render.latex import family_forms, family_model, family_units, layer_kinds

    covered = {model_type for _, _, model_type, _ in FAMILY_PAGES}
    assert {"llama", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo2", "gpt_neox", "mixtral", "qwen2_moe",
            "qwen3_moe", "deepseek_v2", "deepseek_v3"} <= covered
    units = family_units()
    for label, title, model_type, builtin in FAMILY_PAGES:
        page = _family_section(source, label)
        model = family_model(model_type, builtin)
        forms = family_forms(model)
        for kind, subs in layer_kinds(model):
            for name in ("saved", "params", "flops"):
                inner = expand(forms[name].subs(subs) / units[name])
                assert latex(inner, symbol_names=LATEX_NAMES) in page, (label, name, kind)
        if builtin:  # its numbers at the built-in model's dimensions
            assert f"At {builtin} (s = {model.seq:,}, b = 1)" in page
    # The paper's GPT layer is the gelu-fused recipe: 34 and 5. HF's GPT-2 runs gelu_new, a chain of
    # element-wise ops that keeps 24 sbh more (the traced figure), which its page shows.
    s, b, h, a = (SYMBOLS[x] for x in "sbha")
    gpt2 = family_forms(family_model("gpt2", None))["saved"]
    assert expand(evaluate("activations.per_layer") - s * b * h * (34 + 5 * a * s / h)) == 0
    assert expand(gpt2 - s * b * h * (34 + 5 * a * s / h)) == 24 * s * b * h


def test_the_family_pages_show_what_each_part_adds(source):
    """Differences of two family forms are the parts that tell them apart: Qwen3's per-head Q/K
    RMSNorms add s·b·(6a·d + 6g·d + 4a + 4g) bytes over Llama (heads of width d = h/a), as the
    issue traced; DeepSeek-V3's dense layer and its MoE layer are both shown whole."""
    from symbolic.core.dims import SYMBOLS
    from symbolic.render.latex import family_forms, family_model

    s, b, h, a, g = (SYMBOLS[x] for x in "sbhag")
    llama = family_forms(family_model("llama", "llama-3-8b"))
    qwen3 = family_forms(family_model("qwen3", "qwen3-8b"))
    d = h / a
    assert expand(qwen3["saved"] - llama["saved"] - s * b * (6 * a * d + 6 * g * d + 4 * a + 4 * g)) == 0
    assert expand(qwen3["flops"] - llama["flops"]) == 0  # the norms do no matmul
    deepseek = _family_section(source, "deepseek_v3")
    assert "An MoE layer (L\\_d = 0)" in deepseek and "A dense layer (L\\_d = L), no parallelism" in deepseek
    assert "671,026,404,352 parameters" in deepseek  # the count, summed by the sheet's own forms


def test_a_form_reproduced_under_a_reading_shows_that_readings_result(tmp_path):
    """Issue 27: a form claim whose source leaves an input open is grouped under the engine's result of the
    reading that reproduces it, and names the reading."""
    from symbolic.claims.claims import load
    from symbolic.render.latex import claims_block

    path = tmp_path / "x.toml"
    path.write_text('document = "test"\n[[claim]]\nid = "x"\nquantity = "activations.per_layer"\n'
                    'form = "s*b*h*(10 + 24/t + 5*a*s/(h*t))"\nopen = "whether the source splits over t"\n'
                    '[[claim.reading]]\nname = "no parallelism"\n'
                    '[[claim.reading]]\nname = "tensor parallel"\noptions = { tensor_parallel = true }\n')
    result = check(load(path)[0])
    assert (result.status, result.reading) == ("reproduced", "tensor parallel")
    block = "\n".join(claims_block([result]))
    tp = evaluate("activations.per_layer", tensor_parallel=True)
    assert latex(simplified(tp), symbol_names=LATEX_NAMES) in block and r"\emph{(under: tensor parallel)}" in block
