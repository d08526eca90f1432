"""The runs below a directory (finished, failed, unfinished), and the settings each ran with.

A run is a directory holding ``results.json``. Its settings are read, in order, from the
sweep overrides (``.hydra/overrides.yaml``), the config-group choices recorded in
``results.json``, and the resolved config (``run_config.json``; else ``.hydra/config.yaml``),
so a table can group runs by any key. A run counts once wherever it lives (:func:`unique_runs`).
A run recorded before the ``run:`` node (issue 44) is read in today's layout, its config and
its overrides (:mod:`ebmlab.utils.config_schema`): ``task.n_iters=2000`` reads
``run.n_steps=2000``, so claims and wanted runs select it by today's keys. Nothing on disk
changes.
"""

from __future__ import annotations

import math
import socket
import time
from pathlib import Path

import yaml

from ebmlab.utils.config import run_choices
from ebmlab.utils.config_schema import upgrade, upgrade_overrides
from ebmlab.utils.jsonio import corrupt, read_json
from ebmlab.utils.logging import read_metrics
from ebmlab.utils.rundir import (
    config_hash,
    hash_matches,
    owner_alive,
    read_lock,
)

MISSING = "-"


def _target(config: dict) -> str | None:
    task = config.get("task") if isinstance(config, dict) else None
    return task.get("_target_") if isinstance(task, dict) else None


def _overrides(run_dir: Path, config: dict | None = None) -> dict[str, str]:
    """The run's command-line overrides (key -> value), in today's keys for the task of
    ``config`` (the run's recorded config, as read; default: read here)."""
    f = run_dir / ".hydra" / "overrides.yaml"
    out = {}
    if f.exists():
        for item in yaml.safe_load(f.read_text()) or []:
            if "=" in item:
                k, v = item.split("=", 1)
                out[k.lstrip("+~")] = v
    config = _recorded_config(run_dir) if config is None else config
    return upgrade_overrides(out, _target(config))


def _recorded_config(run_dir: Path) -> dict:
    """What the run ran, as recorded: ``run_config.json``, checked against the config hash its
    results (or, unfinished, its last checkpoint's progress) were computed with, where they
    record it; else ``.hydra/config.yaml``."""
    resolved = run_dir / "run_config.json"
    if resolved.exists():
        what = "the run's configuration"
        config = read_json(resolved, what).get("config", {})
        for name in ("results.json", "progress.json"):
            other = run_dir / name
            recorded = read_json(other, name).get("config_hash") if other.exists() else None
            if recorded is not None and not hash_matches(config, recorded):
                raise corrupt(resolved, what, f"it is not the config {name} was computed with")
        return config
    composed = run_dir / ".hydra" / "config.yaml"
    return (yaml.safe_load(composed.read_text()) or {}) if composed.exists() else {}


def _config(run_dir: Path) -> dict:
    """What the run ran (:func:`_recorded_config`), in today's layout."""
    return upgrade(_recorded_config(run_dir))


def _settings(run_dir: Path, dirname: bool = False) -> tuple[dict, dict[str, str]]:
    """(config, overrides) of a run, both in today's layout; with ``dirname``, the overrides
    its directory name is made of where it recorded none (a sweep job that failed early)."""
    recorded = _recorded_config(run_dir)
    overrides = _overrides(run_dir, recorded)
    if dirname and not overrides:
        overrides = upgrade_overrides(_dirname_overrides(run_dir), _target(recorded))
    return upgrade(recorded), overrides


def _hydra_choices(run_dir: Path) -> dict[str, str]:
    """The config-group choices Hydra saved for the job (``.hydra/hydra.yaml``), for a run with
    no ``results.json`` to carry them: so a claim that selects on a group the experiment sets
    (``sampler: gwg``) can name the unfinished run meant for it."""
    f = run_dir / ".hydra" / "hydra.yaml"
    if not f.exists():
        return {}
    saved = yaml.safe_load(f.read_text()) or {}
    choices = saved.get("hydra", {}).get("runtime", {}).get("choices") or {}
    return {k: v for k, v in run_choices(choices).items() if v is not None}


def collect(sweep_dir: Path) -> list[dict]:
    """One record per finished run below ``sweep_dir``: run_dir, overrides, choices,
    config, metrics, scale, hardware, seed."""
    runs = []
    for res in sorted(Path(sweep_dir).rglob("results.json")):
        data = read_json(res, "the run's results")
        run_dir = res.parent
        config, overrides = _settings(run_dir)
        runs.append(
            {
                "run_dir": run_dir,
                "overrides": overrides,
                "choices": data.get("choices", {}),
                "config": config,
                "metrics": data["metrics"],
                "scale": data.get("scale"),
                "hardware": data.get("hardware"),
                "cpu_share": data.get("cpu_share"),
                "seed": data.get("seed"),
                "warnings": list(data.get("warnings", [])),
            }
        )
    return unique_runs(runs)


def identity_key(run: dict) -> str:
    """What makes two records the same run: the hash of the config it ran (``run_config.json``)
    and its seed (which that config holds too), wherever its directory is; the directory
    itself for a run that recorded no config."""
    if (Path(run["run_dir"]) / "run_config.json").exists() and run.get("config"):
        return f"{config_hash(run['config'])}:seed={run.get('seed')}"
    return f"dir:{Path(run['run_dir']).resolve()}"


def unique_runs(runs: list[dict]) -> list[dict]:
    """Each run once, the first record of each :func:`identity_key` kept: the same config run
    under two directory names (``sampler=gwg/`` and ``sampler=gwg,seed=0/`` hold one run: seed 0
    is the default), in ``runs/`` and ``multirun/``, or both here and in the records."""
    seen: set[str] = set()
    out = []
    for run in runs:
        key = identity_key(run)
        if key not in seen:
            seen.add(key)
            out.append(run)
    return out


