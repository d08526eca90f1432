"""Launching the runs that are wanted and not there yet.

A *point* is a set of command-line pins (key -> value) of one experiment; with its seeds it
names jobs, one run each. :func:`launch_grids` drops the pins an experiment runs anyway and
covers the points by sweep grids; :func:`missing_jobs` leaves out every job whose run has
already finished (in the outputs root or in the committed records), matched by the hash of the
config the job would run, so a run recorded under another directory name counts too;
:func:`grids` covers the jobs left by as few sweep grids as launch exactly those; and
:func:`run_sweep` launches (or prints) one.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

from ebmlab.runs.layout import sweep_keys
from ebmlab.runs.park import collect_parked
from ebmlab.runs.records import collect_recorded
from ebmlab.runs.rundirs import identity_key, same_value
from ebmlab.utils.config import compose_job
from ebmlab.utils.rundir import config_hash, identity

SEED = "seed"


class Defaults:
    """What an experiment runs with when a key is not given: the composed config (with its
    per-choice settings of conf/when/ applied) for a set of command-line pins, cached per pin
    set."""

    def __init__(self, experiment: str, scale: str):
        self.experiment, self.scale = experiment, scale
        self._cache: dict[frozenset, tuple[dict, DictConfig]] = {}

    def composed(self, pins: dict, extra: tuple[str, ...] = ()) -> tuple[dict, DictConfig]:
        """(group choices, job config) of the experiment at this scale with ``pins`` and the
        ``extra`` overrides (``key=value`` strings)."""
        key = frozenset([*((k, str(v)) for k, v in pins.items()), *extra])
        if key not in self._cache:
            pins_ = [f"{k}={v}" for k, v in pins.items()]
            self._cache[key] = compose_job(
                [f"experiment={self.experiment}", f"scale={self.scale}", *pins_, *extra]
            )
        return self._cache[key]

    def is_default(self, key: str, value, pins: dict) -> bool:
        """Whether ``key=value`` is what the experiment runs anyway given the other ``pins``."""
        choices, cfg = self.composed(pins)
        if key in choices:
            return str(choices[key]) == str(value)
        HydraConfig.instance().set_config(cfg)
        node = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        return node is not None and not OmegaConf.is_config(node) and same_value(str(node), value)


def grids(keys: list[str], points: list[dict]) -> list[dict[str, list]]:
    """Cover ``points`` (distinct, all with ``keys``) by grids (key -> values, in ``keys``'
    order) whose every point is one of them: one grid when they form a full product, else,
    along the axis that gives the fewest grids, one grid per set of that axis' values times
    the grids of the settings of the other keys that share that set."""
    values = {k: list(dict.fromkeys(p[k] for p in points)) for k in keys}
    size = 1
    for vs in values.values():
        size *= len(vs)
    if size == len(points):
        return [values]
    best: list[dict[str, list]] | None = None
    for axis in keys:
        others = [k for k in keys if k != axis]
        along: dict[tuple, list] = {}  # setting of the other keys -> its axis values
        for p in points:
            along.setdefault(tuple(p[k] for k in others), []).append(p[axis])
        by_set: dict[tuple, list[dict]] = {}  # axis values -> the settings that have them
        for setting, axis_values in along.items():
            by_set.setdefault(tuple(axis_values), []).append(dict(zip(others, setting)))
        out = [
            {k: (list(axis_values) if k == axis else sub[k]) for k in keys}
            for axis_values, settings in by_set.items()
            for sub in grids(others, settings)
        ]
        if best is None or len(out) < len(best):
            best = out
    return best or []


def launch_grids(experiment: str, scale: str, points: list[dict]) -> list[dict[str, list]]:
    """The sweep grids that produce exactly the runs at ``points`` in ``experiment``.

    A pinned key that the experiment does not sweep and whose value it runs anyway (its
    default after its per-choice settings in conf/when/) is dropped, so that a point naming a
    default reuses the experiment's own runs instead of launching the same run a second time
    under another directory name. The experiment's own sweep covers the keys no point fixes.
    """
    swept = sweep_keys(experiment)
    defaults = Defaults(experiment, scale)
    reduced: list[dict] = []
    for point in points:
        for k in sorted(point):
            rest = {j: w for j, w in point.items() if j != k}
            if k not in swept and defaults.is_default(k, point[k], rest):
                point = rest
        if point not in reduced:
            reduced.append(point)
    by_keys: dict[tuple, list[dict]] = {}
    for p in reduced:
        by_keys.setdefault(tuple(sorted(p)), []).append(p)
    return [g for keys, pts in by_keys.items() for g in grids(list(keys), pts)]


def grid_jobs(grid: dict[str, list], seeds: int) -> list[dict]:
    """The jobs of a grid run with seeds ``0..seeds-1``: each point with its ``seed``."""
    keys = list(grid)
    return [
        {**dict(zip(keys, values)), SEED: seed}
        for values in product(*grid.values())
        for seed in range(seeds)
    ]


def _hashed(extra: list[str]) -> tuple[str, ...]:
    """The extra overrides that enter a job's config (Hydra's own, e.g. a launcher, do not)."""
    return tuple(o for o in extra if not o.lstrip("+~").startswith("hydra"))


def job_key(defaults: Defaults, job: dict, extra: list[str]) -> str:
    """The identity of the run a job makes (:func:`~ebmlab.runs.rundirs.identity_key` of its
    finished run): the hash of the config ``python -m ebmlab.run`` composes for it, and its
    seed. The config is composed once per point; the seed is set on it (a plain key)."""
    pins = {k: v for k, v in job.items() if k != SEED}
    _, cfg = defaults.composed(pins, _hashed(extra))
    HydraConfig.instance().set_config(cfg)
    job_cfg = copy.deepcopy(cfg)  # (nested nodes must resolve against this copy's seed)
    with open_dict(job_cfg):
        del job_cfg["hydra"]  # the job config, as the task sees it
        job_cfg[SEED] = job[SEED]
    return f"{identity(job_cfg)['hash']}:seed={job[SEED]}"


@dataclass
class Plan:
    """An experiment's wanted jobs, how many of them have a finished run (here or on record),
    the sweep grids (seed included) that launch exactly the others, and how many of those are
    parked (``unpark`` first and they resume instead of starting over), and how many finished
    runs of the experiment are at other settings (a declared shorter run, say: ``--args``
    with its overrides matches them)."""

    experiment: str
    wanted: int
    done: int
    sweeps: list[dict[str, list]]
    parked: int = 0
    others: int = 0

    @property
    def missing(self) -> int:
        return self.wanted - self.done


def missing_jobs(
    root: Path, experiment: str, scale: str, points: list[dict], seeds: int, extra: list[str]
) -> Plan:
    """The jobs of ``points`` x seeds ``0..seeds-1`` of ``experiment`` (:func:`launch_grids`)
    whose run has not finished under ``root`` or in the records, grouped into sweep grids."""
    defaults = Defaults(experiment, scale)
    finished = {identity_key(r) for r in collect_recorded(root, experiment, scale)}
    parked = {
        f"{config_hash(r['config'])}:seed={r['config'].get(SEED)}"
        for r in collect_parked(root, experiment, scale)
        if r.get("config")
    }
    wanted, left, n_parked, matched = [], [], 0, set()
    for grid in launch_grids(experiment, scale, points):
        for job in grid_jobs(grid, seeds):
            if job in wanted:
                continue
            wanted.append(job)
            key = job_key(defaults, job, extra)
            matched.add(key)
            if key not in finished:
                left.append(job)
                n_parked += key in parked
    by_keys: dict[tuple, list[dict]] = {}
    for job in left:
        by_keys.setdefault(tuple(job), []).append(job)
    sweeps = [g for keys, jobs in by_keys.items() for g in grids(list(keys), jobs)]
    done = len(wanted) - len(left)
    return Plan(experiment, len(wanted), done, sweeps, n_parked, len(finished - matched))


def sweep_command(experiment: str, scale: str, grid: dict[str, list], extra: list[str]) -> list:
    """``python -m ebmlab.run -m experiment=... scale=... <grid> progress=false <extra>``."""
    pins = [f"{k}={','.join(str(v) for v in vals)}" for k, vals in grid.items()]
    return [
        sys.executable,
        "-m",
        "ebmlab.run",
        "-m",
        f"experiment={experiment}",
        f"scale={scale}",
        *pins,
        "progress=false",
        *extra,
    ]


def run_sweep(
    experiment: str, scale: str, grid: dict[str, list], extra: list[str], dry_run: bool = False
) -> int:
    """Launch one sweep (its jobs' finished runs return at once, interrupted ones resume);
    returns its exit code. With ``dry_run`` the command is only printed."""
    cmd = sweep_command(experiment, scale, grid, extra)
    print("+", " ".join(cmd), flush=True)
    return 0 if dry_run else subprocess.run(cmd).returncode
