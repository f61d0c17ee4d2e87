"""The notebooks in notebooks/ are committed executed, so nbval has outputs to compare.

``scripts/test`` runs ``pytest --nbval --nbval-current-env`` over notebooks/, which
re-executes every notebook and compares each cell's output with the stored one.
A notebook committed without outputs would turn that into "runs without error";
these checks fail instead. After editing a notebook, store its outputs with
``jupyter execute --inplace notebooks/NAME.ipynb``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
IGNORE_OUTPUT = "# NBVAL_IGNORE_OUTPUT"


def _code_cells(path: Path) -> list[dict]:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code" and "".join(cell["source"]).strip()]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _text(output: dict) -> str:
    if output["output_type"] == "stream":
        return "".join(output["text"])
    data = output.get("data", {})
    return "".join("".join(data.get(kind, "")) for kind in ("text/plain", "text/latex", "text/html"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_executed_in_order(path):
    cells = _code_cells(path)
    assert cells, f"{path.name} has no code cells"
    counts = [cell.get("execution_count") for cell in cells]
    assert None not in counts, (f"{path.name}: cells never executed; run "
                                f"`jupyter execute --inplace notebooks/{path.name}`")
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: not executed top to bottom in one run: {counts}"
    compared = [cell for cell in cells if not _source(cell).lstrip().startswith(IGNORE_OUTPUT)]
    assert any(cell["outputs"] for cell in compared), f"{path.name}: no stored output for nbval to compare"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_outputs_nbval_can_compare(path):
    """No errors stored; widgets and run-varying text only in NBVAL_IGNORE_OUTPUT cells;
    no init_printing (its output depends on the terminal width)."""
    for cell in _code_cells(path):
        source = _source(cell)
        assert "init_printing" not in source, f"{path.name}: do not call sympy.init_printing() in a tested notebook"
        assert all(output["output_type"] != "error" for output in cell["outputs"]), f"{path.name}: stored error"
        if source.lstrip().startswith(IGNORE_OUTPUT):
            continue
        for output in cell["outputs"]:
            assert WIDGET_VIEW not in output.get("data", {}), f"{path.name}: widget output needs {IGNORE_OUTPUT}"
            text = _text(output)
            assert not re.search(r"\b0x[0-9a-f]{6,}\b", text), f"{path.name}: a memory address in a compared cell"
            assert not re.search(r"\b\d+(\.\d+)? ?(ms|µs|us)\b|Wall time", text), \
                f"{path.name}: a timing in a compared cell"


def test_a_bill_shows_as_one_html_block_in_a_real_kernel():
    """Showing a bill in a notebook gives one output: the summary, the bar and the whole text folded
    (rich's console, bound to a StringIO, must not display each line into the notebook by itself)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        "import symbolic\nsymbolic.bill('gpt-7b', seq=2048, tp=2, gpu_memory='80GB')")]
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3").execute()
    outputs = notebook.cells[0].outputs
    assert [output.output_type for output in outputs] == ["execute_result"], \
        [output.output_type for output in outputs][:5]
    page = outputs[0]["data"]["text/html"]
    assert page.count("<details>") == 1
    fold = re.search(r"<details><summary>details</summary><pre>(.*?)</pre></details>", page, re.S)
    assert fold is not None, page[-300:]
    text = fold.group(1)
    assert "PARAMETERS" in text and "ACTIVATIONS" in text, text[:300]
    assert len(text.splitlines()) > 20
    assert "VERDICT" in page.split("<details>")[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_result_displays_are_one_block_with_a_full_fold(path):
    """A stored result display holds its whole text in the fold (an empty ``<pre>`` there, or rich's
    own ``display_data`` outputs beside it, is the console writing into the notebook)."""
    for cell in _code_cells(path):
        for output in cell["outputs"]:
            page = "".join(output.get("data", {}).get("text/html", ""))
            assert "<pre></pre></details>" not in page, f"{path.name}: an empty fold in a stored display"
            assert not page.startswith('<pre style="white-space:pre;overflow-x:auto'), \
                f"{path.name}: rich's own display output stored beside a result"


#: The packages a notebook may import (the README's "Python" section names them): the public API and the
#: engine's layers by package.
NOTEBOOK_API = ("symbolic", "symbolic.api", "symbolic.core", "symbolic.models", "symbolic.layout", "symbolic.ledgers",
                "symbolic.bill", "symbolic.step", "symbolic.claims", "symbolic.render")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_imports_only_the_api_the_readme_names(path):
    """Issue 45: the notebooks imported internal modules the README did not present; the README now names
    the packages a notebook may import, and each notebook keeps to them."""
    readme = (path.parent.parent / "README.md").read_text()
    for package in NOTEBOOK_API[2:]:
        assert f"`{package}`" in readme, package
    for cell in _code_cells(path):
        for module in re.findall(r"^\s*(?:from|import)\s+(symbolic[\w.]*)", _source(cell), flags=re.M):
            assert any(module == api or module.startswith(api + ".") for api in NOTEBOOK_API[1:]) or \
                module == "symbolic", (path.name, module)
