"""The README's Python examples run as written (issue 13): every ```python
block, in order, in one namespace — a renamed function or a changed number
fails here before a reader finds it."""
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)


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
    assert "13476831232 10572791808" in out and "5157132288 optimizer step" in out
    assert "--gpu-memory '80': give a number with a unit" in out
    assert "gpt-175b megatron-core bf16-adam-fp32-grads\nTrue" in out  # the launch-config reader (issue 26)
