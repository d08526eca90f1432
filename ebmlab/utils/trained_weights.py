"""Loading a trained model's weights from a training run (e.g. ``task=ebm_learning``).

A training checkpoint holds the model's ``state_dict`` under ``model`` and, for learners
with an exponential moving average, the EMA weights under ``learner.ema``; checkpoints
written by the run loop keep the task's state under ``task``. A bare ``state_dict`` file is
accepted too.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ebmlab.errors import ConfigError


def resolve_checkpoint(path: str) -> Path:
    """A checkpoint file, or a run directory (its checkpoints/best.pt, else last.pt)."""
    p = Path(path).expanduser()
    if p.is_dir():
        for name in ("best.pt", "last.pt"):
            for candidate in (p / "checkpoints" / name, p / name):
                if candidate.is_file():
                    return candidate
        raise FileNotFoundError(f"no checkpoints/best.pt or checkpoints/last.pt under {p}")
    if not p.is_file():
        raise FileNotFoundError(f"checkpoint {p} does not exist")
    return p


def load_trained_weights(model: torch.nn.Module, path: Path, use_ema: bool) -> str:
    """Load the EMA (if ``use_ema`` and present) or raw weights of a checkpoint into
    ``model``; returns which ("ema" or "raw"). A mismatch is a ConfigError on ``model``."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(ck, dict) and isinstance(ck.get("task"), dict):  # a run-loop checkpoint
        ck = ck["task"]
    if isinstance(ck, dict) and "model" in ck:
        learner = ck.get("learner")
        ema = learner.get("ema") if isinstance(learner, dict) else None
        state, which = (ema, "ema") if use_ema and ema is not None else (ck["model"], "raw")
    else:
        state, which = ck, "raw"
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).splitlines()[0]
        raise ConfigError(
            "model",
            f"the checkpoint {path} does not fit this model config (set the model's sizes, "
            f"e.g. model.n_channels / model.n_blocks, to those it was trained with): {first}",
        ) from None
    return which
