"""The submitit launchers (hydra/launcher=local|slurm|slurm_cpu): a failed job is a failed
job (submitit records an error, the sweep prints one line per failure and exits with the
worst code), SUBMITIT's pre-timeout signal stops a run at a step boundary with a checkpoint
and the requeued job resumes to the same result, and the SLURM presets and site file."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

import ebmlab.run  # noqa: F401 - registers resolvers
from tests.helpers import REPO, run_cli

TINY_SAMPLING = [
    "experiment=dlp/fig3_ising_sampling",
    "scale=smoke",
    "sampler=gwg",
    "run.n_steps=20",
    "run.eval_every=10",
]
TIME_KEYS = {"seconds", "ess_per_second"}  # wall-clock numbers differ between any two runs


def _submitit_outcomes(sweep: Path) -> dict[str, str]:
    """Each job's outcome as submitit recorded it ("success" or "error"), keyed by job id."""
    out = {}
    for pkl in sweep.glob(".submitit/*/*_result.pkl"):
        with pkl.open("rb") as f:
            out[pkl.parent.name] = pickle.load(f)[0]
    return out


def test_submitit_sweep_with_a_failed_job_fails_loudly(tmp_path):
    """Before: submitit logged "Job completed successfully" for a job that failed with
    exit 2, the sweep printed no summary and exited 0."""
    sweep = tmp_path / "sweep"
    p = run_cli(
        [*TINY_SAMPLING, "hydra/launcher=local", "sampler.n_flips=1,-1"],
        sweep,
        multirun=True,
        check=False,
        timeout=600,
    )
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert "Sweep: 1 of 2 jobs succeeded." in lines, p.stderr
    failed = [line for line in lines if line.strip().startswith("FAILED")]
    assert len(failed) == 1, p.stderr
    assert failed[0].strip().startswith("FAILED (exit 2) ") and "sampler.n_flips=-1" in failed[0]
    assert "configuration error: sampler.n_flips" in failed[0]
    assert sorted(_submitit_outcomes(sweep).values()) == ["error", "success"]
    assert len(list(sweep.glob("*/results.json"))) == 1


@pytest.mark.slow
def test_usr2_stops_at_a_step_boundary_and_the_requeued_job_resumes_to_the_same_result(
    tmp_path,
):
    """submitit's pre-timeout / preemption signal (USR2) reaches ebmlab's stop path: the run
    checkpoints at the step it reached, submitit requeues the job (the local executor
    restarts it), and the requeued job resumes to the numbers of an uninterrupted run."""
    args = [
        *TINY_SAMPLING[:3],
        "run.n_steps=4000",
        "run.eval_every=100",
        "run.checkpoint_every=100000",  # no periodic checkpoint: only the stop writes one
    ]
    sweep = tmp_path / "sweep"
    env = {**os.environ, "EBMLAB_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    # the job sends itself SIGUSR2 (what SLURM sends signal_delay_s before the limit) after
    # step 1234: the same moment on any machine, however fast (no race with the run's end)
    env.update(EBMLAB_FAULT_KILL_AT_STEP="1234", EBMLAB_FAULT_SIGNAL="SIGUSR2")
    cmd = [sys.executable, "-m", "ebmlab.run", "-m", *args, "hydra/launcher=local"]
    cmd += ["logger=none", "progress=false", f"hydra.sweep.dir={sweep}"]
    launcher = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = launcher.communicate(timeout=600)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    job_err = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.err"))
    job_out = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.out"))
    assert "stopped at step" in job_err and "with a checkpoint" in job_err, job_err
    assert launcher.returncode == 0, stderr
    assert "Sweep: 1 of 1 jobs succeeded." in stderr
    (run_dir,) = [d for d in sweep.glob("*/") if (d / "results.json").exists()]
    stopped_at = int(job_err.split("stopped at step ")[1].split()[0])
    assert stopped_at == 1234  # the step boundary right after the signal
    assert "Requeued job" in job_out and job_out.count("Starting with JobEnvironment") == 2
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(100, 4001, 100))  # each step logged once
    reference = run_cli(args, tmp_path / "reference").results
    resumed = json.loads((run_dir / "results.json").read_text())["metrics"]
    assert {k: v for k, v in resumed.items() if k not in TIME_KEYS} == {
        k: v for k, v in reference.items() if k not in TIME_KEYS
    }


@pytest.fixture(scope="module")
def hydra_conf():
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        yield
    GlobalHydra.instance().clear()


def _launcher(overrides: list[str]):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # implicit schema matching is deprecated in Hydra 1.1
        return compose("config", overrides=overrides, return_hydra_config=True).hydra.launcher


@pytest.mark.parametrize("name", ["local", "slurm", "slurm_cpu"])
def test_launchers_are_ebmlab_plugins_hydra_accepts(hydra_conf, name):
    from hydra.core.plugins import Plugins

    from hydra_plugins.ebmlab_launchers import launchers

    target = _launcher([f"hydra/launcher={name}"])._target_
    assert target.startswith("hydra_plugins.ebmlab_launchers.launchers.")
    Plugins.instance()  # scans hydra_plugins: our classes must be found there
    assert target in Plugins.instance().class_name_to_class
    assert issubclass(Plugins.instance().class_name_to_class[target], launchers._FailLoudly)


