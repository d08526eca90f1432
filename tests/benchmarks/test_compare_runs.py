"""benchmarks/compare_runs.py: agreement of the ratios of two benchmark records."""

import json

import pytest

from benchmarks.compare_runs import compare, main, rel_spread


def _record(step_cpu: float, step_wall: float) -> dict:
    def r(m):
        return {"median": m, "p25": m, "p75": m}

    ratio = {"GWG / fwd+bwd": {"cpu": r(step_cpu), "wall": r(step_wall)}}
    return {
        "primary_clock": "cpu",
        "cases": [
            {
                "model_label": "Ising",
                "chains": 100,
                "summary": {"ratios": ratio},
            }
        ],
    }


def test_rel_spread():
    assert rel_spread([2.0]) == 0.0
    assert rel_spread([1.0, 1.2, 1.1]) == pytest.approx(0.2 / 1.1)


def test_compare_flags_only_the_primary_clock(tmp_path):
    md, ok = compare([_record(2.0, 1.0), _record(2.1, 2.0)], ["a", "b"], 0.10)
    assert ok  # CPU 2.0 vs 2.1 agree within 10%; the wall spread does not count
    assert "2.000 / 2.100" in md and "4.9%" in md and "66.7% **!**" in md
    _, ok = compare([_record(2.0, 1.0), _record(2.5, 1.0)], ["a", "b"], 0.10)
    assert not ok
    paths = []
    for i, rec in enumerate((_record(2.0, 1.0), _record(3.0, 1.0))):
        p = tmp_path / f"r{i}.json"
        p.write_text(json.dumps(rec))
        paths.append(str(p))
    assert main([*paths, "--out", str(tmp_path / "cmp.md")]) == 1
    assert "CPU: r0 / r1" in (tmp_path / "cmp.md").read_text()
