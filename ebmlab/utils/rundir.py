"""Run-directory identity, ownership and status.

- Identity: a run directory belongs to ONE resolved configuration. ``run_config.json``
  holds the config and its hash; a finished run is reused only when the hash matches, and
  a mismatch is an error that names the differing keys (``fresh=true`` starts afresh). A
  config recorded in the layout before the ``run:`` node is compared in today's layout
  (:func:`ebmlab.utils.config_schema.upgrade`); the file itself is never rewritten for it.
- Ownership: one process writes a run directory at a time (``.lock`` with pid, host, the
  process's start time and the machine's boot id); a lock left by a killed process is taken
  over, also when its pid now belongs to another process (a different start time).
- Status: in a sweep each job leaves ``status.json`` (exit code and one-line message).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.utils.config_schema import upgrade
from ebmlab.utils.jsonio import corrupt, field, read_json
from ebmlab.utils.relpaths import project_of, project_relative
from ebmlab.utils.workspace import atomic_write_text

# keys that change how a run is shown or stored, never its numbers
NON_IDENTITY_KEYS = (
    "progress",
    "fresh",
    "logger",
    "paths",
    "name",
    "report",
    "claims",
    "when",
    "grid",
    "health",  # warnings only: they never change a number
    "compile",  # CUDA graphs or eager: the same numbers (core.graphs)
)
# where caches and data live (anywhere in the config): moving a checkout or pointing
# EBMLAB_CACHE elsewhere must not orphan its runs; the data's identity is in the other keys
LOCATION_KEYS = ("cache_dir", "data_dir")
MAX_NAME = 200  # characters of a run-directory name before it is shortened with a hash (limit 255)
_SAFE = re.compile(r"[^A-Za-z0-9._,=+\-]")


# (run_dir, exit code, message) of each job of this process's sweep; a module of its own so
# that ``python -m ebmlab.run`` (module __main__) and Hydra's callback (ebmlab.run) share it
SWEEP_JOBS: list[tuple[Path, int, str]] = []


class RunDirError(RuntimeError):
    """The run directory cannot be used (held by another process)."""


def short_name(override_dirname: str) -> str:
    """A run-directory name from Hydra's override string: safe characters only, no
    separators (a value with ``/`` does not nest), at most ``MAX_NAME`` characters."""
    if not override_dirname:
        return "default"
    name = _SAFE.sub("_", override_dirname)
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(override_dirname.encode()).hexdigest()[:12]
        name = f"{name[: MAX_NAME - 13]}_{digest}"
    return name


def identity(cfg: DictConfig) -> dict:
    """The resolved config that decides a run's numbers, and its hash."""
    config = OmegaConf.to_container(cfg, resolve=True)
    for k in NON_IDENTITY_KEYS:
        config.pop(k, None)
    config = _without_locations(config)
    return {"hash": _hash(config), "config": config}


def _hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def config_hash(config: dict) -> str:
    """The identity hash of a recorded config (``run_config.json``'s ``config``), as
    :func:`identity` makes it today (cache / data locations left out)."""
    return _hash(_without_locations(config))


def _without_locations(node):
    if isinstance(node, dict):
        return {k: _without_locations(v) for k, v in node.items() if k not in LOCATION_KEYS}
    if isinstance(node, list):
        return [_without_locations(v) for v in node]
    return node


