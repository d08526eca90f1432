"""The one run loop: cadence, totals on the device, resume, divergence, finite results."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.core.context import RunContext
from ebmlab.core.loop import Cadence, History, LoopTask, Totals, check_finite
from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.utils.logging import MetricLogger, read_metrics
from ebmlab.utils.workspace import Workspace
from tests.helpers import run_toy


class Counter(LoopTask):
    """A random walk: x += N(0, 1) per step; diverges at ``blow_up_at`` if set."""

    main_metric = "x"

    def __init__(self, n=20, eval_every=5, checkpoint_every=10, blow_up_at=None, crash_at=None):
        self.cad = Cadence(n, eval_every, checkpoint_every)
        self.blow_up_at, self.crash_at = blow_up_at, crash_at

    def build(self, ctx):
        return {"x": torch.zeros(())}

    def step(self, parts, step, ctx):
        if step == self.crash_at:
            raise KeyboardInterrupt  # stands in for a kill between checkpoints
        parts["x"] = parts["x"] + torch.randn((), generator=ctx.generator)
        if step == self.blow_up_at:
            parts["x"] = parts["x"] * math.inf
        return {"x_step": parts["x"], "evals": 2}

    def evaluate(self, parts, step, ctx):
        return {"x": float(parts["x"])}

    def state_dict(self, parts):
        return {"x": parts["x"]}

    def load_state_dict(self, parts, d):
        parts["x"] = d["x"]

    def finish(self, parts, history, ctx):
        return {"x": float(parts["x"]), "evals": ctx.totals.mean("evals"), "n_evals": len(history)}


def make_ctx(run_dir: Path) -> RunContext:
    cfg = OmegaConf.create({"seed": 0, "progress": False})
    dev = torch.device("cpu")
    return RunContext(
        cfg=cfg,
        run_dir=run_dir,
        device=dev,
        generator=torch.Generator().manual_seed(0),
        logger=MetricLogger(run_dir, None, {}, "t"),
        workspace=Workspace(run_dir),
        scale="smoke",
        choices={},
    )


def test_cadence_validates_and_always_ends_on_last_step():
    c = Cadence(25, 10, 7)
    assert [s for s in range(1, 26) if c.evaluates(s)] == [10, 20, 25]
    assert [s for s in range(1, 26) if c.checkpoints(s)] == [7, 14, 21, 25]
    with pytest.raises(ConfigError, match="run.eval_every"):
        Cadence(10, 0, 1)
    with pytest.raises(ConfigError, match="run.n_steps"):
        Cadence(2.5, 1, 1)


def test_totals_sum_on_device_and_window_resets():
    t = Totals(torch.device("cpu"))
    t.add({"a": torch.tensor(1.0, dtype=torch.float32), "n": 3})
    t.add({"a": torch.tensor(2.0), "n": 3})
    assert isinstance(t.sums["a"], torch.Tensor) and t.sums["a"].dtype == torch.float64
    assert t.mean("a") == 1.5 and t.total("n") == 6
    assert t.window() == {"a": 1.5, "n": 3.0}
    t.add({"a": 4.0})
    assert t.window() == {"a": 4.0}
    assert math.isnan(t.mean("missing"))
    u = Totals(torch.device("cpu"))
    u.load_state_dict(t.state_dict())
    assert u.mean("a") == t.mean("a") and u.counts == t.counts


def test_history_columns():
    h = History([{"step": 1, "a": 2.0}, {"step": 2}])
    assert h.column("a") == [2.0] and h.last("a") == 2.0 and h.last("b", 7) == 7 and len(h) == 2


def test_run_task_results_logs_and_checkpoints(tmp_path):
    ctx = make_ctx(tmp_path)
    res = run_toy(Counter(), ctx)
    assert res["evals"] == 2.0 and res["n_evals"] == 4
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [5, 10, 15, 20]
    assert all("x_step" in r and "seconds" in r for r in rows)
    assert ctx.workspace.last.exists() and ctx.last_good_step == 20


def test_cpu_share_is_cpu_seconds_per_wall_second_and_thread(tmp_path, monkeypatch):
    """cpu_share, written into results.json, lets a table say when its runs' seconds were
    measured on shared cores. A scripted clock keeps the test independent of the machine."""
    import json

    from ebmlab.core import context

    readings = iter([(10.0, 100.0), (13.0, 104.0), (14.0, 108.0)])  # (cpu s, wall s)
    monkeypatch.setattr(context, "_cpu_and_wall", lambda: next(readings))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    ctx = make_ctx(tmp_path)
    ctx.start_clock()  # (10, 100)
    assert ctx.cpu_share() == 3.0 / 4.0 / 2  # 3 CPU s in 4 wall s on 2 threads
    ctx.write_results({"x": 1.0})  # (14, 108): 4 CPU s in 8 wall s on 2 threads
    out = json.loads((tmp_path / "results.json").read_text())
    assert out["threads"] == 2 and out["cpu_share"] == 0.25


def test_cpu_share_spans_the_processes_of_a_resumed_run(tmp_path, monkeypatch):
    """A resumed run's cpu_share counts every process up to its last checkpoint, not only the
    last one; a checkpoint from before cpu_seconds was kept counts as nothing."""
    import json

    from ebmlab.core import context

    readings = iter([(10.0, 100.0), (13.0, 104.0), (50.0, 200.0), (53.0, 204.0)])
    monkeypatch.setattr(context, "_cpu_and_wall", lambda: next(readings))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    first = make_ctx(tmp_path)
    first.start_clock()  # (10, 100)
    first.save_checkpoint({}, step=1)  # (13, 104): 1.5 CPU s per thread in 4 wall s
    second = make_ctx(tmp_path)
    second.load_checkpoint()  # (50, 200)
    second.write_results({"x": 1.0})  # (53, 204): 1.5 more CPU s per thread in 4 wall s
    assert json.loads((tmp_path / "results.json").read_text())["cpu_share"] == 3.0 / 8

    readings = iter([(0.0, 0.0), (4.0, 4.0)])
    ckpt = second.workspace.load("last")
    del ckpt["_run"]["cpu_seconds"]
    second.workspace.save(ckpt, "last")
    third = make_ctx(tmp_path)
    third.load_checkpoint()  # (0, 0)
    assert third.cpu_share() == 4.0 / 4.0 / 2


def test_progress_file_follows_the_checkpoints(tmp_path):
    """progress.json holds the step of the last checkpoint and the run's length, so a report
    can say how far an interrupted run got."""
    import json

    with pytest.raises(KeyboardInterrupt):
        run_toy(Counter(n=25, checkpoint_every=10, crash_at=15), make_ctx(tmp_path))
    p = json.loads((tmp_path / "progress.json").read_text())
    assert p["step"] == 10 and p["n_steps"] == 25 and p["updated"].endswith("UTC")
    run_toy(Counter(n=25, checkpoint_every=10), make_ctx(tmp_path))
    assert json.loads((tmp_path / "progress.json").read_text())["step"] == 25


def test_resume_from_any_point_gives_identical_results(tmp_path):
    ref = run_toy(Counter(), make_ctx(tmp_path / "ref"))
    for crash_at in (3, 11, 20):
        d = tmp_path / f"crash{crash_at}"
        with pytest.raises(KeyboardInterrupt):
            run_toy(Counter(crash_at=crash_at), make_ctx(d))
        assert run_toy(Counter(), make_ctx(d)) == ref
    # killed after the final checkpoint, before results: finish() alone reproduces them
    assert run_toy(Counter(), make_ctx(tmp_path / "ref")) == ref


def test_divergence_names_step_and_never_checkpoints_nonfinite_state(tmp_path):
    # detected at the first checkpoint after the blow-up (no per-step host sync)
    ctx = make_ctx(tmp_path)
    with pytest.raises(DivergenceError, match="step 20: the state to checkpoint"):
        run_toy(Counter(n=30, blow_up_at=13, eval_every=100, checkpoint_every=10), ctx)
    state = ctx.workspace.load()
    assert state["_run"]["step"] == 10 and torch.isfinite(state["task"]["x"])
    assert ctx.last_good_step == 10


def test_divergence_caught_at_evaluation(tmp_path):
    with pytest.raises(DivergenceError, match="evaluated metric"):
        run_toy(Counter(blow_up_at=4, eval_every=5, checkpoint_every=100), make_ctx(tmp_path))


def test_nonfinite_result_is_a_divergence(tmp_path):
    class NaNResult(Counter):
        def finish(self, parts, history, ctx):
            return {"x": float("nan")}

    with pytest.raises(DivergenceError, match="result"):
        run_toy(NaNResult(), make_ctx(tmp_path))


def test_check_finite_names_nested_entries():
    check_finite({"a": {"b": torch.ones(2)}, "c": [1.0]}, 1, "state")
    with pytest.raises(DivergenceError, match=r"a\.b"):
        check_finite({"a": {"b": torch.tensor([1.0, math.nan])}}, 1, "state")


def test_results_name_the_code_of_every_process_of_a_resumed_run(tmp_path):
    """``code`` is the commit the finishing process started from (read at its start, not when
    it writes); a run resumed under other code lists every commit it ran under, oldest first."""
    import json

    first = make_ctx(tmp_path)
    first.code = "aaa"
    with pytest.raises(KeyboardInterrupt):
        run_toy(Counter(crash_at=15), first)  # checkpoint at 10 written under "aaa"
    second = make_ctx(tmp_path)
    second.code = "bbb"
    second.write_results(run_toy(Counter(), second))
    out = json.loads((tmp_path / "results.json").read_text())
    assert out["code"] == "bbb" and out["code_history"] == ["aaa", "bbb"]
    third = make_ctx(tmp_path / "whole")
    third.code = "ccc"
    third.write_results(run_toy(Counter(), third))
    out = json.loads((tmp_path / "whole" / "results.json").read_text())
    assert out["code"] == "ccc" and "code_history" not in out
