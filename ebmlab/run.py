"""The single entry point: compose -> validate -> build parts -> loop -> results.

    python -m ebmlab.run experiment=dlp/fig3_ising_sampling scale=smoke
    python -m ebmlab.run -m experiment=dlp/fig3_ising_sampling        # the figure's sweep

Exit codes (docs/runs.md): 0 success; 1 the run diverged or failed; 2 configuration or
input error (one message naming the key, before any compute); 3 the run directory cannot be
used (another process holds it, a file in it is damaged, it is read-only, or the disk is
full); 128 + N stopped by signal N at a step boundary, checkpointed (143 SIGTERM, 130 SIGINT /
Ctrl-C), rerun the same command to resume. In a ``-m`` sweep a failing job is recorded in its
directory (``status.json``) and the sweep goes on; the sweep prints a summary and exits with
the worst job's code. A signal stops the whole sweep (summary, then its code).
"""

from __future__ import annotations

import errno
import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ebmlab.configs import config_dir, group_options, search_dirs
from ebmlab.core import graphs
from ebmlab.core.context import RunContext
from ebmlab.core.health import Health
from ebmlab.core.loop import LoopTask, check_requirements, run_task
from ebmlab.core.signals import (
    RunStopped,
    exit_code,
    hold_lock,
    install_stop_handlers,
    release_lock,
    report_stop,
    stop_requested,
)
from ebmlab.errors import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_RUNDIR,
    CheckpointError,
    ConfigError,
    DivergenceError,
)
from ebmlab.utils import rundir
from ebmlab.utils.cache import REBUILD_ENV
from ebmlab.utils.config import (
    build,
    check_state_space,
    reject_when,
    run_choices,
    validate_node,
)
from ebmlab.utils.jsonio import CorruptFileError
from ebmlab.utils.logging import MetricLogger, run_labels, wandb_config
from ebmlab.utils.memory import check_memory
from ebmlab.utils.overrides import check_keys, searchpath_entries
from ebmlab.utils.seeding import make_generator, resolve_device, seed_everything
from ebmlab.utils.workspace import Workspace, atomic_write_text

CONF_DIR = config_dir()  # conf/ of the checkout, or ebmlab/conf of an installed wheel
GROUPS = ("task", "model", "dataset", "sampler", "learner", "logger")
_STATE: dict = {"task_started": False}


class RunFailure(Exception):
    """A job ended without results: ``code`` is its exit code, ``message`` one line;
    ``record`` False when the job refused a directory that is not its own (nothing written)."""

    def __init__(self, code: int, message: str, record: bool = True):
        self.code, self.message, self.record = code, message, record
        super().__init__(message)


def _options(group: str, dirs: list[Path] | None = None) -> list[str]:
    return group_options(group, dirs)


def _config_exit(msg: str) -> None:
    print(f"ebmlab: configuration error: {msg}", file=sys.stderr)
    sys.exit(EXIT_CONFIG)


def precheck_overrides(argv: list[str]) -> None:
    """Reject unknown config-group options with the list of allowed ones, and unknown keys
    with the keys nearby (exit 2). Options in a ``hydra.searchpath`` folder count."""
    dirs = search_dirs(searchpath_entries(argv))
    for arg in argv:
        if "=" not in arg or arg.startswith("-"):
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if not any((d / key).is_dir() for d in dirs) or "." in key:
            continue
        allowed = _options(key, dirs)
        for choice in value.split(","):
            choice = choice.strip()
            if choice in ("null", "") and key in GROUPS:
                _config_exit(
                    f"{key}={choice or 'null'}: a {key} cannot be removed on the command line "
                    f"(an experiment that needs none leaves it out); allowed: {', '.join(allowed)}"
                )
            if choice in ("null", "") or choice.startswith(("range(", "choice(", "glob(")):
                continue
            if choice not in allowed:
                _config_exit(
                    f"{key}={choice}: unknown option; allowed: {', '.join(allowed) or '(none)'}"
                )
    try:
        check_keys(argv, dirs)
    except ConfigError as e:
        _config_exit(str(e))


def _check_device(name: str):
    import torch

    if name != "auto" and not (name == "cpu" or name.startswith("cuda")):
        raise ConfigError("device", f"must be auto, cpu, cuda or cuda:N (got {name!r})")
    device = resolve_device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", f"{name} requested but CUDA is not available; use auto or cpu")
    if device.type == "cuda":  # the same kernels in every process: resumes continue exactly
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    return device


def _print_results(results: dict, run_dir: Path, note: str = "", warnings=()) -> None:
    print(f"\nResults{note}:")
    for k, v in results.items():
        if isinstance(v, float):
            print(f"  {k:<32} {v:.6g}")
        elif isinstance(v, (int, str, bool)):
            print(f"  {k:<32} {v}")
    for w in warnings:
        print(f"Warning (also in results.json): {w}")
    print(f"Run directory: {run_dir}")


