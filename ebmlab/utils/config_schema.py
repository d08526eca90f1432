"""Recorded configs of the layout before the ``run:`` node (issue 44), read in today's layout.

Before issue 44 each task held its own run length and loop period under its own names; now
every run has ``run: {n_steps, eval_every, checkpoint_every}`` (conf/config.yaml), which the
loop reads. Records are never rewritten: whatever compares or selects a recorded config
(resuming a run directory, matching records to claims and to wanted runs) reads it through
:func:`upgrade`, so an old record and the same run composed today have one identity hash.

Per task (its ``_target_``), the old keys: the length, the loop's evaluation period, and the
task keys renamed because ``eval_every`` now means the loop's period. ``checkpoint_every`` was
``task.checkpoint_every`` everywhere. A GRBM task's length was the learner's ``n_epochs``,
which stays in the learner's config (it now follows ``${run.n_steps}``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OldLayout:
    """Where one task kept its run length and loop period before the ``run:`` node."""

    length: str  # dotted key of the run length: task.n_iters | task.n_steps | learner.n_epochs
    period: str  # dotted key of the loop's evaluation period: task.eval_every | task.log_every
    renamed: dict[str, str] = field(default_factory=dict)  # other task keys: old -> new name


_ITERS_LOG = OldLayout("task.n_iters", "task.log_every")
OLD_LAYOUTS: dict[str, OldLayout] = {
    "ebmlab.tasks.density_modeling.DensityModeling": OldLayout(
        "task.n_iters", "task.log_every", {"eval_every": "mmd_every"}
    ),
    "ebmlab.tasks.ebm_learning.EBMLearning": _ITERS_LOG,
    "ebmlab.tasks.ebm_mixing.EBMMixing": OldLayout("task.n_steps", "task.log_every"),
    "ebmlab.tasks.graph_generation.GraphGeneration": OldLayout(
        "task.n_iters", "task.log_every", {"eval_every": "generate_every"}
    ),
    "ebmlab.tasks.grbm_gmm.GRBMGmm": OldLayout("learner.n_epochs", "task.eval_every"),
    "ebmlab.tasks.grbm_images.GRBMImages": OldLayout("learner.n_epochs", "task.eval_every"),
    "ebmlab.tasks.ising_learning.IsingLearning": OldLayout("task.n_iters", "task.eval_every"),
    "ebmlab.tasks.ising_sampling.IsingSampling": OldLayout("task.n_steps", "task.eval_every"),
    "ebmlab.tasks.multimodal_2d.Multimodal2D": OldLayout("task.n_steps", "task.log_every"),
    "ebmlab.tasks.rbm_learning.RBMLearning": OldLayout("task.n_iters", "task.eval_every"),
    "ebmlab.tasks.rbm_sampling.RBMSampling": OldLayout("task.n_steps", "task.eval_every"),
    "ebmlab.tasks.sampler_ess.SamplerESS": OldLayout("task.n_steps", "task.log_every"),
}
RUN_KEYS = ("n_steps", "eval_every", "checkpoint_every")


def old_keys(target: str | None) -> dict[str, str]:
    """Old dotted key -> today's key, for the task ``target`` (a ``_target_``); {} for a task
    this module does not know (one written after the ``run:`` node, or none)."""
    layout = OLD_LAYOUTS.get(target or "")
    if layout is None:
        return {}
    out = {
        layout.length: "run.n_steps",
        layout.period: "run.eval_every",
        "task.checkpoint_every": "run.checkpoint_every",
    }
    out.update({f"task.{old}": f"task.{new}" for old, new in layout.renamed.items()})
    return out


def is_old_layout(config: dict) -> bool:
    """Whether ``config`` (a resolved config) predates the ``run:`` node."""
    task = config.get("task") if isinstance(config, dict) else None
    return "run" not in config and isinstance(task, dict) and task.get("_target_") in OLD_LAYOUTS


def upgrade(config: dict) -> dict:
    """A resolved config of the old layout in today's layout (a new dict; the argument is not
    changed). A config already in today's layout, or of a task not in :data:`OLD_LAYOUTS`, is
    returned as it is (a copy)."""
    new = copy.deepcopy(config)
    if not is_old_layout(config):
        return new
    layout = OLD_LAYOUTS[config["task"]["_target_"]]
    task = new["task"]
    if layout.length == "learner.n_epochs":  # the learner keeps it: ${run.n_steps}
        n_steps = new["learner"]["n_epochs"]
    else:
        n_steps = task.pop(layout.length.split(".", 1)[1])
    period = task.pop(layout.period.split(".", 1)[1])
    run = {
        "n_steps": n_steps,
        "eval_every": period,
        "checkpoint_every": task.pop("checkpoint_every"),
    }
    for old, name in layout.renamed.items():
        task[name] = task.pop(old)
    new["run"] = run
    return new


def upgrade_override(override: str, target: str | None) -> str:
    """One recorded command-line override (``task.n_iters=2000``, ``+key=v``) in today's keys."""
    key, sep, value = override.partition("=")
    prefix = key[: len(key) - len(key.lstrip("+~"))]
    name = old_keys(target).get(key[len(prefix) :], key[len(prefix) :])
    return f"{prefix}{name}{sep}{value}"


def upgrade_overrides(overrides: dict[str, str], target: str | None) -> dict[str, str]:
    """Recorded overrides (key -> value) in today's keys, for the task ``target``."""
    keys = old_keys(target)
    return {keys.get(k, k): v for k, v in overrides.items()}


# an old key of some task -> the run: key of its kind (for a task that did not have it)
_KINDS = {
    "task.n_steps": "run.n_steps",
    "task.n_iters": "run.n_steps",
    "learner.n_epochs": "run.n_steps",
    "task.log_every": "run.eval_every",
    "task.eval_every": "run.eval_every",
    "task.checkpoint_every": "run.checkpoint_every",
}
_WHERE = "run length and loop cadence are run.n_steps, run.eval_every, run.checkpoint_every"


def renamed_message(key: str, target: str | None, exists: bool = False) -> str | None:
    """What to say about an old-layout key given on today's command line, None for another
    key. ``target``: the composed task's ``_target_``; ``exists``: whether today's config has
    ``key`` (then only a key this task renamed is refused: a GRBM learner's ``n_epochs``)."""
    known = old_keys(target)
    if key in known:
        new = known[key]
        also = "" if new.startswith("run.") else " (the loop's evaluation period is run.eval_every)"
        return f"this key is now {new}{also}; {_WHERE}"
    if not exists and key in _KINDS:
        return f"no such key (ebmlab before issue 44); use {_KINDS[key]}: {_WHERE}"
    return None
