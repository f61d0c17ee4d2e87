"""``symbolic check``: every claim in derivations/, reproduced or a recorded erratum."""
from __future__ import annotations

HELP = "check every claim of the sources against the engine (exit 1 if any fails)"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true", help="each claim with its status, as JSON")
    parser.add_argument("--document", help="only the claims of this document (e.g. 'seed 001')")


def run(args) -> int:
    import json
    from collections import Counter

    from ..claims.claims import check_all, load_all

    claims = load_all()
    if args.document:
        claims = [c for c in claims if c.document == args.document]
        if not claims:
            raise ValueError(f"no claims for document {args.document!r}")
    results = check_all(claims)
    counts = Counter(r.status for r in results)
    if args.json:
        print(json.dumps({"counts": dict(counts), "claims": [r.to_dict() for r in results]},
                         ensure_ascii=False, indent=2))
    else:
        from ..render.terminal import output_width

        print(render_text(results, counts, output_width()))
    return 1 if counts["failed"] else 0


def render_text(results, counts, width: int = 160) -> str:
    """The answer first (how many claims reproduced, errata, failed), then one
    entry per claim; below 120 columns the claim's text goes under its id."""
    from ..render.summary import wrap

    head = (f"{len(results)} claims: {counts['reproduced']} reproduced, {counts['erratum']} errata recorded, "
            f"{counts['failed']} failed")
    out = wrap(head, width)
    idw = max(len(r.claim.id) for r in results)
    stacked = width < 8 + 2 + idw + 2 + 60
    pad = " " * 10 if stacked else " " * (10 + idw + 2)
    for r in results:
        mark = {"reproduced": "ok", "erratum": "ERRATUM", "failed": "FAILED"}[r.status]
        text = f"stated {r.claim.stated} {r.claim.unit}; engine {r.engine}"
        if stacked:
            out.append(f"{mark:>8}  {r.claim.id}")
            out += wrap(text, width, pad, pad + "  ")
        else:
            first, *rest = wrap(text, width - len(pad), "", "  ")
            out.append(f"{mark:>8}  {r.claim.id:<{idw}}  {first}")
            out += [pad + line for line in rest]
        if r.status != "reproduced":
            out += wrap(r.message, width, pad, pad + "  ")
            if r.claim.erratum is not None:
                out += wrap(f"corrected: {r.claim.erratum.corrected} {r.claim.unit}", width, pad, pad + "  ")
    out.append(head)
    return "\n".join(out)
