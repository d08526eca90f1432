"""Paper scale on a CPU is never silent: one line with the run's length, an estimate of its
time from the pace of its first steps, and how to get the smoke version."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from ebmlab.core import pace


def test_format_duration():
    assert pace.format_duration(12) == "12 s"
    assert pace.format_duration(30 * 60) == "30 min"
    assert pace.format_duration(3 * 3600 + 20 * 60) == "3 h 20 min"
    assert pace.format_duration(5 * 86400) == "5.0 days"


def test_line_names_steps_estimate_and_smoke():
    line = pace.paper_scale_line(50_000, 0, 400, 2.0)  # 5 ms a step -> 250 s
    assert line.startswith("ebmlab: paper scale on a CPU: 50,000 steps;")
    assert "about 4 min at the pace of its first 400 steps" in line
    assert "scale=smoke" in line and "\n" not in line


def test_line_on_resume_estimates_the_remaining_steps():
    line = pace.paper_scale_line(10_000, 9_000, 100, 1.0)  # 1,000 steps left at 10 ms
    assert "(resuming at step 9,000)" in line and "about 10 s" in line


class _Bar:
    def __init__(self):
        self.n = 0

    def update(self, n=1):
        self.n += n

    def set_postfix(self, *a, **k):
        return "postfix"


def _ctx(scale: str, device: str):
    return SimpleNamespace(scale=scale, device=torch.device(device))


def test_wrapper_prints_once_after_timing_the_first_steps(capsys):
    now = [0.0]
    bar = pace.PaperScaleOnCpu(_Bar(), n_steps=1000, start=0, clock=lambda: now[0])
    for _ in range(9):  # 9 steps in 0.9 s: still timing
        now[0] += 0.1
        bar.update(1)
    assert bar.printed is None and capsys.readouterr().err == ""
    for _ in range(20):
        now[0] += 0.1
        bar.update(1)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "1,000 steps; about 2 min at the pace of its first 20 steps" in err[0]
    assert bar.n == 29 and bar.set_postfix() == "postfix"  # the bar's own work goes on


def test_wrapper_prints_at_the_last_step_of_a_short_run(capsys):
    bar = pace.PaperScaleOnCpu(_Bar(), n_steps=3, start=0, clock=lambda: 0.0)
    for _ in range(3):
        bar.update(1)
    assert "3 steps" in capsys.readouterr().err


def test_only_paper_scale_on_a_cpu_is_announced():
    bar = _Bar()
    assert isinstance(
        pace.announce_paper_scale_on_cpu(bar, _ctx("paper", "cpu"), 10, 0), pace.PaperScaleOnCpu
    )
    assert pace.announce_paper_scale_on_cpu(bar, _ctx("smoke", "cpu"), 10, 0) is bar
    assert pace.announce_paper_scale_on_cpu(bar, _ctx("paper", "cuda"), 10, 0) is bar
    assert pace.announce_paper_scale_on_cpu(bar, _ctx("paper", "cpu"), 10, 10) is bar  # done


def test_a_paper_scale_run_on_the_cpu_says_so_and_proceeds(tmp_path):
    """Through the entry point: the line on stderr, and the run finishes."""
    from tests.helpers import run_cli

    args = ["experiment=dlp/fig3_ising_sampling", "model.n_side=3", "run.n_steps=30"]
    args += ["run.eval_every=10"]  # paper scale (the default) with a 3x3 lattice: seconds
    p = run_cli([*args, "device=cpu"], tmp_path / "run")  # scale: paper, the default
    lines = [ln for ln in p.stderr.splitlines() if "paper scale on a CPU" in ln]
    assert len(lines) == 1 and "30 steps; about " in lines[0] and "scale=smoke" in lines[0]
    assert p.results["ess"] > 0
