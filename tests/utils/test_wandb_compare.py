"""W&B runs that can be compared: the scale and the chosen group options in the config as
plain values, group = experiment + scale, the scale in the run name, tags for paper,
experiment, scale, sampler, model and dataset; a run's figures under keys of their own (a
figure logged under its scalar's key replaced that series' last point); and the report's
tables and figures sent to W&B on request.

The fast tests stand a recorder in for the ``wandb`` module; the slow ones run W&B in offline
mode (``WANDB_DIR`` in a temporary folder) and read the run back from its ``.wandb`` file.
"""

from __future__ import annotations

import json
import struct
import sys
import time
import types
from pathlib import Path

import pytest

from ebmlab.utils.logging import MetricLogger, WandbLogger, run_labels, wandb_config

CHOICES = {
    "experiment": "dlp/fig3_ising_sampling",
    "task": "ising_sampling",
    "model": "ising_lattice",
    "dataset": None,
    "sampler": "dmala",
    "scale": "smoke",
}


class _Run:
    """A W&B run as W&B keeps it: one history row per step, a later value of a key at the
    same step replacing the earlier one."""

    def __init__(self, **init):
        self.init, self.history, self.summary = init, {}, {}
        self.dir = str(Path(init.get("dir") or ".") / "files")
        self.url = "https://wandb.example/run"

    def log(self, row: dict, step: int | None = None):
        step = max(self.history, default=-1) + 1 if step is None else step
        self.history.setdefault(step, {}).update(row)

    def finish(self, exit_code: int = 0):
        self.finished = exit_code


@pytest.fixture
def fake_wandb(monkeypatch):
    runs: list[_Run] = []

    def init(**kw):
        runs.append(_Run(**kw))
        return runs[-1]

    module = types.SimpleNamespace(
        init=init,
        Image=lambda path: ("image", path),
        Table=lambda columns, data: ("table", columns, data),
        Settings=lambda **kw: kw,
    )
    monkeypatch.setitem(sys.modules, "wandb", module)
    return runs


def _settings(mode: str = "offline") -> WandbLogger:
    return WandbLogger(project="ebmlab", mode=mode, entity=None, group="g", tags=["mine"])


def _png(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    plt.plot([0, 1])
    fig.savefig(path)
    plt.close(fig)
    return path


def _log_fig3_like(logger: MetricLogger, png: Path, n: int = 50) -> None:
    """What ising_sampling does: a log_rmse point per step, then its figure at the last one."""
    for step in range(n):
        logger.log({"log_rmse": -step / 10.0}, step=step)
    logger.log_figure("log_rmse", png, step=n - 1)
    logger.finish()


def test_labels_and_config_carry_scale_and_choices():
    name, tags = run_labels("dlp/fig3_ising_sampling", "smoke", CHOICES, Path("x/sampler=dmala"))
    assert name == "dlp/fig3_ising_sampling/smoke/sampler=dmala"
    assert tags == [
        "paper:dlp",
        "experiment:dlp/fig3_ising_sampling",
        "scale:smoke",
        "sampler:dmala",
        "model:ising_lattice",
    ]
    config = wandb_config({"scale": {}, "sampler": {"step_size": 0.4}}, CHOICES, "smoke")
    assert config["scale"] == "smoke" and config["sampler"] == {"step_size": 0.4}
    assert config["choices"]["sampler"] == "dmala" and "dataset" not in config["choices"]


def test_a_figure_never_takes_its_scalars_last_point(tmp_path, fake_wandb):
    logger = MetricLogger(tmp_path, _settings(), {"scale": "smoke"}, "n", tags=["scale:smoke"])
    _log_fig3_like(logger, _png(tmp_path / "f.png"))
    (run,) = fake_wandb
    scalars = [row["log_rmse"] for _, row in sorted(run.history.items()) if "log_rmse" in row]
    assert scalars == [-s / 10.0 for s in range(50)], "every log_rmse point is a number"
    assert run.history[49]["figures/log_rmse"] == ("image", str(tmp_path / "f.png"))
    assert run.init["tags"] == ["scale:smoke", "mine"] and run.init["name"] == "n"


def test_group_is_experiment_and_scale():
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from ebmlab.configs import config_dir

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=["experiment=dlp/fig3_ising_sampling", "scale=smoke", "logger=wandb"],
            return_hydra_config=True,
        )
    GlobalHydra.instance().clear()
    HydraConfig.instance().set_config(cfg)
    assert cfg.logger.group == "dlp/fig3_ising_sampling/smoke"


