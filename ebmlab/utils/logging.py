"""Metric logging: ``metrics.jsonl`` in the run directory, mirrored to Weights & Biases.

Every scalar is logged with an explicit step. W&B is offline by default (no
network needed); ``logger=none`` disables it. ``finish()`` is always called
(run.py wraps the task in try/finally) so multirun jobs never merge.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path

from ebmlab.errors import check
from ebmlab.utils.workspace import atomic_write_text


class WandbLogger:
    """W&B settings (conf/logger/wandb.yaml)."""

    def __init__(
        self,
        project: str,
        mode: str,
        entity: str | None,
        group: str | None,
        tags: list[str],
    ):
        check(
            mode in ("offline", "online", "disabled"),
            "mode",
            f"must be one of offline, online, disabled (got {mode!r})",
        )
        self.project, self.mode, self.entity = project, mode, entity
        self.group, self.tags = group, list(tags)


class NoLogger:
    """``logger=none``: local files only."""

    mode = "disabled"


def _clean(metrics: dict) -> dict:
    out = {}
    for k, v in metrics.items():
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = str(v)
        out[k] = v
    return out


class MetricLogger:
    """Writes ``metrics.jsonl`` and mirrors to W&B when enabled.

    On resume, ``truncate_to(offset)`` drops the lines written after the
    checkpoint so a resumed run's file equals an uninterrupted one.
    """

    def __init__(
        self, run_dir: Path, settings: WandbLogger | NoLogger | None, config: dict, run_name: str
    ):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._wandb = None
        if settings is not None and settings.mode != "disabled":
            self._wandb = self._init_wandb(settings, config, run_name)

    def _init_wandb(self, s: WandbLogger, config: dict, run_name: str):
        os.environ.setdefault("WANDB_SILENT", "true")
        import wandb

        id_file = self.run_dir / "wandb_id.txt"
        if id_file.exists():
            run_id = id_file.read_text().strip()
        else:
            run_id = uuid.uuid4().hex[:12]
            atomic_write_text(id_file, run_id)
        return wandb.init(
            project=s.project,
            entity=s.entity,
            group=s.group,
            tags=s.tags,
            mode=s.mode,
            dir=str(self.run_dir),
            id=run_id,
            resume="allow",
            name=run_name,
            config=config,
            settings=wandb.Settings(console="off", x_disable_stats=True),
        )

    @property
    def offset(self) -> int:
        return self.path.stat().st_size

    def truncate_to(self, offset: int) -> None:
        with open(self.path, "r+b") as f:
            f.truncate(offset)

    def log(self, metrics: dict, step: int) -> None:
        row = _clean(metrics)
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": int(step), **row}) + "\n")
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if not isinstance(v, str)}, step=step)

    def log_figure(self, name: str, path: Path, step: int) -> None:
        if self._wandb is not None:
            import wandb

            self._wandb.log({name: wandb.Image(str(path))}, step=step)

    def summary(self, results: dict) -> None:
        if self._wandb is not None:
            for k, v in _clean(results).items():
                self._wandb.summary[k] = v

    def finish(self, exit_code: int = 0) -> None:
        if self._wandb is not None:
            self._wandb.finish(exit_code=exit_code)
            self._wandb = None


def read_metrics(path: Path) -> list[dict]:
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows
