"""Blocks of loop steps (issue 46): on CUDA a task with ``steps`` gets blocks that end at
every cadence point; everywhere else the loop calls ``step`` once per step, as before."""

from __future__ import annotations

import pytest
import torch

from ebmlab.core import graphs
from ebmlab.core.loop import Cadence, LoopTask, step_spans
from tests.helpers import run_toy


class _FakeCtx:
    def __init__(self, device):
        self.device = torch.device(device)


class _BlockTask:
    def steps(self, parts, first, n, ctx):
        return None


def test_blocks_end_at_every_cadence_point(monkeypatch):
    cad = Cadence(n_steps=250, eval_every=30, checkpoint_every=70)
    monkeypatch.setenv("EBMLAB_FAULT_KILL_AT_STEP", "45")
    spans = list(step_spans(_BlockTask(), _FakeCtx("cuda"), cad, 0))
    ends = [last for _, last in spans]
    assert ends == [30, 45, 60, 70, 90, 100, 120, 140, 150, 180, 200, 210, 240, 250]
    assert [f for f, _ in spans] == [1] + [e + 1 for e in ends[:-1]]
    resumed = list(step_spans(_BlockTask(), _FakeCtx("cuda"), cad, 140))  # same boundaries
    assert resumed == [s for s in spans if s[0] > 140]
    # a CPU run, or a task without ``steps``: one step per call, as before
    one_by_one = [(s, s) for s in range(1, 251)]
    assert list(step_spans(_BlockTask(), _FakeCtx("cpu"), cad, 0)) == one_by_one
    assert list(step_spans(object(), _FakeCtx("cuda"), cad, 245)) == one_by_one[245:]


def test_a_bad_compile_value_fails_before_any_compute(tmp_path, monkeypatch, capsys):
    from tests.helpers import run_inprocess

    args = ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "compile=jit"]
    assert run_inprocess(args, tmp_path / "run", monkeypatch) == 2
    assert "compile" in capsys.readouterr().err
    assert not (tmp_path / "run" / "results.json").exists()
    assert graphs.mode() == "graph"


class _Sampling(LoopTask):
    """DMALA on a small RBM through a ChainRunner; ``steps`` runs loop steps as one block."""

    main_metric = "mean_x"
    progress_desc = "sampling"

    def __init__(self, graphed: bool, crash_at: int | None = None):
        self.graphed, self.crash_at = graphed, crash_at
        self.cad = Cadence(n_steps=60, eval_every=20, checkpoint_every=20)

    def build(self, ctx):
        from ebmlab.core.chain import ChainRunner
        from ebmlab.models.rbm import BernoulliRBM
        from tests.helpers import from_conf

        model = BernoulliRBM(n_visible=12, n_hidden=6, init_std=0.5, init_seed=1)
        for p in model.parameters():
            p.requires_grad_(False)
        kernel = from_conf("sampler/dmala")
        x0 = (torch.rand(8, 12, generator=torch.Generator().manual_seed(5)) < 0.5).float()
        capture = graphs.GraphedSteps(graphs.StandInBackend()) if self.graphed else None
        state = kernel.init(model, x0)
        return {"runner": ChainRunner(model, kernel, state, ctx.generator, capture=capture)}

    def step(self, parts, step, ctx):
        return parts["runner"].run(1)

    def steps(self, parts, first, n, ctx):
        if self.crash_at is not None and first <= self.crash_at < first + n:
            raise KeyboardInterrupt  # a kill inside a block, between checkpoints
        return parts["runner"].run(n)

    def evaluate(self, parts, step, ctx):
        return {"mean_x": float(parts["runner"].state.x.mean())}

    def state_dict(self, parts):
        return parts["runner"].state_dict()

    def load_state_dict(self, parts, d):
        parts["runner"].load_state_dict(d)

    def finish(self, parts, history, ctx):
        runner = parts["runner"]
        return {
            "mean_x": float(runner.state.x.mean()),
            "accept_rate": ctx.totals.mean("accept_rate"),
            "n_grad": ctx.totals.mean("n_grad"),
            "captures": runner.capture.backend.captures if runner.capture else 0,
            "replays": runner.capture.backend.replays if runner.capture else 0,
        }


def test_graphed_blocks_through_the_loop_resume_and_equal_eager_blocks(tmp_path, monkeypatch):
    """With blocks (as on CUDA) the loop hands the task blocks of 20 steps; graphed (stand-in)
    and eager blocks give the same results, and a run killed inside a block resumes from its
    checkpoint to the same results (its graphs are captured afresh)."""
    from ebmlab.core import loop
    from tests.core.test_loop import make_ctx

    monkeypatch.setattr(loop, "_blocks", lambda task, ctx: callable(getattr(task, "steps", None)))
    eager = run_toy(_Sampling(graphed=False), make_ctx(tmp_path / "eager"))
    graphed = run_toy(_Sampling(graphed=True), make_ctx(tmp_path / "graphed"))
    assert graphed.pop("replays") == 1 and graphed.pop("captures") == 1  # block 3 replays
    assert {k: v for k, v in eager.items() if k not in ("captures", "replays")} == graphed
    assert graphed["n_grad"] == 1.0  # counts per step, not per block
    with pytest.raises(KeyboardInterrupt):
        run_toy(_Sampling(graphed=True, crash_at=50), make_ctx(tmp_path / "killed"))
    resumed = run_toy(_Sampling(graphed=True), make_ctx(tmp_path / "killed"))
    resumed.pop("captures"), resumed.pop("replays")
    assert resumed == graphed