def test_report_logs_its_tables_and_figures(tmp_path, fake_wandb):
    from ebmlab.report.wandb_export import log_report

    table = tmp_path / "table.csv"
    table.write_text("sampler,seeds,log_rmse\ndmala,2,-5.5 ± 0.71\n")
    figure = _png(tmp_path / "table_log_rmse.png")
    log_report("dlp/fig3_ising_sampling", "smoke", [table, figure], tmp_path, "offline")
    (run,) = fake_wandb
    assert run.init["mode"] == "offline" and run.init["job_type"] == "report"
    assert run.init["group"] == "dlp/fig3_ising_sampling/smoke"
    assert "scale:smoke" in run.init["tags"] and "paper:dlp" in run.init["tags"]
    (row,) = run.history.values()
    assert row["tables/table"] == (
        "table",
        ["sampler", "seeds", "log_rmse"],
        [["dmala", "2", "-5.5 ± 0.71"]],
    )
    assert row["figures/table_log_rmse"] == ("image", str(figure))


# ---- real W&B, offline ------------------------------------------------------------------------


def read_wandb_file(path: Path) -> list:
    """The records of a W&B ``.wandb`` file (a LevelDB-style log: a 7-byte header, then
    32 KiB blocks of chunks with a 7-byte header: CRC32, length, type full/first/middle/last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    block, pos, records, pending = 32768, 7, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if pos + 7 + length > len(data):  # a chunk W&B is still writing
            break
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 0 and length == 0:
            pos += left - 7
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def _offline_history(run_dir: Path, n_rows: int) -> tuple[list[dict], list]:
    """(history rows, run records) of the offline run in ``run_dir``, once W&B's service has
    written ``n_rows`` history rows and the exit record (it writes after ``finish()`` returns),
    or after 60 s."""
    (path,) = sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))
    from google.protobuf.message import DecodeError

    for _ in range(120):
        try:
            records = read_wandb_file(path)
        except DecodeError:  # read while W&B was writing a record: read again
            records = []
        kinds = [r.WhichOneof("record_type") for r in records]
        if "exit" in kinds and kinds.count("history") >= n_rows:
            break
        time.sleep(0.5)
    rows = [
        {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in r.history.item
        }
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    return rows, [r.run for r in records if r.WhichOneof("record_type") == "run"]


@pytest.mark.slow
def test_offline_run_keeps_every_scalar_point_and_the_figure(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    run_dir = tmp_path / "run"
    name, tags = run_labels("dlp/fig3_ising_sampling", "smoke", CHOICES, run_dir)
    config = wandb_config({"scale": {}, "seed": 0}, CHOICES, "smoke")
    logger = MetricLogger(run_dir, _settings(), config, name, tags=tags)
    _log_fig3_like(logger, _png(tmp_path / "f.png"))
    rows, runs = _offline_history(run_dir, 50)
    scalars = [r["log_rmse"] for r in rows if isinstance(r.get("log_rmse"), (int, float))]
    assert scalars == [-s / 10.0 for s in range(50)]
    keys = {k for r in rows for k in r}
    assert "figures/log_rmse/_type" in keys  # the image, under a key of its own
    assert not any(k.startswith("log_rmse/") for k in keys)
    (run,) = runs[:1]
    assert run.display_name == "dlp/fig3_ising_sampling/smoke/run" and run.run_group == "g"
    assert set(tags) <= set(run.tags)
    config_items = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert config_items["scale"] == "smoke" and config_items["choices"]["sampler"] == "dmala"


def test_a_run_sends_its_labels_config_and_figures(tmp_path, monkeypatch, fake_wandb):
    """``python -m ebmlab.run`` with the W&B logger (in this process, W&B replaced by the
    recorder): the run's name, group, tags and config say what it is; its figure has its own
    key and every log_rmse point stays a number."""
    from tests.helpers import run_inprocess

    run_dir = tmp_path / "run"
    args = ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "sampler=dmala"]
    args += ["model.n_side=3", "run.n_steps=60"]
    assert run_inprocess(args, run_dir, monkeypatch, logger="wandb") == 0
    (run,) = fake_wandb
    assert run.init["name"] == f"dlp/fig3_ising_sampling/smoke/{run_dir.name}"
    assert run.init["group"] == "dlp/fig3_ising_sampling/smoke"
    assert {"paper:dlp", "scale:smoke", "sampler:dmala", "model:ising_lattice"} <= set(
        run.init["tags"]
    )
    config = run.init["config"]
    assert config["scale"] == "smoke" and config["choices"]["sampler"] == "dmala"
    assert config["sampler"]["step_size"] == 0.4  # conf/when/dlp/fig3_ising_sampling/
    logged = [row for _, row in sorted(run.history.items())]
    assert all(isinstance(r["log_rmse"], float) for r in logged if "log_rmse" in r)
    assert any("figures/log_rmse" in r for r in logged)