def _diff(a, b, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            key = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                out.append(key)
            else:
                out += _diff(a[k], b[k], key)
        return out
    return [] if a == b else [prefix or "<root>"]


def same_run(recorded: dict, ident: dict) -> bool:
    """Whether a recorded config (``run_config.json``'s ``config``, of any layout) is the run
    ``ident`` (:func:`identity`) describes."""
    return config_hash(upgrade(recorded)) == ident["hash"]


def recorded_hash(run_dir: Path) -> str:
    """The hash ``run_dir/run_config.json`` records: the identity its checkpoints and results
    carry (an old-layout run keeps its own, :func:`claim`)."""
    return read_run_config(run_dir / "run_config.json")["hash"]


def claim(run_dir: Path, ident: dict) -> dict | None:
    """Tie ``run_dir`` to ``ident``. Returns the finished results when this very config
    already completed there, None when the run should start or resume. A directory whose
    ``run_config.json`` records the same run in the layout before the ``run:`` node is the
    same run: it resumes (or returns its results) as it is, under its recorded hash."""
    path = run_dir / "run_config.json"
    results = run_dir / "results.json"
    if path.exists():
        old = read_run_config(path)
        if old.get("hash") != ident["hash"] and (
            _hash(_without_locations(old.get("config", {}))) == ident["hash"]
        ):  # recorded by an ebmlab that kept the cache / data locations in the identity
            atomic_write_text(path, json.dumps(ident, indent=2, sort_keys=True, default=str))
            old = ident
        if old.get("hash") != ident["hash"] and not same_run(old.get("config", {}), ident):
            keys = _diff(upgrade(old.get("config", {})), ident["config"])
            shown = ", ".join(keys[:6]) + (f" (+{len(keys) - 6} more)" if len(keys) > 6 else "")
            raise ConfigError(
                "run directory",
                f"{run_dir} holds a run of another configuration (differs at: {shown}); "
                "pass fresh=true to discard it, or choose another directory "
                "(hydra.run.dir=...)",
            )
        if results.exists():
            data = read_json(results, "the run's results")
            recorded = data.get("config_hash")
            if recorded is not None and recorded != old["hash"]:
                raise corrupt(
                    path,
                    "the run's configuration",
                    f"its hash {old['hash']} is not the "
                    f"{recorded} its results were computed with (in {results.name})",
                )
            return field(data, "metrics", results, "the run's results")
        return None
    if results.exists() or (run_dir / "checkpoints").exists():
        raise ConfigError(
            "run directory",
            f"{run_dir} holds a run with no recorded configuration (an older ebmlab); "
            "pass fresh=true to discard it, or choose another directory",
        )
    atomic_write_text(path, json.dumps(ident, indent=2, sort_keys=True, default=str))
    return None


def read_run_config(path: Path) -> dict:
    """``run_config.json`` through the guarded reader, checked against itself: its ``hash``
    must be the hash of its ``config`` (a hand-edited config is detected)."""
    what = "the run's configuration"
    data = read_json(path, what)
    config, recorded = field(data, "config", path, what), field(data, "hash", path, what)
    if not hash_matches(config, recorded):
        raise corrupt(path, what, "its config does not match its recorded hash (edited?)")
    return data


def hash_matches(config, recorded) -> bool:
    """Whether ``recorded`` is the identity hash of ``config`` (as :func:`identity` makes it,
    or as an ebmlab that kept cache / data locations in it did)."""
    if not isinstance(config, dict):
        return False
    return recorded in (_hash(config), _hash(_without_locations(config)))


def clear(run_dir: Path) -> None:
    """``fresh=true``: discard checkpoints, figures, logs, results and the identity."""
    for name in ("checkpoints", "figures", "wandb"):
        shutil.rmtree(run_dir / name, ignore_errors=True)
    for name in (
        "metrics.jsonl",
        "results.json",
        "wandb_id.txt",
        ".fault_done",
        "run_config.json",
        "status.json",
        "progress.json",
    ):
        (run_dir / name).unlink(missing_ok=True)


def read_lock(path: Path) -> dict:
    """The owner a ``.lock`` file records (pid, host, since, started, boot); {} when the file
    is absent or unreadable."""
    try:
        owner = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def owner_alive(owner: dict) -> bool:
    """Whether the process a lock's ``owner`` names runs on this machine and is still that
    process (its start time and boot id, where the lock records them; older locks do not)."""
    pid, started, boot = owner.get("pid"), owner.get("started"), owner.get("boot")
    return isinstance(pid, int) and process_alive(
        pid, started if isinstance(started, int) else None, boot if isinstance(boot, str) else None
    )


def process_alive(pid: int, started: int | None = None, boot: str | None = None) -> bool:
    """Whether process ``pid`` runs; with ``started`` (its start time, :func:`process_start`)
    and ``boot`` (:func:`boot_id`) recorded, whether it is still THAT process: a pid reused
    by a later process, or one from before a reboot, is not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    if boot is not None and boot_id() not in (None, boot):
        return False
    if started is not None:
        now = process_start(pid)
        if now is not None and now != started:
            return False
    return True


def process_start(pid: int) -> int | None:
    """Process ``pid``'s start time in clock ticks since boot (``/proc/<pid>/stat`` field 22),
    None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
    try:
        return int(fields[19])  # field 22 of the whole line: 3 is the first after the name
    except (IndexError, ValueError):
        return None


def boot_id() -> str | None:
    """This boot of the machine (``/proc/sys/kernel/random/boot_id``), None where absent."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


@contextmanager
def lock(run_dir: Path):
    """Hold ``run_dir/.lock`` while the run writes; refuse a directory another live
    process holds; take over a lock whose process is gone."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / ".lock"
    me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
    me.update(started=process_start(os.getpid()), boot=boot_id())
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            owner = read_lock(path)
            pid, host = owner.get("pid"), owner.get("host")
            if isinstance(pid, int) and (host != me["host"] or owner_alive(owner)):
                since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(owner.get("since", 0)))
                raise RunDirError(
                    f"run directory {run_dir} is in use by process {pid} on {host} "
                    f"(since {since}); wait for it to finish, or delete {path} if that "
                    "process is gone"
                ) from None
            why = (
                "is gone"
                if not isinstance(pid, int) or not process_alive(pid)
                else ("is another process now")
            )
            print(f"ebmlab: taking over a stale lock {path} (process {pid} {why})", file=sys.stderr)
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(me))
        break
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def kept_checkpoint(ctx) -> str:
    """Says which checkpoint really exists after a failure."""
    last = ctx.workspace.last
    if ctx.last_good_step is not None and last.exists():
        return f"the last good checkpoint is {last} (step {ctx.last_good_step})"
    return "no checkpoint had been written before it"


def write_status(run_dir: Path, code: int, message: str, choices: dict | None = None) -> None:
    """A sweep job's outcome; with its config-group ``choices`` so that reports can tell
    which claim a failed run was meant for."""
    run_dir.mkdir(parents=True, exist_ok=True)
    status = {"exit_code": code, "message": project_relative(message, project_of(run_dir))}
    if choices is not None:
        status["choices"] = {k: str(v) for k, v in choices.items()}
    atomic_write_text(run_dir / "status.json", json.dumps(status))
