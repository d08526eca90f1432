"""What a task gets from the runner: config, run directory, device, RNG, logging, checkpoints."""

from __future__ import annotations

import json
import os
import platform
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm

from ebmlab.utils.config import build
from ebmlab.utils.jsonio import CorruptFileError
from ebmlab.utils.logging import MetricLogger
from ebmlab.utils.provenance import code_version
from ebmlab.utils.seeding import restore_generator
from ebmlab.utils.workspace import Workspace, atomic_write_text

FAULT_ENV = "EBMLAB_FAULT_KILL_AT_STEP"  # test hook: signal the process after this step
FAULT_SIGNAL_ENV = "EBMLAB_FAULT_SIGNAL"  # which signal (default SIGKILL), e.g. SIGUSR2


def _cpu_and_wall() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def hardware_string(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


@dataclass
class RunContext:
    cfg: DictConfig
    run_dir: Path
    device: torch.device
    generator: torch.Generator
    logger: MetricLogger
    workspace: Workspace
    scale: str
    choices: dict
    _t0: float = field(default_factory=time.perf_counter)
    _cpu_from: tuple[float, float] = field(default_factory=_cpu_and_wall)
    _cpu_before: tuple[float, float] = (0.0, 0.0)  # (CPU s per thread, wall s) of earlier processes
    _elapsed_before: float = 0.0
    _paused_at: float | None = None
    last_good_step: int | None = None  # step of the newest checkpoint written or loaded
    totals: Any = None  # the loop's Totals (per-step sums), set by run_task
    n_steps: int | None = None  # the run's length in steps, set by run_task (for progress.json)
    warnings: list[str] = field(default_factory=list)  # finite but suspect numbers (core.health)
    # the commit this process's code came from, read when it starts (a commit made while it runs
    # is not its code), and those of the earlier processes of a resumed run (from the checkpoint)
    code: str | None = field(default_factory=code_version)
    config_hash: str | None = None  # the run's identity (run_config.json), kept in its checkpoints
    _code_before: list = field(default_factory=list)

    # ---- components -------------------------------------------------------------------
    def has(self, group: str) -> bool:
        node = self.cfg.get(group)
        return isinstance(node, DictConfig) and "_target_" in node

    def build(self, group: str, **extra):
        """Validate and instantiate a config group (``model``, ``sampler``, ...)."""
        return build(self.cfg[group], group, **extra)

    # ---- time -------------------------------------------------------------------------
    def start_clock(self) -> None:
        """Start timing compute (call after data preparation, before loading a checkpoint)."""
        self._t0 = time.perf_counter()
        self._cpu_from = _cpu_and_wall()

    def _cpu_totals(self) -> tuple[float, float]:
        """(CPU seconds per torch thread, wall seconds) since the clock started, summed over
        the processes of a resumed run up to their last checkpoint."""
        cpu0, wall0 = self._cpu_from
        cpu, wall = _cpu_and_wall()
        before_cpu, before_wall = self._cpu_before
        return before_cpu + (cpu - cpu0) / torch.get_num_threads(), before_wall + wall - wall0

    def cpu_share(self) -> float:
        """CPU seconds the run used, per wall second and per torch thread, over all its
        processes: about 1 when its threads had cores to themselves, less when the cores
        were shared (3 single-thread runs on 2 cores: about 0.67)."""
        cpu, wall = self._cpu_totals()
        return cpu / max(wall, 1e-9)

    def _now(self) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def elapsed(self) -> float:
        """Wall seconds of compute in this run, summed over resumes (paused time excluded)."""
        now = self._paused_at if self._paused_at is not None else self._now()
        return self._elapsed_before + now - self._t0

    @contextmanager
    def clock_paused(self):
        """Exclude the enclosed work (evaluation, checkpointing) from ``elapsed()``."""
        if self._paused_at is not None:  # nested: already paused
            yield
            return
        self._paused_at = self._now()
        try:
            yield
        finally:
            self._t0 += time.perf_counter() - self._paused_at
            self._paused_at = None

    # ---- progress ---------------------------------------------------------------------
    def progress(self, total: int, initial: int = 0, desc: str = ""):
        return tqdm(
            total=total,
            initial=initial,
            desc=desc,
            disable=not self.cfg.get("progress", True),
            dynamic_ncols=True,
            mininterval=0.5,
            leave=True,
        )

    # ---- checkpoints ------------------------------------------------------------------
    def save_checkpoint(self, state: dict, step: int, name: str = "last") -> None:
        """Atomic checkpoint with the run's RNG, metrics-file offset and elapsed time."""
        full = dict(state)
        full["_run"] = {
            "step": int(step),
            "generator": self.generator.get_state(),
            "device": self.device.type,
            "metrics_offset": self.logger.offset,
            "elapsed": self.elapsed(),
            "code": self.code_history(),
            "cpu_seconds": self._cpu_totals(),
            "config_hash": self.config_hash,
        }
        self.workspace.save(full, name)
        if name == "last" and self.n_steps is not None:
            self.write_progress(step)

    def write_progress(self, step: int) -> None:
        """``progress.json`` beside the checkpoint: the step it holds of ``n_steps``, the compute
        seconds so far and when (UTC), so that a report can say how far an unfinished run got."""
        info = {
            "step": int(step),
            "n_steps": int(self.n_steps),
            "elapsed": round(self.elapsed(), 1),
            "updated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        if self.config_hash is not None:
            info["config_hash"] = self.config_hash
        atomic_write_text(self.run_dir / "progress.json", json.dumps(info))

    def load_file(self, name: str = "last") -> dict | None:
        """Checkpoint ``name`` of this run (None when absent), its tensors on the run's device."""
        return self.workspace.load(name, self.device)

    def code_history(self) -> list:
        """The distinct commits the run's processes ran under, oldest first (this one last)."""
        return list(dict.fromkeys([*self._code_before, self.code]))

    def load_checkpoint(self, name: str = "last") -> dict | None:
        """Load a checkpoint onto the run's device (wherever it was written: a GPU run resumes
        on a CPU and the other way round) and restore the run's RNG, metrics file and clock."""
        state = self.load_file(name)
        if state is None:
            if name == "last":  # a restart with no checkpoint: earlier processes' rows go
                self.logger.keep_only_this_process()
            return None
        run = state["_run"]
        recorded = run.get("config_hash")
        if recorded is not None and self.config_hash is not None and recorded != self.config_hash:
            raise CorruptFileError(
                f"{self.run_dir / 'run_config.json'} does not match the run's checkpoint (config "
                f"hash {self.config_hash} there, {recorded} in {self.workspace.current(name)}): "
                "the file was changed after the run started; restore it, or pass fresh=true to "
                "rerun from scratch"
            )
        if not restore_generator(self.generator, run["generator"]):
            print(
                f"ebmlab: resuming on {self.device.type} a checkpoint written on "
                f"{run.get('device', 'another device')}: their random generators differ, so the "
                "draws from here on come from a generator seeded from the checkpoint's "
                "(reproducible, but not the draws the first device would have made)",
                file=sys.stderr,
            )
        self.logger.truncate_to(int(run["metrics_offset"]))
        self._elapsed_before = float(run["elapsed"])
        self._t0 = time.perf_counter()
        self._paused_at = None
        # checkpoints written before cpu_seconds was kept: this process's share only
        self._cpu_before = tuple(run.get("cpu_seconds", (0.0, 0.0)))
        self._code_before = list(run.get("code", []))
        self._cpu_from = _cpu_and_wall()
        self.last_good_step = int(run["step"])
        return state

    def resume(self, **objects) -> dict | None:
        """Load the last checkpoint, if any: restore the run (see ``load_checkpoint``) and
        call ``obj.load_state_dict(ckpt[name])`` for every ``name=obj`` given (None skipped).
        Returns the checkpoint (its ``["_run"]["step"]`` is where to continue) or None."""
        state = self.load_checkpoint()
        if state is not None:
            for name, obj in objects.items():
                if obj is not None:
                    obj.load_state_dict(state[name])
        return state

    def maybe_fault(self, step: int) -> None:
        """Fault injection for the resume and signal tests: after ``step`` (env var), send this
        process SIGKILL (or the signal named by ``EBMLAB_FAULT_SIGNAL``), once per run dir."""
        at = os.environ.get(FAULT_ENV)
        if at is not None and int(at) == step and not (self.run_dir / ".fault_done").exists():
            (self.run_dir / ".fault_done").touch()
            os.kill(os.getpid(), getattr(signal, os.environ.get(FAULT_SIGNAL_ENV, "SIGKILL")))

    # ---- outputs ----------------------------------------------------------------------
    def log(self, metrics: dict, step: int) -> None:
        self.logger.log(metrics, step)

    def save_figure(self, fig, name: str, step: int = 0) -> Path:
        from ebmlab.utils.plotting import save

        path = save(fig, self.run_dir / "figures" / f"{name}.png")
        self.logger.log_figure(name, path, step)
        return path

    def save_figures(self, figs: dict, step: int = 0) -> None:
        """:meth:`save_figure` of each figure in ``figs`` (name -> figure)."""
        for name, fig in figs.items():
            self.save_figure(fig, name, step)

    def write_results(self, results: dict) -> Path:
        meta = {
            "task": self.choices.get("task"),
            "scale": self.scale,
            "hardware": hardware_string(self.device),
            "code": self.code,
            "seed": int(self.cfg.seed),
            "choices": self.choices,
        }
        if self.config_hash is not None:  # what it ran: run_config.json's hash, checked by reports
            meta["config_hash"] = self.config_hash
        if self.device.type == "cpu":
            meta.update(threads=torch.get_num_threads(), cpu_share=round(self.cpu_share(), 3))
        history = self.code_history()
        if len(history) > 1:  # resumed under other code: every commit it ran under, in order
            meta["code_history"] = history
        out = {**meta, "metrics": results}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        path = self.run_dir / "results.json"
        atomic_write_text(path, json.dumps(out, indent=2, default=float, allow_nan=False))
        self.logger.summary(results)
        return path

    def config_dict(self) -> dict:
        return OmegaConf.to_container(self.cfg, resolve=True)
