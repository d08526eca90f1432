"""The runner end to end: tasks through the real entry point, bad input, resume after
SIGKILL, W&B offline runs, sweeps with the submitit launcher, divergence."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from ebmlab.errors import ConfigError, DivergenceError
from ebmlab.utils.logging import read_metrics
from tests.helpers import REPO, assert_same_results, run_cli, run_inprocess

TINY_LEARNING = [
    "experiment=dlp/fig5_ising_learning",
    "scale=smoke",
    "dataset.n_side=4",
    "dataset.n_samples=64",
    "dataset.gibbs_steps=2000",
    "learner.buffer_size=32",
    "learner.batch_size=32",
    "learner.sampler_steps=3",
]


def test_ising_learning_end_to_end(tmp_path):
    p = run_cli([*TINY_LEARNING, "run.n_steps=40", "run.eval_every=10"], tmp_path / "run")
    r = p.results
    assert r["n_iters"] == 40 and r["rmse"] > 0 and r["time_per_iter"] > 0
    assert (tmp_path / "run" / "checkpoints" / "last.pt").exists()
    assert (tmp_path / "run" / "figures" / "log_rmse.png").exists()
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [row["step"] for row in rows] == [10, 20, 30, 40]
    assert "Run directory:" in p.stdout and "log_rmse" in p.stdout


def test_learning_recovers_couplings(tmp_path):
    """PCD with DMALA gets the J error well below that of the initial (near-zero) J."""
    args = [
        "experiment=dlp/fig5_ising_learning",
        "scale=smoke",
        "dataset.n_side=5",
        "dataset.sigma=0.1",
        "dataset.n_samples=1000",
        "dataset.gibbs_steps=20000",
        "sampler=dmala",
        "run.n_steps=300",
        "run.eval_every=300",
        "learner.l1=0.0",
    ]
    r = run_cli(args, tmp_path / "run").results
    rmse_zero = 0.1 * (4 / 25) ** 0.5  # RMSE of J = 0 against sigma * adjacency (degree 4)
    assert r["rmse"] < 0.6 * rmse_zero


def test_ising_sampling_end_to_end(tmp_path):
    p = run_cli(
        [
            "experiment=dlp/fig3_ising_sampling",
            "scale=smoke",
            "model.n_side=3",
            "run.n_steps=300",
            "sampler=dmala",
            "sampler.step_size=0.4",
        ],
        tmp_path / "run",
    )
    r = p.results
    assert 0 < r["accept_rate"] <= 1 and r["ess"] > 0 and r["ess_per_second"] > 0
    assert r["log_prob_evals_per_step"] == 1 and r["grad_evals_per_step"] == 1
    assert r["rmse"] < 0.1  # running mean of 9 spins close to the exact mean
    # the proposal flips at least what is accepted, and fewer than all 9 spins on average
    assert r["jump"] <= r["proposal_flips"] < 9 and r["jump"] < r["proposal_flips"]


def test_rerun_of_finished_run_is_a_no_op(tmp_path):
    args = [*TINY_LEARNING, "run.n_steps=10", "run.eval_every=5"]
    first = run_cli(args, tmp_path / "run").results
    again = run_cli(args, tmp_path / "run")
    assert "already complete" in again.stdout and again.results == first


@pytest.mark.parametrize("task", ["learning", "sampling"])
def test_resume_after_sigkill_gives_identical_results(tmp_path, task):
    if task == "learning":
        args = [
            *TINY_LEARNING,
            "run.n_steps=60",
            "run.eval_every=5",
            "run.checkpoint_every=20",
            "sampler=dmala",
        ]
        kill_at = 47
    else:
        args = [
            "experiment=dlp/fig3_ising_sampling",
            "scale=smoke",
            "model.n_side=3",
            "run.n_steps=200",
            "run.checkpoint_every=50",
            "sampler=gwg",
        ]
        kill_at = 130
    clean = run_cli(args, tmp_path / "clean").results
    killed = run_cli(
        args, tmp_path / "killed", check=False, env={"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    )
    assert killed.returncode == -9, killed.stderr  # really SIGKILLed mid-run
    assert not (tmp_path / "killed" / "results.json").exists()
    resumed = run_cli(args, tmp_path / "killed").results
    assert_same_results(resumed, clean)  # bit-identical on a CPU, docs/gpu.md's rule on CUDA

    def rows(d):
        return {"rows": read_metrics(tmp_path / d / "metrics.jsonl")}

    assert_same_results(rows("killed"), rows("clean"))


BAD = [
    (["health.min_accept_rate=1.5"], "health.min_accept_rate"),
    (["sampler=dmala", "sampler.step_size=-1"], "sampler.step_size"),
    (["experiment=dlp/fig3_ising_sampling", "scale=smoke", "task.n_chains=0"], "task.n_chains"),
    (["dataset.n_side=1"], "dataset.n_side"),
    (["sampler=nosuchsampler"], "sampler=nosuchsampler"),
    (["model.dim=50"], "model.dim"),
    (["run.n_steps=abc"], "run.n_steps"),
    (["device=tpu"], "device"),
    (["sampler.no_such_key=1"], "no_such_key"),
    (["learner.buffer_init=gaussian"], "learner.buffer_init"),
]


def run_stderr(argv, tmp_path, capsys, monkeypatch):
    """``python -m ebmlab.run`` in this process (fast): returns (exit code, stderr)."""
    code = run_inprocess(argv, tmp_path / "run", monkeypatch)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("overrides,key", BAD, ids=[b[1] for b in BAD])
def test_bad_overrides_fail_clearly_before_compute(tmp_path, capsys, monkeypatch, overrides, key):
    code, err = run_stderr(overrides, tmp_path, capsys, monkeypatch)
    assert code == 2, err
    assert key in err
    assert "Traceback" not in err
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert not (tmp_path / "cache").exists()  # no data was generated


def test_unknown_option_lists_allowed_values(tmp_path, capsys, monkeypatch):
    code, err = run_stderr(["sampler=nosuchsampler"], tmp_path, capsys, monkeypatch)
    assert code == 2 and "allowed:" in err and "gwg" in err


def test_bad_override_exit_code_through_subprocess(tmp_path):
    p = run_cli(["sampler=dmala", "sampler.step_size=-1"], tmp_path / "run", check=False)
    assert p.returncode == 2 and "sampler.step_size" in p.stderr
    assert "Traceback" not in p.stderr


def test_wandb_offline_run_is_listed_by_wandb_sync(tmp_path):
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "ebmlab.run",
            *TINY_LEARNING,
            "run.n_steps=10",
            "run.eval_every=5",
            "logger=wandb",
            "progress=false",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={
            **__import__("os").environ,
            "EBMLAB_CACHE": str(tmp_path / "cache"),
            "OMP_NUM_THREADS": "1",
        },
    )
    assert p.returncode == 0, p.stderr
    runs = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    run_id = (run_dir / "wandb_id.txt").read_text().strip()
    s = subprocess.run(
        [str(REPO / ".venv" / "bin" / "wandb"), "sync", "--dry-run", str(runs[0])],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    out = s.stdout + s.stderr
    assert "Would sync 1 run" in out and run_id in out


def test_local_submitit_sweep_runs_every_job_and_resumes(tmp_path):
    sweep = tmp_path / "sweep"
    args = [
        *TINY_LEARNING,
        "run.n_steps=6",
        "run.eval_every=3",
        "hydra/launcher=local",
        "sampler=gwg,dmala",
    ]
    run_cli(args, sweep, multirun=True, timeout=900)
    results = sorted(sweep.glob("*/results.json"))
    assert len(results) == 2
    names = sorted(r.parent.name for r in results)
    assert names[0].startswith("dataset.") and "sampler=dmala" in " ".join(names)
    again = run_cli(args, sweep, multirun=True, timeout=900)
    assert again.returncode == 0
    for r in results:  # deterministic directories: the re-launch found every job complete
        assert json.loads(r.read_text())["metrics"]["n_iters"] == 6


def test_divergence_stops_and_keeps_last_good_checkpoint(tmp_path):
    from ebmlab.learning.pcd import PCD
    from ebmlab.models.ising import DenseIsing
    from ebmlab.samplers.gwg import GWG

    g = torch.Generator().manual_seed(0)
    model = DenseIsing(dim=9, init_scale=0.01, learn_bias=True)
    learner = PCD(8, 8, sampler_steps=1, lr=1e-3, l1=0.0, buffer_init="uniform")
    data = (torch.rand(20, 9, generator=g) < 0.5).float()
    learner.setup(model, data, g, GWG(1))
    learner.step(model, g)
    with torch.no_grad():
        model.J_raw[0, 1] = float("nan")
    learner.step(model, g)  # nothing read back: recorded on the device, raised when checked
    learner.step(model, g)
    with pytest.raises(DivergenceError, match="step 2"):
        learner.check_divergence()


def test_config_error_names_key():
    e = ConfigError("step_size", "must be > 0").prefixed("sampler")
    assert str(e).startswith("sampler.step_size")


def test_ising_learning_with_ratio_matching_learner(tmp_path):
    """`task=ising_learning learner=rmwggis` trains without a sampler (RMwGGIS Table 3)."""
    args = [
        "experiment=dlp/fig5_ising_learning",
        "scale=smoke",
        "dataset.n_side=4",
        "dataset.n_samples=64",
        "dataset.gibbs_steps=2000",
        "learner=rmwggis",
        "run.n_steps=20",
        "run.eval_every=10",
    ]
    r = run_cli(args, tmp_path / "run").results
    assert r["n_iters"] == 20 and math.isfinite(r["log_rmse"])
    j = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=True)["task"]["model"]
    j = j["J_raw"]
    assert torch.allclose(j, j.T) and j.diagonal().abs().max() == 0  # project_() ran


def test_a_run_without_experiment_prints_no_warning(tmp_path):
    """The run directory's name interpolates ${hydra:runtime.choices.task}; checking it before
    Hydra had set its config raised a five-line UserWarning (and skipped the check)."""
    args = ["task=ising_sampling", "model=ising_lattice", "sampler=gwg", "scale=smoke"]
    args += ["run.n_steps=5", "model.n_side=3"]
    p = run_cli(args, None, cache=tmp_path / "cache", cwd=tmp_path, timeout=300)
    assert "Warning" not in p.stderr, p.stderr
    assert list((tmp_path / "outputs" / "runs" / "ising_sampling" / "smoke").iterdir())
