"""``symbolic check``: every claim in derivations/, reproduced or a recorded erratum."""
from __future__ import annotations

HELP = "check every claim of the sources against the engine (exit 1 if any fails)"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="each claim with its status, as JSON")
    parser.add_argument("--document", help="only the claims of this document (e.g. 'seed 001')")


def run(args) -> int:
    import json
    from collections import Counter

    from ..claims.claims import STATUSES, check_all, load_all

    claims = load_all()
    if args.document:
        claims = [c for c in claims if c.document == args.document]
        if not claims:
            raise ValueError(f"no claims for document {args.document!r}")
    results = check_all(claims)
    counts = Counter(r.status for r in results)
    if args.json:
        print(json.dumps({"counts": {status: counts[status] for status in STATUSES},
                          "claims": [r.to_dict() for r in results]},
                         ensure_ascii=False, indent=2))
    else:
        from ..render.terminal import output_width

        print(render_text(results, counts, output_width()))
    return 1 if counts["failed"] else 0


def summary(results, counts) -> str:
    """The answer's first line: how many claims reproduced, errata, underdetermined, failed."""
    return (f"{len(results)} claims: {counts['reproduced']} reproduced, {counts['erratum']} errata recorded, "
            f"{counts['underdetermined']} underdetermined, {counts['failed']} failed")


MARKS = {"reproduced": "ok", "erratum": "ERRATUM", "underdetermined": "UNDECIDED", "failed": "FAILED"}


def render_text(results, counts, width: int = 160) -> str:
    """The answer first (how many claims reproduced, errata, underdetermined, failed), then one
    entry per claim; below 120 columns the claim's text goes under its id. A claim whose source
    leaves an input open names the reading its verdict holds under and lists the others' values."""
    from ..render.summary import wrap

    head = summary(results, counts)
    out = wrap(head, width)
    idw = max(len(r.claim.id) for r in results)
    markw = max(len(m) for m in MARKS.values())
    stacked = width < markw + 2 + idw + 2 + 60
    pad = " " * (markw + 2) if stacked else " " * (markw + 2 + idw + 2)
    for r in results:
        mark = MARKS[r.status]
        text = f"stated {r.claim.stated} {r.claim.unit}; engine {r.engine}" + (
            f" {r.engine_unit}" if r.engine_unit != r.claim.unit else "")
        if stacked:
            out.append(f"{mark:>{markw}}  {r.claim.id}")
            out += wrap(text, width, pad, pad + "  ")
        else:
            first, *rest = wrap(text, width - len(pad), "", "  ")
            out.append(f"{mark:>{markw}}  {r.claim.id:<{idw}}  {first}")
            out += [pad + line for line in rest]
        if r.status != "reproduced" or r.reading:
            out += wrap(r.message, width, pad, pad + "  ")
        if r.status == "erratum" and r.reading:
            out += wrap(f"under: {r.reading}", width, pad, pad + "  ")
        if r.other_readings:
            others = "; ".join(f"{o.name}: {o.engine} {o.unit}" + (" (also reproduces)" if o.reproduces else "")
                               for o in r.other_readings)
            out += wrap(f"other readings ({r.claim.open}): {others}", width, pad, pad + "  ")
        if r.status == "erratum" and r.claim.erratum is not None:
            out += wrap(f"corrected: {r.claim.erratum.corrected} {r.claim.unit}", width, pad, pad + "  ")
    out += wrap(head, width)  # the answer again, last, at the same width
    return "\n".join(out)
