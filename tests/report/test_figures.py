"""Cross-run figures: the points a metric-against-setting figure plots are the per-setting means
and standard deviations over seeds, and runs without the setting or with a non-finite metric
are left out."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ebmlab.report.figures import FIGURES
from ebmlab.report.figures.metric_vs_setting import points


def run(sampler: str, steps: int | None, value: float, seed: int = 0) -> dict:
    overrides = {"sampler": sampler, "seed": str(seed)}
    if steps is not None:
        overrides["learner.sampler_steps"] = str(steps)
    return {
        "run_dir": Path("/nonexistent"),
        "overrides": overrides,
        "choices": {"sampler": sampler},
        "config": {},
        "metrics": {"log_rmse": value},
    }


RUNS = [
    run("dmala", 5, -4.0),
    run("dmala", 5, -5.0, seed=1),
    run("dmala", 25, -6.0),
    run("gwg", 25, -3.0),
    run("gwg", 5, -2.0),
    run("gwg", None, -9.0),  # no setting: not a point
    run("gwg", 10, math.nan),  # non-finite: not a point
]
SHORT = run("dmala", 5, -1.0, seed=2)  # a declared shorter run: its own line, never pooled
SHORT["overrides"]["run.n_steps"] = "100"


def test_points_are_means_and_sds_over_seeds_sorted_by_setting():
    p = points(RUNS, "log_rmse", "learner.sampler_steps", ["sampler"])
    assert set(p) == {"sampler=dmala", "sampler=gwg"}
    xs, means, sds, counts = p["sampler=dmala"]
    assert xs == [5.0, 25.0] and means == [-4.5, -6.0] and counts == [2, 1]
    assert sds[0] == pytest.approx(math.sqrt(0.5)) and sds[1] == 0.0
    assert p["sampler=gwg"][:2] == ([5.0, 25.0], [-2.0, -3.0])
    q = points([*RUNS, SHORT], "log_rmse", "learner.sampler_steps", ["sampler"])
    assert q["sampler=dmala"][:2] == p["sampler=dmala"][:2]
    assert q["sampler=dmala, run.n_steps=100"][:2] == ([5.0], [-1.0])


def test_figure_is_written_and_a_figure_without_points_refuses(tmp_path):
    make = FIGURES["metric_vs_setting"]
    out = make(
        RUNS,
        tmp_path / "f.png",
        "t",
        metric="log_rmse",
        x="learner.sampler_steps",
        lines=["sampler"],
        logx=True,
    )
    assert out == [tmp_path / "f.png"] and out[0].stat().st_size > 0
    with pytest.raises(SystemExit, match="sampler.alpha"):
        make(RUNS, tmp_path / "g.png", metric="log_rmse", x="sampler.alpha")
    with pytest.raises(SystemExit, match="sampler must be numeric"):
        make(RUNS, tmp_path / "i.png", metric="log_rmse", x="sampler")
    with pytest.raises(SystemExit, match="needs options"):
        make(RUNS, tmp_path / "h.png", metric="log_rmse")
