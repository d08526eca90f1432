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
from ebmlab.utils.jsonio import corrupt
from ebmlab.utils.workspace import atomic_write_bytes, atomic_write_text

FIGURE_PREFIX = "figures/"  # W&B key prefix of the figures a run saves (figures/<name>.png)
LABEL_GROUPS = ("sampler", "model", "dataset")  # group choices that become W&B tags


def wandb_config(config: dict, choices: dict, scale: str) -> dict:
    """The run's resolved config for W&B, with what runs are compared by as plain values:
    ``scale`` (``smoke`` / ``paper``; the scale group's own node is empty) and ``choices``, the
    option chosen in each config group (``{sampler: dmala, model: ising_lattice, ...}``)."""
    out = dict(config)
    out["scale"] = scale
    out["choices"] = {k: v for k, v in choices.items() if v is not None}
    return out


def run_labels(name: str, scale: str, choices: dict, run_dir: Path) -> tuple[str, list[str]]:
    """(W&B run name, tags) of a run: the name is ``<name>/<scale>/<run directory>``
    (``dlp/fig3_ising_sampling/smoke/sampler=dmala``); the tags name the paper, experiment,
    scale, sampler, model and dataset (``paper:dlp``, ``sampler:dmala``, ...), those it has."""
    experiment = choices.get("experiment")
    tags = []
    if experiment:
        tags += [f"paper:{str(experiment).split('/')[0]}", f"experiment:{experiment}"]
    tags.append(f"scale:{scale}")
    tags += [f"{g}:{choices[g]}" for g in LABEL_GROUPS if choices.get(g)]
    return f"{name}/{scale}/{Path(run_dir).name}", [t[:64] for t in tags]  # W&B: 64 chars a tag


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
    checkpoint (``keep_only_this_process()`` all earlier lines when there is no
    checkpoint) so a resumed run's file equals an uninterrupted one. W&B cannot take a
    step back: the steps an earlier process already sent are not sent again.
    """

    def __init__(
        self,
        run_dir: Path,
        settings: WandbLogger | NoLogger | None,
        config: dict,
        run_name: str,
        tags: list[str] | tuple[str, ...] = (),
    ):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self._start_offset = self.path.stat().st_size  # what earlier processes wrote
        self._sent_to = -1  # the last step W&B already holds (sent by an earlier process)
        if self._start_offset:
            with open(self.path, "rb") as f:
                self._note_sent(f.read())
        self._wandb = None
        if settings is not None and settings.mode != "disabled":
            self._wandb = self._init_wandb(settings, config, run_name, list(tags))

    def _init_wandb(self, s: WandbLogger, config: dict, run_name: str, tags: list[str]):
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
            tags=list(dict.fromkeys([*tags, *s.tags])),
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
        """Cut the file back to ``offset`` bytes (a checkpoint's), dropping later rows."""
        with open(self.path, "rb") as f:
            f.seek(min(offset, self._start_offset))
            self._note_sent(f.read(max(0, self._start_offset - offset)))
        with open(self.path, "r+b") as f:
            f.truncate(offset)
        self._start_offset = min(self._start_offset, offset)

    def keep_only_this_process(self) -> None:
        """Drop the rows of earlier processes (a run restarted with no checkpoint to resume),
        keeping the rows this process wrote since it started."""
        if self._start_offset == 0:
            return
        data = self.path.read_bytes()
        self._note_sent(data[: self._start_offset])
        atomic_write_bytes(self.path, data[self._start_offset :])
        self._start_offset = 0

    def _note_sent(self, dropped: bytes) -> None:
        """Remember the last step of dropped rows: W&B holds them already."""
        for line in dropped.decode(errors="replace").splitlines():
            try:
                step = json.loads(line).get("step")
            except (ValueError, AttributeError):
                continue
            if isinstance(step, int):
                self._sent_to = max(self._sent_to, step)

    def log(self, metrics: dict, step: int) -> None:
        row = _clean(metrics)
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": int(step), **row}) + "\n")
        if self._wandb is not None and step > self._sent_to:
            self._wandb.log({k: v for k, v in row.items() if not isinstance(v, str)}, step=step)

    def log_figure(self, name: str, path: Path, step: int) -> None:
        """Mirror a saved figure to W&B under ``figures/<name>``: a key of its own, never a
        scalar's (an image logged under ``log_rmse`` would replace that series' last point)."""
        if self._wandb is not None:
            import wandb

            self._wandb.log({f"{FIGURE_PREFIX}{name}": wandb.Image(str(path))}, step=step)

    def summary(self, results: dict) -> None:
        if self._wandb is not None:
            for k, v in _clean(results).items():
                self._wandb.summary[k] = v

    def finish(self, exit_code: int = 0) -> None:
        if self._wandb is not None:
            self._wandb.finish(exit_code=exit_code)
            self._wandb = None


def read_metrics(path: Path) -> list[dict]:
    """The rows of a ``metrics.jsonl``. A last line cut off by a kill mid-write (no newline)
    is left out; a damaged line before it is a CorruptFileError naming the file and line."""
    path = Path(path)
    text = path.read_text(errors="replace")
    lines = text.split("\n")
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:  # the torn last line of a killed writer
                break
            raise corrupt(path, "the run's metric log", f"line {i + 1} is not valid JSON") from None
        if not isinstance(row, dict):
            raise corrupt(path, "the run's metric log", f"line {i + 1} is not a JSON object")
        rows.append(row)
    return rows