def test_slurm_cpu_preset_requests_no_gpu(hydra_conf):
    gpu, cpu = _launcher(["hydra/launcher=slurm"]), _launcher(["hydra/launcher=slurm_cpu"])
    assert gpu.gpus_per_node == 1 and cpu.gpus_per_node == 0
    assert cpu.gres is None and cpu.gpus_per_task is None and cpu.cpus_per_task >= 1
    for key in ("max_num_timeout", "signal_delay_s", "timeout_min"):  # requeue settings kept
        assert cpu[key] == gpu[key], key


def test_site_file_on_the_search_path_sets_partition_account_setup(hydra_conf, tmp_path):
    site = tmp_path / "site_conf" / "hydra" / "launcher"
    (site / "site").mkdir(parents=True)
    (site / "site" / "default.yaml").write_text(
        "partition: gpu_p\naccount: proj42\nsetup: [module load cuda]\ngpus_per_node: 4\n"
    )
    searchpath = f"hydra.searchpath=[file://{tmp_path / 'site_conf'}]"
    gpu = _launcher(["hydra/launcher=slurm", searchpath])
    cpu = _launcher(["hydra/launcher=slurm_cpu", searchpath])
    assert (gpu.partition, gpu.account, list(gpu.setup), gpu.gpus_per_node) == (
        "gpu_p",
        "proj42",
        ["module load cuda"],
        4,
    )
    assert (cpu.partition, cpu.account, list(cpu.setup)) == (gpu.partition, "proj42", gpu.setup)
    assert cpu.gpus_per_node == 0  # the CPU preset's resources win over the site file
    (site / "site_cpu").mkdir()
    (site / "site_cpu" / "default.yaml").write_text("partition: cpu_p\n")
    cpu = _launcher(["hydra/launcher=slurm_cpu", searchpath])
    assert (cpu.partition, cpu.account) == ("cpu_p", "proj42")
    assert _launcher(["hydra/launcher=slurm", searchpath]).partition == "gpu_p"
    assert _launcher(["hydra/launcher=slurm"]).partition is None  # no site file: none set


def test_site_example_holds_only_slurm_launcher_keys():
    import yaml
    from hydra_plugins.hydra_submitit_launcher.config import SlurmQueueConf
    from omegaconf import OmegaConf

    example = yaml.safe_load((REPO / "conf/hydra/launcher/site.yaml.example").read_text())
    assert set(example) <= set(OmegaConf.structured(SlurmQueueConf).keys())
    assert {"partition", "account", "setup"} <= set(example)


def _job_with_status(run_dir: Path, code: int):
    """An ebmlab launcher whose job (the plugin's ``__call__``) records exit ``code``."""
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import OmegaConf

    from hydra_plugins.ebmlab_launchers import launchers

    class PluginJob:
        def __call__(self, *args):
            status = {"exit_code": code, "message": "held by another process"}
            (run_dir / "status.json").write_text(json.dumps(status))
            ret = JobReturn()
            ret.hydra_cfg = OmegaConf.create({"hydra": {"runtime": {"output_dir": str(run_dir)}}})
            ret.status, ret.return_value = JobStatus.COMPLETED, None
            return ret

    class Launcher(launchers._FailLoudly, PluginJob):
        pass

    return Launcher()


def test_job_side_raises_when_its_run_failed(tmp_path):
    """Inside a submitit job a run recorded as failed raises, so submitit records an error
    (and SLURM's state is FAILED); a run recorded as ok returns its JobReturn."""
    from hydra_plugins.ebmlab_launchers import launchers

    before = signal.getsignal(signal.SIGUSR2)
    with pytest.raises(launchers.SweepJobFailed, match=r"exit 3: held by another process"):
        _job_with_status(tmp_path, 3)([], "hydra.sweep.dir", 0, "id", {})
    assert _job_with_status(tmp_path, 0)([], "hydra.sweep.dir", 0, "id", {}).return_value is None
    assert signal.getsignal(signal.SIGUSR2) == before  # submitit's handler is put back


def test_job_stopped_by_sigterm_ends_as_a_resumable_failure(tmp_path):
    """A SIGTERM (scancel, a preemption with no user signal) stops the run with a checkpoint;
    the job then fails with its stop code, and the sweep's summary reads it from the error
    submitit recorded (a stopped run leaves no status.json)."""
    from ebmlab.core import signals as stops
    from hydra_plugins.ebmlab_launchers import launchers

    class PluginJob:
        def __call__(self, *args):
            raise stops.RunStopped(signal.SIGTERM, 12)

    class Launcher(launchers._FailLoudly, PluginJob):
        pass

    with pytest.raises(launchers.SweepJobFailed) as caught:
        Launcher()([], "hydra.sweep.dir", 0, "id", {})
    assert str(caught.value) == (
        "exit 143: stopped at step 12 by SIGTERM; rerun the same command to resume"
    )
    traceback = f"Traceback (most recent call last):\n  ...\n{caught.exconly()}"
    job = type("Job", (), {"exception": lambda self: traceback})()
    assert launchers._status_from_exception(job) == (
        143,
        "stopped at step 12 by SIGTERM; rerun the same command to resume",
    )


def test_a_damaged_status_file_is_a_failed_job_naming_the_file(tmp_path):
    """A truncated status.json is named as damaged (exit 3), not taken for "no outcome"."""
    from hydra_plugins.ebmlab_launchers import launchers

    (tmp_path / "status.json").write_text('{"exit_code": 2, "mess')
    code, message = launchers.read_status(tmp_path)
    assert code == 3 and "status.json" in message and "damaged" in message
    (tmp_path / "status.json").write_text(json.dumps({"exit_code": 2, "message": "bad key"}))
    assert launchers.read_status(tmp_path) == (2, "bad key")
    assert launchers.read_status(tmp_path / "absent") is None
