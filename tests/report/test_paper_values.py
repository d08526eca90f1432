"""The papers' numbers have one home (issue 44, item 3): conf/claims/<paper>.yaml. A claim states
a number it judges (`paper:`); the values a report table puts beside ours (`tables:` there)
name that claim instead of repeating its number, and hold a number only where no claim states
it. There is no second copy (the former scripts/paper_values/)."""

import math
from pathlib import Path

import pytest
import yaml

from ebmlab.report import claims as C
from ebmlab.report import spec

REPO = Path(__file__).resolve().parents[2]


def _tables_of_experiments() -> list[tuple[str, dict]]:
    out = []
    for f in sorted((REPO / "conf" / "experiment").rglob("*.yaml")):
        node = yaml.safe_load(f.read_text()) or {}
        for item in (node.get("report") or {}).get("tables") or []:
            out.append((f.relative_to(REPO).as_posix(), item))
    return out


def _stated_numbers() -> dict[tuple[str, float], str]:
    """(metric, number) -> id of the claim that states it as its ``paper:``."""
    return {
        (c["metric"], float(c["paper"])): c["id"]
        for p in C.papers()
        for c in C.load_claims(p)["claims"]
        if c.get("metric") and isinstance(c.get("paper"), (int, float))
    }


def test_there_is_one_home_for_paper_numbers():
    """No paper-values folder; every table names a table of the claims files, and each of
    those is read (none is left over)."""
    assert not (REPO / "scripts" / "paper_values").exists()
    named = set()
    for file, item in _tables_of_experiments():
        if item.get("paper") is None:
            continue
        name = str(item["paper"])
        assert "/" not in name and not name.endswith(".yaml"), (
            f"{file}: `paper: {name}` names a file; name a table of conf/claims/*.yaml"
        )
        assert spec.load_paper(item) is not None
        named.add(name)
    declared = {t for p in C.papers() for t in C.load_claims(p).get("tables") or {}}
    assert declared == named, f"tables no experiment reads: {sorted(declared - named)}"


def test_a_number_a_claim_states_is_not_written_again_in_a_table():
    stated = _stated_numbers()
    repeated = []
    for p in C.papers():
        for name, rows in (C.load_claims(p).get("tables") or {}).items():
            for label, cells in rows.items():
                for metric, cell in (cells or {}).items():
                    if isinstance(cell, (int, float)) and (metric, float(cell)) in stated:
                        claim = stated[metric, float(cell)]
                        repeated.append(f"{p}.yaml {name} {label!r} {metric}: use `{claim}`")
    assert not repeated, "paper numbers written twice:\n" + "\n".join(repeated)


def test_a_table_cell_naming_a_claim_reads_its_number(monkeypatch, tmp_path):
    table = C.paper_table("ebm_learning")  # DLP Table 1 and ACS Table 2 in one table
    by_id = {c["id"]: c for c in C.load_claims("dlp")["claims"]}
    assert table["gwg, static_mnist"]["test_ll"] == by_id["dlp-table1-gwg-static-mnist"]["paper"]
    assert math.isclose(table["dmala, static_mnist"]["test_ll_acs_paper"], -79.93)
    assert C.paper_table("rbm_learning")["emnist, acs"] == {"test_ll": -304.96}
    with pytest.raises(SystemExit, match="no paper table 'nope'"):
        C.paper_table("nope")
    (tmp_path / "x.yaml").write_text(
        yaml.safe_dump({"claims": [], "tables": {"t": {"row": {"m": "no-such-claim"}}}})
    )
    monkeypatch.setattr(C, "CLAIMS_DIR", tmp_path)
    with pytest.raises(SystemExit, match="neither a number nor the id of a claim"):
        C.paper_table("t")
