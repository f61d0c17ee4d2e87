"""``python -m symbolic COMMAND ...``: one module per command in ``symbolic.commands``.

Each command module defines ``HELP``, ``add_arguments(parser)`` and
``run(args) -> int``. Bad input raises :class:`symbolic.models.config.ConfigError`
(or ``ValueError`` from the engine's validators) and becomes one line on
stderr with exit status 2 — never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

#: The commands, in the order ``--help`` lists them.
COMMANDS = ["bill", "derive", "check", "calculator", "plan", "solve", "sheet", "timeline", "snapshot", "trace"]


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line naming the problem."""

    def error(self, message: str):  # noqa: D401 - argparse's signature
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


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
                     epilog=SOURCES_EPILOG)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for name in COMMANDS if only is None else [only]:
        module = importlib.import_module(f"symbolic.commands.{name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP, epilog=SOURCES_EPILOG)
        module.add_arguments(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # A known command first: build its parser alone (cold start); otherwise all, for --help and errors.
    args = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    from .models.config import ConfigError

    try:
        return args._run(args)
    except (ConfigError, ValueError) as error:
        print(f"symbolic {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into `head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
