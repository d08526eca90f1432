"""Send an experiment's tables and figures (``python -m ebmlab.report table ... --wandb``) to W&B.

One W&B run per report, in the experiment's project and in the group its runs use
(``<experiment>/<scale>``, conf/logger/wandb.yaml), with ``job_type`` ``report``: each table as
a W&B Table under ``tables/<name>`` (from its CSV), each figure as an image under
``figures/<name>``. Offline by default (``wandb sync`` uploads later); ``--wandb-mode online``
where a network exists.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import yaml

from ebmlab.utils.logging import FIGURE_PREFIX, run_labels

MODES = ("offline", "online")


def _project() -> str:
    """The W&B project the runs log to (conf/logger/wandb.yaml)."""
    from ebmlab.configs import config_dir

    return str(yaml.safe_load((config_dir() / "logger" / "wandb.yaml").read_text())["project"])


def log_report(experiment: str, scale: str, written: list[Path], out_dir: Path, mode: str) -> str:
    """Log the tables (``.csv``) and figures (``.png``) in ``written`` to one W&B run; returns
    the run's local directory (offline) or URL (online)."""
    if mode not in MODES:
        raise SystemExit(f"--wandb-mode must be one of {', '.join(MODES)} (got {mode!r})")
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    name, tags = run_labels(experiment, scale, {"experiment": experiment}, Path("report"))
    run = wandb.init(
        project=_project(),
        group=f"{experiment}/{scale}",
        job_type="report",
        name=name,
        tags=[*tags, "report"],
        mode=mode,
        dir=str(out_dir),
        config={"experiment": experiment, "scale": scale},
        settings=wandb.Settings(console="off", x_disable_stats=True),
    )
    try:
        items = {}
        for path in written:
            path = Path(path)
            if path.suffix == ".csv":
                with open(path, newline="") as f:
                    rows = list(csv.reader(f))
                if rows:
                    items[f"tables/{path.stem}"] = wandb.Table(columns=rows[0], data=rows[1:])
            elif path.suffix == ".png":
                items[f"{FIGURE_PREFIX}{path.stem}"] = wandb.Image(str(path))
        if items:
            run.log(items)
        where = run.url if mode == "online" else str(Path(run.dir).parent)
    finally:
        run.finish()
    return where
