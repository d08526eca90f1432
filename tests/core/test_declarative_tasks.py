"""Declarative tasks (issue 44): a task declares its cadence, the parts it checkpoints, what it
requires of the config (checked before the run directory is taken) and whether the loop appends
the sampler-cost block; the loop does the rest."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from omegaconf import OmegaConf

from ebmlab.core.loop import (
    SAMPLER_COST,
    Cadence,
    LoopTask,
    Requirement,
    check_requirements,
    restored_part,
    run_task,
    saved_part,
)
from ebmlab.core.state import ChainState
from ebmlab.errors import CheckpointError, ConfigError
from ebmlab.models.ising import DenseIsing
from ebmlab.models.rbm import BernoulliRBM
from ebmlab.utils.logging import read_metrics
from tests.core.test_loop import make_ctx
from tests.helpers import run_cli, run_toy


@dataclass
class Parts:
    net: torch.nn.Module
    chains: ChainState
    weights: torch.Tensor
    best: dict


class Walk(LoopTask):
    """Chains that random-walk, a linear net nudged each step; everything declared."""

    main_metric = "x"
    checkpoint_keys = ("net", "chains", "weights", "best")
    reports_sampler_cost = True

    def __init__(self, n=6, extra_result=None):
        self.cad = Cadence(n, 2, 3)
        self.extra_result = extra_result or {}

    def build(self, ctx):
        x, net = torch.zeros(3, 2), torch.nn.Linear(2, 1)
        torch.nn.init.zeros_(net.weight)
        return Parts(net, ChainState(x, x.sum(1)), torch.ones(2), {"step": 0})

    def step(self, p, step, ctx):
        g = ctx.generator
        x = p.chains.x + torch.randn(p.chains.x.shape, generator=g)
        p.chains = ChainState(x, x.sum(1), grad=torch.ones_like(x))
        with torch.no_grad():
            p.net.weight.add_(0.1)
        p.weights = p.weights * 2
        p.best = {"step": step}
        return {"accept_rate": 0.5 + step / 100, "n_log_prob": 2, "n_grad": 1, "other": 7.0}

    def evaluate(self, p, step, ctx):
        return {"x": float(p.chains.x.sum())}

    def finish(self, p, history, ctx):
        out = {"x": float(p.chains.x.sum()), "w": float(p.net.weight.detach().sum())}
        return {
            **out,
            "best": float(p.best["step"]),
            "scale": float(p.weights[0]),
            **self.extra_result,
        }


def test_default_checkpoint_round_trips_every_kind_of_part(tmp_path):
    task = Walk()
    run_toy(task, make_ctx(tmp_path / "a"))
    ctx = make_ctx(tmp_path / "a")
    ckpt = ctx.load_file("last")["task"]
    assert set(ckpt) == {"net", "chains", "weights", "best"}
    assert set(ckpt["net"]) == {"weight", "bias"} and set(ckpt["chains"]) == {
        "x",
        "log_prob",
        "grad",
    }
    fresh = task.build(ctx)
    task.load_state_dict(fresh, ckpt)
    assert isinstance(fresh.chains, ChainState) and torch.equal(fresh.chains.x, ckpt["chains"]["x"])
    assert torch.equal(fresh.chains.grad, torch.ones(3, 2))
    assert torch.equal(fresh.net.weight, ckpt["net"]["weight"])  # loaded in place
    assert torch.equal(fresh.weights, torch.full((2,), 64.0)) and fresh.best == {"step": 6}
    assert task.state_dict(fresh).keys() == ckpt.keys()


def test_a_tensor_part_comes_back_on_the_device_of_the_part_it_replaces():
    """The bookkeeping a GPU run needs, on the CPU: the built tensor lives on 'meta' here."""
    task = Walk()
    p = Parts(torch.nn.Linear(2, 1), ChainState(torch.zeros(1, 2), torch.zeros(1)), None, {})
    p.weights = torch.empty(2, device="meta")
    task.load_state_dict(p, {**task.state_dict(p), "weights": torch.ones(2)})
    assert p.weights.device.type == "meta"


def test_a_generator_part_is_saved_as_its_state_and_restored_in_place():
    """A task's own stream (density_modeling's CPU data generator) continues where it stopped."""
    g = torch.Generator().manual_seed(3)
    state = saved_part(g)
    assert isinstance(state, torch.Tensor) and state.dtype == torch.uint8
    expected = torch.rand(4, generator=g)
    other = torch.Generator().manual_seed(99)
    assert restored_part(other, state) is other
    assert torch.equal(torch.rand(4, generator=other), expected)


def test_a_checkpoint_without_a_declared_part_names_it(tmp_path):
    task = Walk()
    parts = task.build(make_ctx(tmp_path))
    with pytest.raises(CheckpointError, match="no best of Walk"):
        task.load_state_dict(parts, {"net": {}, "chains": {}, "weights": torch.ones(2)})


def test_resume_continues_exactly_from_declared_state(tmp_path):
    whole = run_toy(Walk(n=9), make_ctx(tmp_path / "whole"))
    with pytest.raises(KeyboardInterrupt):

        class Crash(Walk):
            def step(self, p, step, ctx):
                if step == 5:
                    raise KeyboardInterrupt
                return super().step(p, step, ctx)

        run_toy(Crash(n=9), make_ctx(tmp_path / "split"))
    assert run_toy(Walk(n=9), make_ctx(tmp_path / "split")) == whole


def test_the_loop_appends_the_sampler_cost_block_in_one_spelling(tmp_path):
    res = run_toy(Walk(), make_ctx(tmp_path / "a"))
    assert res["accept_rate"] == pytest.approx(0.5 + 3.5 / 100)  # mean over the 6 steps
    assert res["log_prob_evals_per_step"] == 2.0 and res["grad_evals_per_step"] == 1.0
    assert "other" not in res  # not a cost
    assert set(SAMPLER_COST) == {
        "accept_rate",
        "log_prob_evals_per_step",
        "grad_evals_per_step",
    }
    with pytest.raises(RuntimeError, match="accept_rate, which the loop"):
        run_toy(Walk(extra_result={"accept_rate": 1.0}), make_ctx(tmp_path / "b"))

    class Quiet(Walk):
        reports_sampler_cost = False

    assert "accept_rate" not in run_toy(Quiet(), make_ctx(tmp_path / "c"))


def test_the_loop_reads_the_cadence_from_the_run_node_not_from_the_task(tmp_path):
    task = Walk(n=9)
    task.cadence = Cadence(100, 50, 50)  # anything a task might hold is replaced by run:
    ctx = make_ctx(tmp_path)
    ctx.cfg = OmegaConf.merge(
        ctx.cfg, {"run": {"n_steps": 4, "eval_every": 2, "checkpoint_every": 3}}
    )
    run_task(task, ctx)
    assert task.cadence == Cadence(4, 2, 3)
    assert make_ctx(tmp_path).load_file("last")["_run"]["step"] == 4
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows if "seconds" in r] == [2, 4]
    with pytest.raises(ConfigError, match=r"^run: the config has no run: node"):
        run_task(Walk(n=9), make_ctx(tmp_path / "none"))
    bad = make_ctx(tmp_path / "bad")
    bad.cfg = OmegaConf.merge(
        bad.cfg, {"run": {"n_steps": 4, "eval_every": 0, "checkpoint_every": 3}}
    )
    with pytest.raises(ConfigError, match=r"^run.eval_every: must be an integer >= 1"):
        run_task(Walk(n=9), bad)


class Needy(LoopTask):
    requires = {
        "model": Requirement(BernoulliRBM, "model=rbm", {"n_visible": "dataset.dim"}),
        "sampler": Requirement(),
        "learner": Requirement(equal={"batch_size": 10}),
    }


def _cfg(**over):
    cfg = {
        "dataset": {"dim": 12},
        "model": {"_target_": "ebmlab.models.rbm.BernoulliRBM", "n_visible": 12},
        "sampler": {"_target_": "ebmlab.samplers.gwg.GWG"},
        "learner": {"_target_": "ebmlab.learning.pcd.PCD", "batch_size": 10},
        "run": {"n_steps": 10, "eval_every": 5, "checkpoint_every": 5},
    }
    for k, v in over.items():
        cfg[k] = v
    return OmegaConf.create(cfg)


def test_requirements_name_the_key_and_what_satisfies_it():
    check_requirements(Needy(), _cfg(), {"task": "needy"})
    ising = {"_target_": f"{DenseIsing.__module__}.DenseIsing", "n_visible": 12}
    with pytest.raises(ConfigError, match=r"^model: task needy needs model=rbm \(got ising\)"):
        check_requirements(Needy(), _cfg(model=ising), {"task": "needy", "model": "ising"})
    rbm9 = {"_target_": "ebmlab.models.rbm.BernoulliRBM", "n_visible": 9}
    with pytest.raises(ConfigError, match=r"^model.n_visible: must be 12 \(dataset.dim\) .*got 9"):
        check_requirements(Needy(), _cfg(model=rbm9), {"task": "needy"})
    with pytest.raises(ConfigError, match=r"^sampler: task needy needs a sampler"):
        check_requirements(Needy(), _cfg(sampler=None), {"task": "needy"})
    learner = {"_target_": "ebmlab.learning.pcd.PCD", "batch_size": 4}
    with pytest.raises(ConfigError, match=r"^learner.batch_size: must be 10 for task needy"):
        check_requirements(Needy(), _cfg(learner=learner), {"task": "needy"})


@pytest.mark.parametrize(
    "args, key",
    [
        (["experiment=dlp/fig5_ising_learning", "model.dim=9"], "model.dim: must be"),
        (["experiment=grbm/fig1_gmm", "model.n_visible=3"], "model.n_visible: must be 2"),
        (["experiment=dlp/table1_ebm_learning", "dataset=gmm_iso"], "dataset: task ebm_learning"),
        (["experiment=acs/table1_rbm_learning", "sampler=acs"], "use learner=acs_pcd"),
    ],
)
def test_a_requirement_fails_with_exit_2_before_the_run_directory_is_taken(tmp_path, args, key):
    run = tmp_path / "run"
    p = run_cli([*args, "scale=smoke"], run, check=False)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("ebmlab:")]
    assert len(lines) == 1 and key in lines[0], p.stderr
    assert not (run / "run_config.json").exists() and not (run / ".hydra").exists()


def test_sampler_cost_values_are_means_over_the_steps(tmp_path):
    res = run_toy(Walk(n=4), make_ctx(tmp_path))
    assert math.isclose(res["accept_rate"], (0.51 + 0.52 + 0.53 + 0.54) / 4)
