"""The sampling tasks' ``steps`` hook (issue 46): on CUDA the loop hands a task blocks of
steps that the chain runner captures as CUDA graphs, per-step outputs (a trace row, a
Hamming summary) included. Here the blocks run as on CUDA through the stand-in capture
(which fails on a host read inside a captured block): traces, results and checkpoints are
bit-identical to the one-step-at-a-time run, and a run killed inside a block resumes to the
uninterrupted run's numbers."""

from __future__ import annotations

import json

import pytest
import torch

from ebmlab.core import graphs, loop
from ebmlab.core import state as state_module
from ebmlab.utils.workspace import Workspace
from tests.helpers import REPO, run_inprocess


class Killed(BaseException):
    """A kill inside a block (between checkpoints): nothing after it runs."""


def _as_on_cuda(monkeypatch, made: list) -> None:
    """Blocks for tasks with ``steps`` and the stand-in capture for every chain runner."""
    monkeypatch.setattr(loop, "_blocks", lambda task, ctx: callable(getattr(task, "steps", None)))

    def stand_in(device):
        made.append(graphs.GraphedSteps(graphs.StandInBackend()))
        return made[-1]

    monkeypatch.setattr(graphs, "for_device", stand_in)


def _no_host_reads_once_frozen(monkeypatch, task_cls, checked: list) -> None:
    """A block of a frozen kernel after step 1 (no warm-up, no adaptation: the steady state)
    reads no tensor value on the host, inside the capture or around it (trace writes), with
    the chain state's host-read shortcuts off as they are on CUDA."""
    steps = task_cls.steps

    def guarded(self, p, first, n, ctx):
        runner = p.runner if hasattr(p, "runner") else p.chains.runner
        if first == 1 or runner.adapting:
            return steps(self, p, first, n, ctx)
        checked.append(first)
        state_module.CAPTURING.depth += 1  # the tensors' code paths as on CUDA: no shortcuts
        try:
            with graphs._NoHostReads():
                return steps(self, p, first, n, ctx)
        finally:
            state_module.CAPTURING.depth -= 1

    monkeypatch.setattr(task_cls, "steps", guarded)


def _kill_inside_a_block(monkeypatch, task_cls, at: int) -> None:
    steps = task_cls.steps

    def killing(self, p, first, n, ctx):
        if first <= at < first + n and not getattr(task_cls, "_killed", False):
            monkeypatch.setattr(task_cls, "_killed", True, raising=False)
            steps(self, p, first, n, ctx)  # the block ran; its outputs are lost with the process
            raise Killed
        return steps(self, p, first, n, ctx)

    monkeypatch.setattr(task_cls, "steps", killing)


def _ignored(key: str) -> bool:
    """Wall time (ess_t: ESS per second), and whether the target RBM came from the cache (the
    first run trains it)."""
    return "second" in key or key in ("ess_t", "rbm_cached")


def _run(args, run_dir, monkeypatch) -> tuple[dict, dict]:
    assert run_inprocess(args, run_dir, monkeypatch) == 0
    results = json.loads((run_dir / "results.json").read_text())["metrics"]
    untimed = {k: v for k, v in results.items() if not _ignored(k)}
    return untimed, Workspace(run_dir).load("last")


