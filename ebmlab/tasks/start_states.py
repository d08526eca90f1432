"""Where a sampling task's chains start: independent uniform states of a binary or ordinal
model, or the last chain states another run checkpointed (``init: run:<dir>``)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from ebmlab.core.protocols import ORDINAL
from ebmlab.errors import ConfigError, check
from ebmlab.utils.workspace import Workspace

INITS = ("uniform", "run:<run directory>")


def uniform_states(model, n: int, generator: torch.Generator, device) -> Tensor:
    """``n`` uniformly random states [n, dim] of a binary or ordinal model."""
    shape = (n, int(model.dim))
    if model.state_kind == ORDINAL:
        x = torch.randint(0, int(model.n_states), shape, generator=generator, device=device)
        return x.float()
    return (torch.rand(shape, generator=generator, device=device) < 0.5).float()


def start_states(run: Path | None, model, n: int, generator: torch.Generator, device) -> Tensor:
    """``n`` uniform states (``run`` None) or ``run``'s last chain states (:func:`run_states`)."""
    if run is None:
        return uniform_states(model, n, generator, device)
    return run_states(run, model, n, device)


def init_run(init: str, task: str) -> Path | None:
    """The run directory of ``init`` ``run:<dir>`` (None for ``uniform``); ConfigError
    (``init``) for another value or a directory without a checkpoint of a ``task`` run."""
    init = str(init)
    run = init[len("run:") :] if init.startswith("run:") else None
    check(init == "uniform" or run, "init", f"must be one of {list(INITS)} (got {init!r})")
    if run is None:
        return None
    msg = f"run:<dir> must name a {task} run directory with a checkpoint (got {init!r})"
    check(Workspace(Path(run)).last.exists(), "init", msg)
    return Path(run)


def run_states(run: Path, model, n_chains: int, device) -> Tensor:
    """The chain states ``x`` of ``run``'s last checkpoint, checked against ``model`` and
    ``n_chains``, on ``device`` (the other run may have run on another device)."""
    ck = Workspace(run).load("last", device)
    x = (ck or {}).get("task", {}).get("x") if isinstance(ck, dict) else None
    want = (n_chains, int(model.dim))
    if not isinstance(x, Tensor) or tuple(x.shape) != want:
        got = "no chain states" if not isinstance(x, Tensor) else f"states {tuple(x.shape)}"
        raise ConfigError("init", f"{run} holds {got}; this run needs {want} (n_chains, model dim)")
    if model.state_kind == ORDINAL:
        ok = bool(((x >= 0) & (x < int(model.n_states)) & (x == x.round())).all())
    else:
        ok = bool(((x == 0) | (x == 1)).all())
    if not ok:
        raise ConfigError("init", f"{run}'s states are not states of this target")
    return x.float().clone()  # on the device: loaded there