def _validate(cfg: DictConfig, choices: dict) -> None:
    reject_when(cfg)
    for group in GROUPS:
        node = cfg.get(group)
        if isinstance(node, DictConfig) and "_target_" in node:
            validate_node(node, group)
    check_state_space(cfg, choices)
    Health.from_config(cfg.get("health"))  # bad thresholds fail before the run directory is taken
    if not isinstance(cfg.get("task"), DictConfig):
        raise ConfigError("task", f"no task selected; allowed: {', '.join(_options('task'))}")
    if not isinstance(cfg.seed, int) or cfg.seed < 0:
        raise ConfigError("seed", f"must be a non-negative integer (got {cfg.seed!r})")


@contextmanager
def _released_on_second_signal(lock: Path):
    hold_lock(lock)
    try:
        yield
    finally:
        release_lock(lock)


def _write_hydra_files(run_dir: Path, composed_yaml: str) -> None:
    """The files Hydra would have written into ``.hydra/`` (``hydra.output_subdir`` is null so
    that a refused command cannot rewrite them), written once the run directory is accepted."""
    hc = HydraConfig.get()
    node = OmegaConf.create({"hydra": OmegaConf.to_container(hc, resolve=False)})
    out = run_dir / ".hydra"
    atomic_write_text(out / "config.yaml", composed_yaml)
    atomic_write_text(out / "hydra.yaml", OmegaConf.to_yaml(node))
    atomic_write_text(out / "overrides.yaml", OmegaConf.to_yaml(list(hc.overrides.task)))


def _run(cfg: DictConfig, run_dir: Path, choices: dict) -> tuple[dict, str]:
    """Validate, take the run directory, run the task. Returns (results, main metric)."""
    composed_yaml = OmegaConf.to_yaml(cfg)  # as composed: what it runs, like Hydra saves it
    _validate(cfg, choices)
    device = _check_device(str(cfg.device))
    graphs.configure(cfg.get("compile", "graph"))  # CUDA graphs of chain blocks (core.graphs)
    task = build(cfg.task, "task")
    if not isinstance(task, LoopTask):
        raise ConfigError("task._target_", f"{cfg.task._target_} is not a LoopTask")
    check_requirements(task, cfg, choices)  # what the task needs of model, dataset, ...
    check_memory(task.memory_estimate(cfg), device)
    identity = rundir.identity(cfg)
    with rundir.lock(run_dir), _released_on_second_signal(run_dir / ".lock"):
        if cfg.get("fresh", False):
            rundir.clear(run_dir)
            os.environ[REBUILD_ENV] = "1"  # and rebuild the generated-data caches it reads
        try:
            done = rundir.claim(run_dir, identity)
        except ConfigError as e:  # another configuration's directory: left as it is
            raise RunFailure(EXIT_CONFIG, f"configuration error: {e}", record=False) from None
        if done is not None:
            _print_results(done, run_dir, " (already complete; pass fresh=true to rerun)")
            return done, task.main_metric
        _write_hydra_files(run_dir, composed_yaml)
        seed_everything(int(cfg.seed))
        logger_settings = build(cfg.logger, "logger") if cfg.get("logger") else None
        scale = str(choices.get("scale", "paper"))
        run_name, tags = run_labels(str(cfg.name), scale, choices, run_dir)
        logger = MetricLogger(
            run_dir,
            logger_settings,
            wandb_config(OmegaConf.to_container(cfg, resolve=True), choices, scale),
            run_name=run_name,
            tags=tags,
        )
        ctx = RunContext(
            cfg=cfg,
            run_dir=run_dir,
            device=device,
            generator=make_generator(int(cfg.seed), device),
            logger=logger,
            workspace=Workspace(run_dir, device),
            scale=str(choices.get("scale", "paper")),
            choices=choices,
        )
        ctx.config_hash = rundir.recorded_hash(run_dir)  # an old-layout run keeps its own
        code = EXIT_FAILED
        try:
            results = run_task(task, ctx)
            ctx.write_results(results)
            code = EXIT_OK
        except DivergenceError as e:
            raise RunFailure(EXIT_FAILED, f"{e}; {rundir.kept_checkpoint(ctx)}") from None
        except RunStopped as stop:
            code = exit_code(stop.signum)
            (run_dir / "status.json").unlink(missing_ok=True)  # unfinished: no outcome yet
            raise
        finally:
            logger.finish(code)
    _print_results(results, run_dir, warnings=ctx.warnings)
    return results, task.main_metric


