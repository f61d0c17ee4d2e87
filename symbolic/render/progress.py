"""Progress on long work: a rich progress bar on a terminal, nothing on a pipe.

``trace`` (one traced run per design point), ``sheet --pdf`` (the claims, then
pdflatex twice) and ``plan`` over a large sweep report their steps through the
callback :func:`progress` yields; the bar goes to stderr, and only when stderr
is a terminal, so piped or captured output is exactly what it was.
``SYMBOLIC_PROGRESS=off`` turns it off on a terminal too.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager


def on_terminal(stream=None) -> bool:
    stream = stream if stream is not None else sys.stderr
    return (os.environ.get("SYMBOLIC_PROGRESS", "").lower() not in ("off", "0", "no")
            and hasattr(stream, "isatty") and stream.isatty())


@contextmanager
def progress(total: int | None, description: str, stream=None):
    """Yield ``step(advance=1, description=None)``: advances a bar of ``total``
    steps (a spinner when ``total`` is None) drawn on ``stream`` (stderr) if it
    is a terminal; a no-op otherwise. The bar is removed when the work ends."""
    stream = stream if stream is not None else sys.stderr
    if not on_terminal(stream):
        yield lambda advance=1, description=None: None
        return
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                               TimeElapsedColumn)

    # markup=False: a description names the model, from a config's text ("[/oops]" in a name was rich's
    # MarkupError, an internal error on a terminal); it is printed as its characters
    columns = [SpinnerColumn(), TextColumn("{task.description}", markup=False)]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=Console(file=stream), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def step(advance: int = 1, description: str | None = None) -> None:
            bar.update(task, advance=advance, **({"description": description} if description else {}))

        yield step
