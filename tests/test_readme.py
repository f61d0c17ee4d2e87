"""The README's and its pages' Python examples run as written (issue 13): every ```python
block, in order (the README, then docs/ in the README's table order), in one namespace — a renamed
function or a changed number fails here before a reader finds it; every figure a command line quotes
is what that command prints (issue 45)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def pages() -> list[Path]:
    """The README, then the pages its "Where the rest lives" table links, in that order."""
    linked = re.findall(r"^\| \[(docs/[\w-]+\.md)\]", README.read_text(), flags=re.M)
    return [README] + [ROOT / name for name in linked]


def python_blocks() -> list[str]:
    return [block for page in pages()
            for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)]


def test_the_readme_is_short_and_links_pages_that_exist():
    """Issue 45: a README a newcomer reads in five minutes; the rest under docs/, each page linked."""
    assert len(README.read_text().splitlines()) <= 400
    assert len(pages()) >= 10 and all(page.exists() for page in pages())


def test_readme_has_python_examples():
    blocks = python_blocks()
    assert len(blocks) >= 3
    assert any("symbolic.bill(" in block for block in blocks)


def test_readme_python_examples_run(capsys):
    namespace: dict = {}
    for number, block in enumerate(python_blocks(), 1):
        exec(compile(block, f"README.md python block {number}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "VERDICT: FITS in 80.00 GB" in out
    assert "15161435136 10572791808" in out and "5157132288 optimizer step" in out
    assert "--gpu-memory '80': give a number with a unit" in out
    assert "gpt-175b megatron-core bf16-adam-fp32-grads\nTrue" in out  # the launch-config reader (issue 26)


def shell_examples_with_figures() -> list[tuple[str, list[str]]]:
    """The README's ``python -m symbolic ... # figure`` lines whose comment quotes a number (a size, a count):
    each runnable in-process (no file path to supply, no redirect), with the numbers its comment quotes."""
    number = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?!\w)")
    examples = []
    for line in (line for page in pages() for line in page.read_text().splitlines()):
        match = re.match(r"^python -m symbolic (.*?)\s+#\s*(.*)$", line)
        if not match or any(x in match.group(1) for x in ("path/to", ">", " -o ", "deep.json")):
            continue
        figures = [n.rstrip(",") for n in number.findall(match.group(2)) if len(n.replace(",", "")) >= 2 or "." in n]
        if figures:
            examples.append((match.group(1), figures))
    return examples


def test_readme_shell_figures_are_what_the_commands_print(capsys):
    """Every figure a README command line quotes in its comment is in what that command prints (a JSON
    answer prints counts without thousands separators): a quoted figure cannot drift from the engine."""
    import shlex

    from symbolic.cli import main

    examples = shell_examples_with_figures()
    assert len(examples) >= 8
    for command, figures in examples:
        main(shlex.split(command))
        captured = capsys.readouterr()
        printed = captured.out + captured.err
        missing = [n for n in figures if n not in printed and n.replace(",", "") not in printed]
        assert not missing, f"README: `python -m symbolic {command}` quotes {missing}, not in what it prints"
