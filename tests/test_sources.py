"""The bibliography (docs/sources.md, symbolic.claims.sources; issue 13):
every source the engine cites resolves to a key a reader can look up, every
key and arXiv id is written out, and every seed section cited is described."""
import re
from pathlib import Path

import pytest

import symbolic
from symbolic.claims.sources import BIBLIOGRAPHY, cite, keys
from symbolic.cli import build_parser
from symbolic.models.builtin import presets

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "sources.md").read_text()


def test_every_key_and_arxiv_id_is_in_the_document():
    for source in BIBLIOGRAPHY:
        assert f"[{source.key}]" in DOC, source.key
        if source.arxiv:
            assert f"[{source.arxiv}](https://arxiv.org/abs/{source.arxiv})" in DOC, source.key


def test_the_papers_the_issue_names_have_their_arxiv_ids():
    ids = {source.key: source.arxiv for source in BIBLIOGRAPHY}
    assert ids["Korthikanti2022"] == "2205.05198" and ids["Narayanan2021"] == "2104.04473"
    assert ids["Kaplan2020"] == "2001.08361" and ids["ZeRO2019"] == "1910.02054"


def test_keys_of_a_citation_in_order():
    assert keys("ZeRO §3.1; seed 001 §3") == ["ZeRO2019", "seed001"]
    assert cite("Korthikanti et al. 2022 §4.1") == "Korthikanti et al. 2022 §4.1 [Korthikanti2022]"
    assert keys("a note of nobody's") == []


@pytest.mark.parametrize("name", sorted(presets()))
def test_every_bill_source_resolves_to_a_key(name):
    for layout in ({}, {"tp": 8, "sp": True, "recompute": "selective"}, {"recompute": "full", "pp": 2}):
        try:
            bill = symbolic.bill(name, **layout)
        except symbolic.ConfigError:
            continue
        for line in bill.lines:
            assert keys(line.source), (name, line.name, line.source)


def _seed_table(seed: str) -> str:
    start = DOC.index(f"### [seed{seed}]")
    end = DOC.find("\n### ", start + 1)
    return DOC[start: end if end > 0 else None]


def test_every_cited_seed_section_is_described():
    texts = [path.read_text(errors="replace") for path in (ROOT / "symbolic").rglob("*.py")]
    texts += [path.read_text() for path in (ROOT / "derivations").glob("*.toml")] + [(ROOT / "README.md").read_text()]
    texts += [path.read_text() for path in (ROOT / "docs").glob("*.md")]
    cited = {(seed, section.rstrip(".")) for text in texts
             for seed, section in re.findall(r"seed (00[014]) (§[0-9]+(?:\.[0-9]+)?)", text)}
    assert len(cited) > 10
    for seed, section in sorted(cited):
        if seed == "001":  # seed 001's parts are numbered by the project, §05 = §5 (docs/sources.md)
            section = "§" + str(int(section[1:].split(".")[0]))
        assert section in _seed_table(seed), (seed, section)
    for document, prefix in (("seed_001", "001"), ("seed_000", "000"), ("seed_004", "004")):
        import tomllib

        for claim in tomllib.loads((ROOT / "derivations" / f"{document}.toml").read_text())["claim"]:
            for section in re.findall(r"§[0-9]+(?:\.[0-9]+)?", claim["section"]):
                assert section in _seed_table(prefix), (document, claim["id"], section)


def test_help_cites_the_bibliography(capsys):
    with pytest.raises(SystemExit):
        build_parser("bill").parse_args(["bill", "--help"])
    out = capsys.readouterr().out
    assert "docs/sources.md" in out and "[Korthikanti2022]" in out and "2205.05198" in out