def logged_rows(run: dict, metric: str) -> list[dict]:
    """The rows of a run's ``metrics.jsonl`` that log ``metric``; [] when the run has no log
    (a record made before metric logs were recorded)."""
    log = Path(run["run_dir"]) / "metrics.jsonl"
    return [m for m in read_metrics(log) if metric in m] if log.exists() else []


def _dirname_overrides(run_dir: Path) -> dict[str, str]:
    """The ``key=value`` overrides a sweep job's directory name is made of (its fallback
    record of what it was run with)."""
    parts = [p.split("=", 1) for p in run_dir.name.split(",")]
    return dict(parts) if all(len(p) == 2 for p in parts) else {}


def collect_failed(sweep_dir: Path) -> list[dict]:
    """One record per sweep job below ``sweep_dir`` that ended with an error and has no
    ``results.json``: the fields of :func:`collect`, with empty metrics and ``failed`` = the
    job's one-line message (``status.json``), so a report can say why a claim has no run."""
    runs = []
    for st in sorted(Path(sweep_dir).rglob("status.json")):
        run_dir = st.parent
        status = read_json(st, "the job's status")
        if status.get("exit_code", 0) == 0 or (run_dir / "results.json").exists():
            continue
        config, overrides = _settings(run_dir, dirname=True)
        runs.append(
            {
                "run_dir": run_dir,
                "overrides": overrides,
                "choices": status.get("choices", {}),
                "config": config,
                "metrics": {},
                "failed": str(status.get("message", "")),
            }
        )
    return runs


def _progress(run_dir: Path) -> str:
    """How far an unfinished run got: from ``progress.json`` (written with each checkpoint),
    else from the last step in ``metrics.jsonl`` and the checkpoint's time."""
    ckpt = run_dir / "checkpoints" / "last.pt"
    prog = run_dir / "progress.json"
    if prog.exists():
        p = read_json(prog, "the run's progress")
        where = f"step {p['step']:,} of {p['n_steps']:,} at its last checkpoint ({p['updated']})"
    elif ckpt.exists():
        log = run_dir / "metrics.jsonl"
        rows = read_metrics(log) if log.exists() else []
        steps = [r["step"] for r in rows if isinstance(r.get("step"), int)]
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ckpt.stat().st_mtime))
        where = (f"logged to step {max(steps):,}, " if steps else "") + f"checkpoint of {when}"
    else:
        where = "no checkpoint yet"
    owner = read_lock(run_dir / ".lock")
    pid, host = owner.get("pid"), owner.get("host")
    if isinstance(pid, int) and host and host != socket.gethostname():
        state = f"held by process {pid} on {host}"  # a cluster node: alive or not, unknown here
    elif owner_alive(owner):
        state = "running now"
    else:
        state = "interrupted; its command resumes it"
    return f"{state}, {where}"


def collect_unfinished(sweep_dir: Path) -> list[dict]:
    """One record per run below ``sweep_dir`` that started (``run_config.json``) and has neither
    finished (``results.json``) nor failed (``status.json`` with an error): the fields of
    :func:`collect`, with empty metrics and ``unfinished`` = how far it got and whether its
    process is alive, so a report can say that a claim's run is on its way."""
    runs = []
    for cfg in sorted(Path(sweep_dir).rglob("run_config.json")):
        run_dir = cfg.parent
        status = run_dir / "status.json"
        if (run_dir / "results.json").exists() or (
            status.exists() and read_json(status, "the job's status").get("exit_code", 0) != 0
        ):
            continue
        config, overrides = _settings(run_dir, dirname=True)
        runs.append(
            {
                "run_dir": run_dir,
                "overrides": overrides,
                "choices": _hydra_choices(run_dir),
                "config": config,
                "metrics": {},
                "unfinished": _progress(run_dir),
            }
        )
    return runs


def bench_rows(path: Path) -> list[dict]:
    """The rows of a benchmark's JSON (``{"rows": [...]}``, e.g. outputs/bench/ratio_matching.json)
    as run records, so that a claim measured outside the runner (``bench:`` in a claims file)
    is judged like any other: a row's fields are both its config (for selectors) and its
    numbers its metrics; its ``round`` is its seed. Rows that failed (``error``) are left out;
    a missing file gives no rows."""
    path = Path(path)
    if not path.exists():
        return []
    data = read_json(path, "a benchmark's rows", "rerun the benchmark, or delete the file", None)
    out = []
    for row in data.get("rows", []) if isinstance(data, dict) else data:
        if "error" in row:
            continue
        out.append(
            {
                "run_dir": path.with_suffix(""),
                "overrides": {},
                "choices": {},
                "config": {k: v for k, v in row.items() if not isinstance(v, (dict, list))},
                "metrics": {
                    k: v
                    for k, v in row.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                },
                "scale": None,
                "hardware": row.get("hardware"),
                "seed": row.get("round"),
            }
        )
    return out


def key_value(run: dict, key: str) -> str:
    """The run's value of ``key`` (an override, a group choice or a dotted config key);
    ``-`` where it has none (absent, null such as ``sampler: null``, or not a leaf)."""
    if key in run["overrides"]:
        return run["overrides"][key]
    if key in run["choices"]:
        node = run["choices"][key]
    else:
        node = run.get("config", {})
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return MISSING
            node = node[part]
    return MISSING if node is None or isinstance(node, (dict, list)) else str(node)


def same_value(actual: str, wanted) -> bool:
    """Whether a run's value of a key (:func:`key_value`) is ``wanted``: numbers compared as
    numbers (``0.4`` is ``0.40``), anything else as text; a missing value is never wanted."""
    if actual == MISSING:
        return False
    try:
        return math.isclose(float(actual), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return actual == str(wanted)
