"""``derive``'s output: a derived expression as text and its ``--json`` object — what ``symbolic
derive`` prints and ``symbolic.derive()`` returns (below the commands: both render with it)."""
from __future__ import annotations


def render_text(data: dict, width: int = 160) -> str:
    """``QUANTITY [unit] = expression`` (and at the values or the model), wrapped to ``width``."""
    from ..render.summary import wrap

    lines = wrap(f"{data['quantity']} [{data['unit']}] = {data['paper_form']}", width, "", "    ")
    if data.get("at_values") is not None:
        given = ", ".join(f"{k}={v}" for k, v in data["substituted"].items())
        lines += wrap(f"at {given}: {data['at_values']}", width, "  ", "      ")
    if data.get("model") is not None:
        values = ", ".join(f"{k}={v}" for k, v in data["model_values"].items())
        lines += wrap(f"at {data['model']} ({values}): {data['at_model']}", width, "  ", "      ")
        for note in data["approximations"]:
            lines += wrap(f"approximation: {note}", width, "  ", "      ")
    return "\n".join(lines)


def json_data(data: dict) -> dict:
    """The ``--json`` object: everything but the LaTeX at the values or the model (printed by ``--latex``)."""
    return {key: value for key, value in data.items() if key not in ("at_model_latex", "at_values_latex")}
