"""Claims judged against runs: each kind can pass, fail, or be 'not run'."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ebmlab.report import claims as C


def run(sampler: str, value: float, seed: int = 0, **config) -> dict:
    return {
        "run_dir": Path("/nonexistent"),
        "overrides": {"sampler": sampler, "seed": str(seed)},
        "choices": {"sampler": sampler},
        "config": config,
        "metrics": {"m": value, "seconds": 2.0},
    }


RUNS = [run("a", 1.0), run("a", 3.0, seed=1), run("b", 5.0), run("c", 6.0, task={"k": 3})]


def test_value_claims_average_over_seeds():
    c = {"id": "x", "kind": "value", "metric": "m", "where": {"sampler": "a"}, "paper": 2.5}
    v = C.judge({**c, "tolerance": 0.6}, RUNS)
    assert v.verdict == C.REPRODUCED and "2 ± 1.4 (n=2)" in v.ours and v.seconds == 4.0
    assert C.judge({**c, "tolerance": 0.4}, RUNS).verdict == C.NOT_REPRODUCED
    assert C.judge({**c, "rel_tolerance": 0.25}, RUNS).verdict == C.REPRODUCED
    missing = C.judge({**c, "where": {"sampler": "z"}, "tolerance": 1}, RUNS)
    assert missing.verdict == C.NOT_RUN and "sampler=z" in missing.why


def test_dotted_selectors_read_the_resolved_config():
    c = {"kind": "value", "metric": "m", "where": {"task.k": 3}, "paper": 6, "tolerance": 0}
    assert C.judge({"id": "y", **c}, RUNS).verdict == C.REPRODUCED


def test_ordering_groups_slack_and_factor():
    base = {"id": "o", "kind": "ordering", "metric": "m", "direction": "lower"}
    ok = C.judge({**base, "order": [{"sampler": "a"}, [{"sampler": "b"}, {"sampler": "c"}]]}, RUNS)
    assert ok.verdict == C.REPRODUCED
    bad = C.judge({**base, "order": [{"sampler": "c"}, {"sampler": "b"}]}, RUNS)
    assert bad.verdict == C.NOT_REPRODUCED and "sampler=c" in bad.why
    assert (
        C.judge({**base, "order": [{"sampler": "c"}, {"sampler": "b"}], "slack": 1.5}, RUNS).verdict
        == C.REPRODUCED
    )
    assert (
        C.judge(
            {**base, "order": [{"sampler": "a"}, {"sampler": "b"}], "min_factor": 3}, RUNS
        ).verdict
        == C.NOT_REPRODUCED
    )  # 2 * 3 > 5
    high = {**base, "direction": "higher", "order": [{"sampler": "c"}, {"sampler": "a"}]}
    assert C.judge(high, RUNS).verdict == C.REPRODUCED


def test_ratio_and_bounds():
    r = {
        "id": "r",
        "kind": "ratio",
        "metric": "m",
        "numerator": {"sampler": "b"},
        "denominator": {"sampler": "a"},
        "paper": 2.5,
        "rel_tolerance": 0.01,
    }
    assert C.judge(r, RUNS).verdict == C.REPRODUCED
    lt = {"id": "l", "kind": "less_than", "metric": "m", "where": {"sampler": "b"}, "bound": 4}
    assert C.judge(lt, RUNS).verdict == C.NOT_REPRODUCED
    assert C.judge({**lt, "kind": "greater_than"}, RUNS).verdict == C.REPRODUCED


@pytest.mark.parametrize("paper", C.papers())
def test_every_claims_file_is_well_formed(paper):
    data = C.load_claims(paper)
    ids = [c["id"] for c in data["claims"]]
    assert len(ids) == len(set(ids))
    for c in data["claims"]:
        assert {"id", "source", "text", "experiment", "metric", "kind"} <= set(c), c["id"]
        need = {
            "value": {"where", "paper"},
            "ordering": {"order", "direction"},
            "ratio": {"numerator", "denominator", "paper", "rel_tolerance"},
            "less_than": {"where", "bound"},
            "greater_than": {"where", "bound"},
        }[c["kind"]]
        assert need <= set(c), c["id"]
        experiment = C.REPO / "conf" / "experiment" / f"{c['experiment']}.yaml"
        assert experiment.exists(), f"{c['id']}: no experiment {c['experiment']}"
    yaml.safe_dump(data)