def _assert_equal(a, b, where="") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            _assert_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_equal(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _untimed_checkpoint(ck: dict) -> dict:
    """The task state and totals (the history's ``seconds`` and the clock are wall time)."""
    history = [{k: v for k, v in row.items() if not _ignored(k)} for row in ck["history"]]
    return {"task": _drop_timing(ck["task"]), "totals": ck["totals"], "history": history}


def _drop_timing(d):
    if isinstance(d, dict):
        d = {k: v[:1] if k == "tune" else v for k, v in d.items()}  # [steps, seconds]
        return {k: _drop_timing(v) for k, v in d.items() if not _ignored(k)}
    return d


def _blocks_equal_steps(args, task_cls, kill_at, tmp_path, monkeypatch) -> list:
    one, one_ck = _run(args, tmp_path / "one", monkeypatch)
    with monkeypatch.context() as m:
        made: list = []
        _as_on_cuda(m, made)
        checked: list = []
        _no_host_reads_once_frozen(m, task_cls, checked)
        blocks, blocks_ck = _run(args, tmp_path / "blocks", monkeypatch)
        assert len(checked) >= 3
        replays = sum(g.backend.replays for g in made)
        assert replays > 0  # blocks were captured and replayed, not only warmed
        assert one == blocks
        _assert_equal(_untimed_checkpoint(one_ck), _untimed_checkpoint(blocks_ck), "ck")
        _kill_inside_a_block(m, task_cls, kill_at)
        with pytest.raises(Killed):
            run_inprocess(args, tmp_path / "killed", monkeypatch)
        assert not (tmp_path / "killed" / "results.json").exists()
        resumed, resumed_ck = _run(args, tmp_path / "killed", monkeypatch)
        assert resumed == one
        _assert_equal(_untimed_checkpoint(one_ck), _untimed_checkpoint(resumed_ck), "resumed")
    return made


# every run here: 120 loop steps, evaluations every 20, checkpoints every 40 (blocks end there)
RUN = ["run.n_steps=120", "run.eval_every=20", "run.checkpoint_every=40"]

ISING = [
    "experiment=dlp/fig3_ising_sampling",
    "scale=smoke",
    "model.n_side=3",
    "task.n_chains=6",
    *RUN,
]


@pytest.mark.parametrize("sampler", ["gwg", "dmala"])
def test_ising_sampling_blocks_equal_steps_and_resume(sampler, tmp_path, monkeypatch):
    from ebmlab.tasks.ising_sampling import IsingSampling

    args = [*ISING, f"sampler={sampler}"]
    _blocks_equal_steps(args, IsingSampling, 50, tmp_path, monkeypatch)


def test_ising_block_reads_nothing_on_the_host(monkeypatch):
    """A block with its per-step record, captured by the stand-in (which raises on a host
    read), replays to the eager block's trace."""
    from ebmlab.core.chain import ChainRunner
    from ebmlab.tasks.ising_sampling import states_as_uint8
    from tests.exactness import frustrated_ising, random_init
    from tests.helpers import from_conf

    model = frustrated_ising(d=9, coupling=0.2, seed=1)
    runs = []
    for capture in (None, graphs.GraphedSteps(graphs.StandInBackend())):
        kernel = from_conf("sampler/gwg")
        x0 = random_init(model, 5, torch.Generator().manual_seed(1))
        gen = torch.Generator().manual_seed(2)
        runner = ChainRunner(model, kernel, kernel.init(model, x0), gen, capture=capture)
        runs.append([runner.run(7, states_as_uint8)["record"] for _ in range(5)])
    assert (capture.backend.captures, capture.backend.replays) == (1, 3)
    # the same block without the record is another graph (the record is in the capture key)
    assert "record" not in runner.run(7) and "record" not in runner.run(7)
    for eager, graphed in zip(*runs):
        assert eager.shape == (7, 5, 9) and eager.dtype == torch.uint8
        assert torch.equal(eager, graphed)


RBM = [
    "experiment=dlp/fig4_rbm_sampling",
    "scale=smoke",
    f"dataset.data_dir={REPO / 'tests' / 'fixtures' / 'images'}",
    "model.n_hidden=8",
    "task.gt_steps=20",
    "task.gt_n_ref=20",
    "task.gt_n_floor=10",
    "task.n_chains=6",
    "task.ess_chains=4",
    *RUN,
    "task.n_show=0",
]


@pytest.mark.parametrize("sampler", ["dmala", "acs"])
def test_rbm_sampling_blocks_equal_steps_and_resume(sampler, tmp_path, monkeypatch):
    """ACS tunes first (its warm-up, eager, at step 1 of the first block), then blocks."""
    from ebmlab.tasks.rbm_sampling import RBMSampling

    args = [*RBM, f"sampler={sampler}"]
    if sampler == "acs":
        args += ["sampler.steps_per_cycle=4", "sampler.burnin_steps=3", "sampler.burnin_mh_steps=4"]
        args += [
            "sampler.alpha_candidates=3",
            "sampler.beta_candidates=2",
            "sampler.tune_budget=30",
        ]
    _blocks_equal_steps(args, RBMSampling, 70, tmp_path, monkeypatch)


ESS = [
    "experiment=ab/tables1to5_ess",
    "scale=smoke",
    "task.n_chains=4",
    *RUN,
    "task.burn_in=30",
]


@pytest.mark.parametrize(
    "extra",
    [
        ["model.n_side=4", "sampler=dmala", "task.tune_accept=0.574"],  # tuned during burn-in
        ["model.n_side=4", "sampler=gwg"],  # a fixed kernel: burn-in blocks are captured too
        ["ab_target=rotated_medium", "model.dim=6", "sampler=ab_1st", "sampler.n_probe=10"],
    ],
    ids=["dmala_tuned", "gwg", "ab_1st"],
)
def test_sampler_ess_blocks_equal_steps_and_resume(extra, tmp_path, monkeypatch):
    """Blocks end at the end of burn-in (its steps report burn_in_accept_rate only); the
    summary rows after it are the runner's per-step record."""
    from ebmlab.tasks.sampler_ess import SamplerESS

    _blocks_equal_steps([*ESS, *extra], SamplerESS, 50, tmp_path, monkeypatch)


def test_a_task_declares_where_blocks_end():
    from ebmlab.core.loop import Cadence, step_spans

    class Task:
        def steps(self, parts, first, n, ctx):
            return None

        def block_ends(self):
            return (30,)

    class Ctx:
        device = torch.device("cuda")

    spans = list(
        step_spans(Task(), Ctx(), Cadence(n_steps=70, eval_every=20, checkpoint_every=40), 0)
    )
    assert spans == [(1, 20), (21, 30), (31, 40), (41, 60), (61, 70)]
    cpu = Ctx()
    cpu.device = torch.device("cpu")
    assert list(step_spans(Task(), cpu, Cadence(70, 20, 40), 0)) == [(s, s) for s in range(1, 71)]


TOY = [
    "experiment=acs/fig1_toy",
    "scale=smoke",
    "task.n_chains=6",
    *RUN,
    "task.burn_in=30",  # inside the block 21..40: its first 10 steps are not counted
]


@pytest.mark.parametrize("sampler", ["dmala", "acs"])
def test_multimodal_2d_blocks_equal_steps_and_resume(sampler, tmp_path, monkeypatch):
    """The visit histogram counts the block's recorded states after burn-in: the same
    histogram (visits in the checkpoint), scores and results as one step at a time."""
    from ebmlab.tasks.multimodal_2d import Multimodal2D

    args = [*TOY, f"sampler={sampler}"]
    _blocks_equal_steps(args, Multimodal2D, 50, tmp_path, monkeypatch)
