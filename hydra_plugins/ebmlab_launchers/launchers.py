"""Submitit launchers (``hydra/launcher=local`` and ``slurm``) that fail loudly and
checkpoint on the scheduler's signal.

The plugin's own launchers report a job that ended with a non-zero ebmlab exit code as
"Job completed successfully" (ebmlab records a sweep job's failure in ``status.json`` and
returns), and they stop collecting results at the first job that raised. These
subclasses change three things:

- In the job: after the run, ``status.json`` is read; a non-zero exit code raises
  :class:`SweepJobFailed`, so submitit's record of the job is an error and SLURM's state
  is FAILED.
- In the launching process: every job is waited for; each job's outcome is read from its
  ``status.json`` into ``rundir.SWEEP_JOBS``, so ``ebmlab.run`` prints the same summary as
  under the basic launcher (one line per failed job) and exits with the worst code.
- On the pre-timeout / preemption signal (submitit's ``USR2``, sent ``signal_delay_s``
  before the time limit) the run stops at the next step boundary with a checkpoint
  (``ebmlab.core.signals``), then submitit's own handler requeues the job, which resumes
  from that checkpoint.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from hydra_plugins.hydra_submitit_launcher import submitit_launcher as plugin
from omegaconf import OmegaConf, open_dict

from ebmlab.errors import EXIT_FAILED, EXIT_OK, EXIT_RUNDIR
from ebmlab.utils import rundir
from ebmlab.utils.jsonio import CorruptFileError, read_json


class SweepJobFailed(RuntimeError):
    """Raised inside a submitit job whose run failed, so the scheduler records a failure."""


def read_status(run_dir: Path) -> tuple[int, str] | None:
    """(exit code, message) from a job's ``status.json``; None when it has none."""
    try:
        status = read_json(run_dir / "status.json", "the sweep job's outcome")
        return int(status["exit_code"]), str(status.get("message", ""))
    except CorruptFileError as e:
        return EXIT_RUNDIR, str(e)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _preempt_signal() -> signal.Signals:
    import submitit

    return submitit.JobEnvironment._usr_sig()


def _requeue(submitit_handler, sig: int, step: int | None) -> None:
    """Hand the signal to submitit's handler, which pickles this job again (``checkpoint``)
    and requeues it (SLURM: ``scontrol requeue``; local: the controller restarts it), then
    exits; the requeued job resumes from the checkpoint the stop wrote."""
    where = f" at step {step}" if step is not None else ""
    print(
        f"ebmlab: {signal.Signals(sig).name} (pre-timeout or preemption): stopped{where} with a "
        "checkpoint; requeueing the job, which resumes from it",
        file=sys.stderr,
        flush=True,
    )
    if callable(submitit_handler):
        submitit_handler(sig, None)


def _status_from_exception(job) -> tuple[int, str] | None:
    """(exit code, message) of a job that raised :class:`SweepJobFailed` ("exit N: ...")
    but left no ``status.json`` (a run stopped by a signal has no outcome yet)."""
    try:
        error = job.exception()
    except Exception:  # noqa: BLE001 - no result at all: reported as such
        return None
    lines = [ln for ln in str(error or "").splitlines() if "SweepJobFailed: exit " in ln]
    if not lines:
        return None
    m = re.search(r"SweepJobFailed: exit (\d+): (.*)$", lines[-1])
    return (int(m.group(1)), m.group(2)) if m else None


