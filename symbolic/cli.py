"""``python -m symbolic COMMAND ...``: one module per command in ``symbolic.commands``.

Each command module defines ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. :func:`main` is the one error boundary of every command:

- bad input — :class:`symbolic.models.config.ConfigError`, any ``ValueError``
  of the engine's validators and readers, a usage error — is one line on stderr
  naming the field, the value and the fix: exit 2;
- a file that cannot be read or written (missing or read-only folder, a
  directory, ``/dev/full``), a full disk, a resource limit (memory, recursion,
  an overflow) is one line naming the file or the input: exit 2;
- a failed check is the command's own exit 1; a broken pipe (``| head``) ends
  quietly with exit 0 (the reader asked for no more);
- any other exception is a bug: one line and "please report", exit 3 — the
  traceback only with ``--debug`` (anywhere on the command line) or
  ``SYMBOLIC_DEBUG=1``.

Every message passes through :func:`symbolic.core.inputs.clean`: text that came
from a file (a config's ``_name_or_path``) never sends a control character to
the terminal.
"""
from __future__ import annotations

import argparse
import re
import decimal
import errno
import importlib
import os
import sys

#: The commands, in the order ``--help`` lists them.
COMMANDS = ["bill", "derive", "check", "calculator", "plan", "solve", "sheet", "timeline", "snapshot", "trace"]

EXIT_BAD_INPUT = 2
EXIT_BUG = 3
MAX_MESSAGE = 2000  #: characters of an error line: a value quoted from a file is cut, not printed whole


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem, and every option notes when it is
    typed (``args._typed``: a ``--framework`` preset or a ``--from`` config fills only the others)."""

    def __init__(self, *args, **kwargs):
        # No abbreviations: argparse's default reads a prefix as the one option it starts, so `bill --gpus 8`
        # was silently `--gpus-per-node 8` (a wrong number, not a refusal).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        from .layout.options import record_typed

        record_typed(self)

    def error(self, message: str):  # noqa: D401 - argparse's signature
        from .core.inputs import clean

        hint = ""
        if re.match(r"unrecognized arguments: --gpus\b(?!-)", message):  # plan's option, typed to another command
            hint = "; the GPUs are the layout's t·p·d·c: give --dp (and --tp, --pp, --cp), or ask `symbolic plan --gpus N`"
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {clean(message)}{hint} (see --help)\n")


#: Under every command's --help: where the citations of the output resolve (docs/sources.md).
SOURCES_EPILOG = ("sources cited in the output, by bibliography key (docs/sources.md lists each with its arXiv id "
                  "or, for the three source notes, title and subject): [Korthikanti2022] arXiv 2205.05198 "
                  "(activations), [Narayanan2021] arXiv 2104.04473 (parameters, FLOPs, pipeline), [ZeRO2019] "
                  "arXiv 1910.02054 (model states), [Kaplan2020] arXiv 2001.08361 (6N FLOPs), [Liu2023] arXiv "
                  "2310.01889 (context parallelism); [seed000] per-layer activations, [seed001] the four "
                  "ledgers and the calculator, [seed004] memory over a training step")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``only`` that one (a run needs no other:
    each command module, and what it imports, is then loaded only when it runs)."""
    parser = _Parser(prog="symbolic", description="Transformer training memory and FLOPs, derived and checked.",
                     epilog=SOURCES_EPILOG + ". --debug (anywhere): show the traceback of an internal error.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name in COMMANDS if only is None else [only]:
        module = importlib.import_module(f"symbolic.commands.{name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP, epilog=SOURCES_EPILOG)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def _message(error: BaseException) -> str:
    """What the user reads: one line, control characters escaped."""
    from .core.inputs import clean

    text = clean(" ".join(str(error).split()) or type(error).__name__)
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "… (cut)"


def _os_message(error: OSError) -> str:
    """A file that cannot be read or written: which, and why."""
    from .core.inputs import clean

    where = f"{clean(error.filename)}: " if getattr(error, "filename", None) else ""
    if error.errno == errno.ENOSPC:
        return f"{where}cannot write: no space left on the device (free some, or write elsewhere)"
    why = error.strerror or _message(error)
    fix = {errno.ENOENT: "check the path (does its folder exist?)", errno.EACCES: "check its permissions",
           errno.EROFS: "write to a writable folder", errno.EISDIR: "give a file name, not a folder",
           errno.ENOTDIR: "a part of the path is not a folder"}.get(error.errno, "check the path")
    return f"{where}cannot read or write ({why}); {fix}"


def _silence_stdout() -> None:
    """After a broken pipe or a full disk, point stdout at /dev/null so that the
    interpreter's final flush does not fail a second time."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _flush_stdout() -> None:
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get("SYMBOLIC_DEBUG", "") not in ("", "0")
    argv = [word for word in argv if word != "--debug"]
    prog = "symbolic"
    try:
        # A known command first: build its parser alone (cold start); otherwise all, for --help and errors.
        args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
        prog = f"symbolic {args.command}"
        options = importlib.import_module("symbolic.commands._options")
        options.flush_notes(keep=False)   # (an earlier in-process call's, refused)
        if getattr(args, "launch", None):  # --from KIND SOURCE: read, run, say what was read
            code = options.run_from_launch(args)
        else:
            code = args._run(args)
        _flush_stdout()
        options.flush_notes()   # the no-op flags' notes, once the command has run (not above a refusal)
        return code
    except SystemExit as done:  # argparse: --help (0) or a usage error (2, already printed)
        return done.code if isinstance(done.code, int) else EXIT_BAD_INPUT
    except BrokenPipeError:  # e.g. piped into `head`: the reader wants no more
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except OSError as error:
        if error.errno == errno.ENOSPC and not getattr(error, "filename", None):
            _silence_stdout()
            print(f"{prog}: error: cannot write the output: no space left on the device", file=sys.stderr)
        else:
            print(f"{prog}: error: {_os_message(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as error:  # ConfigError, SnapshotError, InputError, EvaluationError are ValueErrors
        print(f"{prog}: error: {_message(error)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (MemoryError, RecursionError, OverflowError, decimal.Overflow, decimal.InvalidOperation) as error:
        print(f"{prog}: error: the input is too large to evaluate ({type(error).__name__}: {_message(error)}); "
              "give smaller sizes or a smaller, shallower file", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:  # noqa: BLE001 - the boundary: a bug, reported as one line
        if debug:
            import traceback
            traceback.print_exc()
        print(f"{prog}: internal error: {type(error).__name__}: {_message(error)} — please report it "
              "(with the command line; --debug shows the traceback)", file=sys.stderr)
        return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