def execute(cfg: DictConfig):
    """Run one job; in a sweep, record a failure and return instead of exiting."""
    _STATE["task_started"] = True
    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    choices = run_choices(hc.runtime.choices)
    sweep = hc.mode == RunMode.MULTIRUN
    _STATE["sweep"] = sweep
    if stop_requested() is not None:  # a signal between two jobs of a sweep
        raise RunStopped(stop_requested(), None)
    try:
        try:
            results, main = _run(cfg, run_dir, choices)
        except ConfigError as e:
            raise RunFailure(EXIT_CONFIG, f"configuration error: {e}") from None
        except FileNotFoundError as e:
            raise RunFailure(EXIT_CONFIG, f"configuration error: missing file: {e}") from None
        except rundir.RunDirError as e:  # another process's directory: left as it is
            raise RunFailure(EXIT_RUNDIR, str(e), record=False) from None
        except (CheckpointError, CorruptFileError) as e:
            raise RunFailure(EXIT_RUNDIR, str(e)) from None
        except OSError as e:
            if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT):
                what = (
                    "the disk is full"
                    if e.errno in (errno.ENOSPC, errno.EDQUOT)
                    else ("it is not writable (read-only or no permission)")
                )
                raise RunFailure(
                    EXIT_RUNDIR, f"cannot write the run directory {run_dir}: {what} ({e})"
                ) from None
            raise
    except RunFailure as f:
        print(f"ebmlab: {f.message}", file=sys.stderr)
        if not sweep:
            sys.exit(f.code)
        if f.record:
            rundir.write_status(run_dir, f.code, f.message, choices)
        rundir.SWEEP_JOBS.append((run_dir, f.code, f.message))
        return None
    except RunStopped as stop:
        if sweep:
            rundir.SWEEP_JOBS.append((run_dir, exit_code(stop.signum), str(stop)))
        raise
    if sweep:
        rundir.write_status(run_dir, EXIT_OK, "ok", choices)
        rundir.SWEEP_JOBS.append((run_dir, EXIT_OK, "ok"))
    return results.get(main)


def _check_writable(path: Path) -> None:
    """Exit 3 with one line when the output directory cannot be created or written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        what = (
            "the disk is full"
            if e.errno in (errno.ENOSPC, errno.EDQUOT)
            else "it is not writable (read-only or no permission)"
        )
        print(f"ebmlab: cannot write the output directory {path}: {what} ({e})", file=sys.stderr)
        sys.exit(EXIT_RUNDIR)


class SweepSummary(Callback):
    """Checks the output directory before anything is written, and prints one line per
    failed job at the end of a ``-m`` sweep."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        HydraConfig.instance().set_config(config)  # the dir names ${hydra:...} choices
        _check_writable(Path(config.hydra.run.dir))

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        HydraConfig.instance().set_config(config)
        _check_writable(Path(config.hydra.sweep.dir))

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        print_sweep_summary()


def print_sweep_summary(stopped: RunStopped | None = None) -> None:
    """One line per failed (or stopped) job of this process's sweep, after a count."""
    jobs = rundir.SWEEP_JOBS
    failed = [j for j in jobs if j[1] != EXIT_OK]
    if not jobs:
        return
    print(f"\nSweep: {len(jobs) - len(failed)} of {len(jobs)} jobs succeeded.", file=sys.stderr)
    if stopped is not None:
        print(f"  Sweep {stopped} (finished jobs are kept).", file=sys.stderr)
    for run_dir, code, msg in failed:
        what = "STOPPED" if stopped is not None and code == exit_code(stopped.signum) else "FAILED"
        print(f"  {what} (exit {code}) {run_dir}: {msg}", file=sys.stderr)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig):
    return execute(cfg)


def cli() -> None:
    if sys.argv[1:2] == ["report"]:  # `ebmlab report ...` is `ebmlab-report ...`
        from ebmlab.report.__main__ import main as report

        report(sys.argv[2:])
        return
    install_stop_handlers()  # SIGTERM, SIGINT: stop at the next step boundary (core.signals)
    precheck_overrides(sys.argv[1:])
    try:
        main()
    except RunStopped as stop:
        if _STATE.get("sweep"):
            print_sweep_summary(stop)
        else:
            report_stop(stop)
        sys.exit(exit_code(stop.signum))
    except KeyboardInterrupt:  # a Ctrl-C that reached Python before the handlers took over
        report_stop(RunStopped(signal.SIGINT))
        sys.exit(exit_code(signal.SIGINT))
    except SystemExit as e:
        # Hydra exits 1 on composition errors (bad key, bad syntax) before our task starts.
        if e.code == 1 and not _STATE["task_started"]:
            sys.exit(EXIT_CONFIG)
        raise
    worst = max((code for _, code, _ in rundir.SWEEP_JOBS), default=EXIT_OK)
    if worst != EXIT_OK:
        sys.exit(worst)


if __name__ == "__main__":
    cli()
