"""Fault injection through the real entry point (issue: no wrong result ever exits 0).

Each case asserts the exit code, one readable message and no traceback, and either results
identical to an uninterrupted run or no results at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import REPO, assert_same_results, run_cli

SAMPLING = [
    "experiment=dlp/fig3_ising_sampling",
    "scale=smoke",
    "model.n_side=3",
    "task.n_steps=120",
    "task.checkpoint_every=40",
    "sampler=gwg",
]


def _clean_error(p, code: int, *fragments: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    for f in fragments:
        assert f in p.stderr, (f, p.stderr)


def _metrics(run_dir):
    return json.loads((run_dir / "results.json").read_text())["metrics"]


def _same_numbers(a: dict, b: dict) -> None:
    assert_same_results(a, b)  # bit-identical on a CPU, docs/gpu.md's tolerance on CUDA


def test_finished_run_is_reused_only_for_the_same_config(tmp_path):
    d = tmp_path / "run"
    run_cli(SAMPLING, d)
    again = run_cli(SAMPLING, d)
    assert "already complete" in again.stdout
    p = run_cli([*SAMPLING, "task.n_steps=80"], d, check=False)
    _clean_error(p, 2, "holds a run of another configuration", "task.n_steps", "fresh=true")
    fresh = run_cli([*SAMPLING, "task.n_steps=80", "fresh=true"], d)
    assert fresh.returncode == 0 and "already complete" not in fresh.stdout


def test_long_override_names_stay_short_and_flat(tmp_path):
    sweep = tmp_path / "sweep"
    long_list = "[" + ",".join(["0.1"] * 100) + "]"
    run_cli([*SAMPLING, "task.n_steps=20", f"+extra_note={long_list}"], sweep, multirun=True)
    (job,) = [p for p in sweep.iterdir() if p.is_dir()]
    assert len(job.name) <= 200 and (job / "results.json").exists()


@pytest.mark.parametrize("kill_at", [40, 120])  # mid-run, and after the final checkpoint
def test_kill_at_any_point_resumes_to_identical_results(tmp_path, kill_at):
    ref = run_cli(SAMPLING, tmp_path / "ref").results
    d = tmp_path / "killed"
    first = run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}, check=False)
    assert first.returncode != 0 and not (d / "results.json").exists()
    _same_numbers(run_cli(SAMPLING, d).results, ref)


def test_corrupt_checkpoint_falls_back_to_the_previous_one(tmp_path):
    d = tmp_path / "run"
    ref = run_cli(SAMPLING, tmp_path / "ref").results
    run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": "100"}, check=False)
    last = d / "checkpoints" / "last.pt"
    b = bytearray(last.read_bytes())
    b[len(b) // 2] ^= 0xFF  # same size, changed bytes
    last.write_bytes(bytes(b))
    p = run_cli(SAMPLING, d)
    assert "last.pt is not usable" in p.stderr and "resuming from" in p.stderr
    _same_numbers(p.results, ref)


def test_no_usable_checkpoint_is_a_clear_error(tmp_path):
    d = tmp_path / "run"
    run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": "60"}, check=False)
    for name in ("last.pt", "last.prev.pt"):
        f = d / "checkpoints" / name
        if f.exists():
            f.write_bytes(f.read_bytes()[:100])  # truncated
    p = run_cli(SAMPLING, d, check=False)
    _clean_error(p, 3, "last.pt", "fresh=true")
    assert not (d / "results.json").exists()


def test_divergence_names_the_checkpoint_that_exists(tmp_path):
    p = run_cli(
        [
            "experiment=dlp/fig5_ising_learning",
            "scale=smoke",
            "dataset.n_side=4",
            "dataset.n_samples=64",
            "dataset.gibbs_steps=200",
            "learner.lr=1e38",
            "task.n_iters=30",
            "task.checkpoint_every=10",
            "task.eval_every=5",
        ],
        tmp_path / "run",
        check=False,
    )
    _clean_error(p, 1, "diverged")
    assert not (tmp_path / "run" / "results.json").exists()
    assert "no checkpoint had been written" in p.stderr or "last good checkpoint is" in p.stderr
    if "last good checkpoint is" in p.stderr:
        assert (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def test_second_writer_exits_at_once(tmp_path):
    d = tmp_path / "run"
    args = [*SAMPLING, "task.n_steps=200000", "task.checkpoint_every=100000"]
    env = dict(os.environ, OMP_NUM_THREADS="1", EBMLAB_CACHE=str(tmp_path / "cache"))
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ebmlab.run",
            *args,
            "logger=none",
            "progress=false",
            f"hydra.run.dir={d}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if (d / ".lock").exists():
                break
            time.sleep(0.1)
        p = run_cli(args, d, check=False, timeout=120)
        _clean_error(p, 3, "is in use by process", str(first.pid))
    finally:
        first.kill()
        first.wait()


def test_sweep_survives_a_bad_job_and_exits_nonzero(tmp_path):
    sweep = tmp_path / "sweep"
    p = run_cli(
        [*SAMPLING, "task.n_steps=20", "sampler.n_flips=1,0"], sweep, multirun=True, check=False
    )
    assert p.returncode == 2, p.stderr
    assert "1 of 2 jobs succeeded" in p.stderr and "FAILED (exit 2)" in p.stderr
    status = {
        d.name: json.loads((d / "status.json").read_text())
        for d in sweep.iterdir()
        if (d / "status.json").exists()
    }
    assert sorted(s["exit_code"] for s in status.values()) == [0, 2]
    assert all(s["choices"]["sampler"] == "gwg" for s in status.values())  # for the reports
    assert len(list(sweep.glob("*/results.json"))) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["sampler=null"], "cannot be removed on the command line"),
        (
            [
                "experiment=rmwggis/table1_synthetic",
                "scale=smoke",
                "sampler=gwg",
                "learner=pcd",
                "model=multimodal_2d",
            ],
            "ordinal",
        ),
        (["experiment=dlp/fig3_ising_sampling", "scale=smoke", "sampler=grbm_gibbs"], "binary"),
        (
            ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "task.n_chains=1000000000000"],
            "free",
        ),
    ],
)
def test_bad_input_is_one_clear_message(tmp_path, args, fragment):
    p = run_cli(args, tmp_path / "run", check=False)
    _clean_error(p, 2, fragment)
    assert not (tmp_path / "run" / "results.json").exists()


def test_corrupt_dataset_file_names_the_file(tmp_path, shared_data):
    data = tmp_path / "data" / "caltech101_silhouettes"
    data.mkdir(parents=True)
    src = shared_data / "caltech101_silhouettes" / "caltech101_silhouettes_28_split1.mat"
    (data / src.name).write_bytes(src.read_bytes()[:200_000])
    p = run_cli(
        ["experiment=acs/table1_rbm_learning", "scale=smoke", "dataset=caltech", "sampler=dmala"],
        tmp_path / "run",
        env={"EBMLAB_DATA_DIR": str(tmp_path / "data")},
        check=False,
    )
    _clean_error(p, 2, src.name, "corrupt or truncated")


def test_read_only_output_directory_is_exit_3(tmp_path):
    from pathlib import Path

    if os.geteuid() == 0:  # root ignores permission bits: use a read-only file system
        if not Path("/sys").is_dir():
            pytest.skip("no read-only file system to write to")
        target = Path("/sys/ebmlab_read_only_test/run")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "run"
    p = run_cli(SAMPLING, target, env={"EBMLAB_CACHE": str(tmp_path / "cache")}, check=False)
    _clean_error(p, 3, "cannot write the output directory", "not writable")
