"""Progress on long work (symbolic.render.progress; issue 13): a rich bar on a
terminal, nothing on a pipe."""
import io

from symbolic.cli import main
from symbolic.render.progress import progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_on_a_terminal_and_nothing_on_a_pipe(monkeypatch):
    monkeypatch.delenv("SYMBOLIC_PROGRESS", raising=False)
    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        with progress(3, "tracing a layer", stream=stream) as step:
            for _ in range(3):
                step()
    assert "tracing a layer" in terminal.getvalue()
    assert pipe.getvalue() == ""
    monkeypatch.setenv("SYMBOLIC_PROGRESS", "off")
    quiet = Terminal()
    with progress(None, "planning", stream=quiet) as step:
        step()
    assert quiet.getvalue() == ""


def test_a_description_is_its_characters_not_markup(monkeypatch):
    """A model's name from a config (rich markup in it) is printed as it is, on a terminal."""
    monkeypatch.delenv("SYMBOLIC_PROGRESS", raising=False)
    terminal = Terminal()
    with progress(2, "evaluating the layouts of [/oops][blink] on 8 GPUs", stream=terminal) as step:
        step(description="tracing [bold]x[/bold]")
        step()
    shown = terminal.getvalue()
    assert "evaluating the layouts of [/oops][blink]" in shown and "tracing [bold]x[/bold]" in shown


def test_commands_print_no_progress_into_a_pipe(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a short file name: a path is one word, it cannot wrap
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["sheet", "-o", "s.tex"]) == 0
    sheet = capsys.readouterr()
    assert sheet.err == "" and max(map(len, sheet.out.rstrip("\n").split("\n"))) <= 80  # fits 80 columns
    assert main(["plan", "gpt-7b", "--gpus", "8", "--gpu-memory", "80GB", "--top", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