class _FailLoudly:
    """Mixed into the plugin's launchers (job side: ``__call__``; launching side: ``launch``)."""

    def __call__(
        self,
        sweep_overrides: list[str],
        job_dir_key: str,
        job_num: int,
        job_id: str,
        singleton_state: dict,
    ) -> JobReturn:
        from ebmlab.core import signals as stops

        sig = _preempt_signal()
        requeue = signal.getsignal(sig)  # submitit's checkpoint_and_try_requeue
        # the pre-timeout signal, and a SIGTERM (scancel, preemption) or SIGINT, stop the run
        # at its next step boundary with a checkpoint (ebmlab.core.signals)
        stopping = (sig, signal.SIGTERM, signal.SIGINT)
        before = {s: signal.getsignal(s) for s in stopping}
        stops.install_stop_handlers(stopping)
        try:
            ret = super().__call__(  # type: ignore[misc]
                sweep_overrides, job_dir_key, job_num, job_id, singleton_state
            )
        except stops.RunStopped as e:
            if e.signum == sig:  # checkpointed: requeue (submitit exits this process)
                _requeue(requeue, sig, e.step)
            code = stops.exit_code(e.signum)
            raise SweepJobFailed(f"exit {code}: {e}") from None  # the job ends, resumable
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)
        run_dir = Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
        if ret.status == JobStatus.FAILED:
            raise ret._return_value  # an unexpected error: its traceback goes to submitit
        if stops.stop_requested() == sig and not (run_dir / "results.json").exists():
            _requeue(requeue, sig, None)
        status = read_status(run_dir)
        if status is not None and status[0] != EXIT_OK:
            raise SweepJobFailed(f"exit {status[0]}: {status[1]} ({run_dir})")
        return ret

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        """Submit the jobs as the plugin does, then wait for every one and record each
        outcome (a failed job raises nothing here; ``ebmlab.run`` prints the summary)."""
        import submitit
        from hydra.core.singleton import Singleton

        params = dict(self.params)
        init_keys = {"submitit_folder", "max_num_timeout"}
        executor = submitit.AutoExecutor(
            cluster=self._EXECUTOR,
            folder=params["submitit_folder"],
            **{f"{self._EXECUTOR}_max_num_timeout": params["max_num_timeout"]}
            if "max_num_timeout" in params
            else {},
        )
        base = set(OmegaConf.structured(plugin.BaseQueueConf).keys())
        executor.update_parameters(
            **{
                k if k in base else f"{self._EXECUTOR}_{k}": v
                for k, v in params.items()
                if k not in init_keys
            }
        )
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in self.config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(self.config.hydra.sweep.mode), 8))
        state = Singleton.get_state()
        job_params = [
            (
                list(overrides),
                "hydra.sweep.dir",
                initial_job_idx + i,
                f"job_id_for_{initial_job_idx + i}",
                state,
            )
            for i, overrides in enumerate(job_overrides)
        ]
        jobs = executor.map_array(self, *zip(*job_params))
        print(
            f"ebmlab: {len(jobs)} job{'s' if len(jobs) != 1 else ''} submitted (submitit "
            f"'{self._EXECUTOR}'); their logs are in "
            f"{jobs[0].paths.folder.parent if jobs else params['submitit_folder']}",
            file=sys.stderr,
        )
        returns: list[JobReturn] = []
        for (overrides, _, num, _, _), job in zip(job_params, jobs):
            try:
                ret = job.results()[0]
            except Exception:  # noqa: BLE001 - a failed job: its outcome is read below
                ret = None
            if isinstance(ret, JobReturn):
                returns.append(ret)
                run_dir = Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
            else:
                run_dir = self._job_dir(overrides, num, job.job_id)
            status = read_status(run_dir) if run_dir is not None else None
            if status is None:
                status = _status_from_exception(job)
            if status is None:
                code, message = (
                    EXIT_FAILED,
                    (
                        "the job ended without recording an outcome (no status.json; submitit "
                        f"state {job.state}); see {job.paths.stderr}"
                    ),
                )
            else:
                code, message = status
            rundir.SWEEP_JOBS.append((run_dir or job.paths.folder, code, message))
        return returns

    def _job_dir(self, overrides: list[str], job_num: int, job_id: str) -> Path | None:
        """The run directory a job wrote (as ``hydra.core.utils.run_job`` computes it)."""
        from hydra.core.hydra_config import HydraConfig

        try:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
            with open_dict(cfg.hydra.job):
                cfg.hydra.job.id = job_id
                cfg.hydra.job.num = job_num
            HydraConfig.instance().set_config(cfg)
            sweep_dir = Path(str(OmegaConf.select(cfg, "hydra.sweep.dir")))
            return sweep_dir / str(OmegaConf.select(cfg, "hydra.sweep.subdir"))
        except Exception:  # noqa: BLE001 - the summary still names the job by its log
            return None
        finally:
            HydraConfig.instance().set_config(self.config)


class LocalLauncher(_FailLoudly, plugin.LocalLauncher):
    """``hydra/launcher=local``: submitit's local executor (processes on this machine)."""


class SlurmLauncher(_FailLoudly, plugin.SlurmLauncher):
    """``hydra/launcher=slurm`` (and ``slurm_cpu``): jobs submitted to SLURM."""
