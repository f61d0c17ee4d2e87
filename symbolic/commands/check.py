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
        width = max(len(r.claim.id) for r in results)
        for r in results:
            mark = {"reproduced": "ok", "erratum": "ERRATUM", "failed": "FAILED"}[r.status]
            print(f"{mark:>8}  {r.claim.id:<{width}}  stated {r.claim.stated} {r.claim.unit}; engine {r.engine}")
            if r.status != "reproduced":
                print(f"{'':>8}  {'':<{width}}  {r.message}")
                if r.claim.erratum is not None:
                    print(f"{'':>8}  {'':<{width}}  corrected: {r.claim.erratum.corrected} {r.claim.unit}")
        print(f"{len(results)} claims: {counts['reproduced']} reproduced, {counts['erratum']} errata recorded, "
              f"{counts['failed']} failed")
    return 1 if counts["failed"] else 0
