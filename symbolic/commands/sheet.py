"""``symbolic sheet -o formulas.tex [--pdf]``: the LaTeX formula sheet."""
from __future__ import annotations

from ._options import check_output, write_output

HELP = "write the LaTeX formula sheet: each ledger's derivation, the paper forms it equals, and the errata"


def add_arguments(parser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", default="formulas.tex",
                        help="the .tex file to write (default formulas.tex)")
    parser.add_argument("--pdf", action="store_true",
                        help="also compile it with pdflatex into FILE.pdf (Debian texlive-latex-base, "
                             "texlive-latex-recommended)")


def run(args) -> int:
    from pathlib import Path

    from ..core.inputs import clean
    from ..models.config import ConfigError
    from ..render.latex import LatexError, compile_pdf, sheet

    path = Path(args.output)
    if path.suffix != ".tex":
        raise ConfigError(f"--output {clean(args.output)!r}: give a file name ending in .tex")
    check_output(args.output, "--output")
    from ..render.progress import progress

    # on a terminal: a bar over the claims check and pdflatex's two runs (stderr; nothing on a pipe)
    with progress(3 if args.pdf else 1, "checking the claims, writing the sheet") as step:
        write_output(args.output, sheet().encode("ascii"), "--output")
        step()
        print(f"wrote {clean(path)}")
        if args.pdf:
            try:
                pdf = compile_pdf(path, progress=step)
            except LatexError as error:
                raise ConfigError(str(error)) from None
            print(f"wrote {pdf}")
    return 0
