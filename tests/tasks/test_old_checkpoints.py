"""Checkpoints written before the tasks declared their state (base commit 4bfdce4) still resume.

tests/fixtures/checkpoints/<case>_4bfdce4.pt holds the ``task`` entry of ``last.pt`` of a run
made by that commit's code with the arguments below, killed by the fault hook after ``step``.
The test kills the same run of today's code at that step, checks that its checkpoint has the
old layout (the same parts; model and plain values key for key with tensor shapes and dtypes),
puts the old entry in its place and resumes.
"""

from __future__ import annotations

import math

import pytest
import torch

from ebmlab.utils.workspace import Workspace
from tests.helpers import REPO, run_cli
from tests.tasks.conftest import EBM_TINY
from tests.tasks.test_density_modeling import TINY as TINY_DENSITY
from tests.tasks.test_graph_generation import FIXTURE as CITESEER
from tests.tasks.test_graph_generation import TINY as TINY_GRAPHS
from tests.tasks.test_grbm_gmm import TINY_GMM
from tests.tasks.test_grbm_images import tiny_fashion

FIXTURES = REPO / "tests" / "fixtures" / "checkpoints"
FIX = REPO / "tests" / "fixtures" / "images"
RBM_ACS = ["experiment=acs/table1_rbm_learning_acs", "scale=smoke", "dataset=static_mnist"]
RBM_ACS += [f"dataset.data_dir={FIX}", "model.n_hidden=8", "run.n_steps=20", "task.n_show=4"]
RBM_ACS += ["learner.buffer_size=10", "learner.batch_size=10", "run.checkpoint_every=5"]
# the parked paper-scale run's learner (exact RM, Hyvarinen objective) on 4 tiny iterations
GRAPH_RM = [a for a in TINY_GRAPHS if not a.startswith(("learner.s=", "run.n_steps="))]
GRAPH_RM += [f"dataset.data_dir={CITESEER}", "dataset.n_test=1", "run.n_steps=4"]
GRAPH_RM += ["learner=rm", "learner.objective=hyvarinen"]
TIMINGS = ("seconds", "time_per_iter")


def layout(obj, prefix=""):
    """{dotted key: (shape, dtype) for tensors, the type name otherwise} of a nested state."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(layout(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(obj, (list, tuple)):
        return {prefix: (type(obj).__name__, len(obj))}
    if isinstance(obj, torch.Tensor):
        return {prefix: (tuple(obj.shape), obj.dtype)}
    return {prefix: type(obj).__name__}


def _resume_from_old_checkpoint(case: str, args: list[str], tmp_path) -> dict:
    old = torch.load(FIXTURES / f"{case}_4bfdce4.pt", weights_only=True)
    run = tmp_path / case
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(old["step"])}
    assert run_cli(args, run, env=env, check=False).returncode != 0
    ws = Workspace(run)
    ckpt = ws.load("last")
    assert ckpt["_run"]["step"] == old["step"]
    # the task's layout: the same parts, the model key for key (a learner's own state is the
    # learner's to keep loadable)
    assert list(ckpt["task"]) == list(old["task"])
    assert layout(ckpt["task"]["model"]) == layout(old["task"]["model"])
    plain = [k for k, v in old["task"].items() if k not in ("model", "learner")]
    assert all(layout(ckpt["task"][k]) == layout(old["task"][k]) for k in plain)
    ckpt["task"] = old["task"]  # the state the old code wrote
    ws.save(ckpt, "last")
    r = run_cli(args, run).results
    assert all(math.isfinite(v) for v in r.values() if isinstance(v, float))
    return r


def test_grbm_gmm_resumes_an_old_checkpoint(tmp_path):
    r = _resume_from_old_checkpoint("gmm", TINY_GMM, tmp_path)
    assert r["n_epochs"] == 2 and 0.0 <= r["accept_rate"] <= 1.0


@pytest.mark.slow
def test_grbm_images_resumes_an_old_checkpoint(fashion_mnist_root, tmp_path):
    r = _resume_from_old_checkpoint("gimg", tiny_fashion(fashion_mnist_root), tmp_path)
    assert r["n_updates"] == 6 and r["n_epochs"] == 2


@pytest.mark.slow
def test_ebm_learning_resumes_an_old_checkpoint(tmp_path):
    r = _resume_from_old_checkpoint("ebm", EBM_TINY, tmp_path)
    assert r["n_iters"] == 12 and r["best_step"] in (6, 12)


@pytest.mark.slow
def test_rbm_learning_with_acs_pcd_resumes_an_old_checkpoint(tmp_path):
    r = _resume_from_old_checkpoint("rbm_acs", RBM_ACS, tmp_path)
    assert r["n_iters"] == 20 and r["log_prob_evals_per_step"] > 0


def _same_as_uninterrupted(resumed: dict, args: list[str], tmp_path) -> None:
    """The old code's checkpoint resumed gives today's uninterrupted run's numbers."""
    full = run_cli(args, tmp_path / "full").results
    assert resumed.keys() == full.keys()
    assert {k: v for k, v in resumed.items() if k not in TIMINGS} == {
        k: v for k, v in full.items() if k not in TIMINGS
    }


@pytest.mark.slow
def test_density_modeling_resumes_an_old_checkpoint(tmp_path):
    """Heat-map snapshots, the CPU data-stream generator and the last MMD sets carry over."""
    r = _resume_from_old_checkpoint("density", TINY_DENSITY, tmp_path)
    assert r["n_iters"] == 20 and r["mmd_samples"] == 200
    _same_as_uninterrupted(r, TINY_DENSITY, tmp_path)


@pytest.mark.slow
def test_graph_generation_resumes_an_old_checkpoint(tmp_path):
    """The layout of the parked paper-scale exact-RM run (records/parked/, Table 2)."""
    r = _resume_from_old_checkpoint("graph_rm", GRAPH_RM, tmp_path)
    assert r["n_iters"] == 4 and "accept_rate" not in r
    _same_as_uninterrupted(r, GRAPH_RM, tmp_path)
