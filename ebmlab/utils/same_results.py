"""What "a resumed run gives the same results as an uninterrupted one" means, per device
(docs/gpu.md). Used by the resume tests and by ``make gpu-check``.

- CPU: every reported number is bit-identical.
- CUDA: the chains, draws and parameters are identical (the same kernels on the same inputs
  with the same generator state; cuDNN runs in its deterministic mode), and every reported
  number agrees within a relative ``CUDA_REL_TOL`` (absolute ``CUDA_ABS_TOL`` near zero): a
  reduction whose summation order the GPU does not fix (atomic adds) moves a float32 result
  by a few units in its last place (float32 resolution: 1.2e-7); a resume that went wrong
  (other chains, other parameters) moves every statistic by far more.

Timings (wall-clock seconds and rates per second) and cache flags are never compared.
"""

from __future__ import annotations

import math

import torch

CUDA_REL_TOL = 1e-6
CUDA_ABS_TOL = 1e-9


def not_compared(key: str) -> bool:
    """Keys that measure wall-clock time (``seconds``, ``ess_per_second``, ``ess_t``, ...) or
    say whether a cache was found (``rbm_cached``: the first of two runs builds it)."""
    return "second" in key or key in ("time_per_iter", "ess_t") or key.endswith("_cached")


def differences(a: dict, b: dict, device: str | torch.device, prefix: str = "") -> list[str]:
    """Where results ``a`` and ``b`` (results.json metrics, or any nested dict / list of
    numbers, strings and tensors) differ beyond what ``device`` allows; [] when they agree."""
    kind = torch.device(device).type
    out: list[str] = []
    keys = [k for k in dict.fromkeys([*a, *b]) if not not_compared(str(k))]
    for k in keys:
        name = f"{prefix}{k}"
        if k not in a or k not in b:
            out.append(f"{name}: only in {'the first' if k in a else 'the second'}")
            continue
        out += _differ(a[k], b[k], kind, name)
    return out


def _differ(x, y, kind: str, name: str) -> list[str]:
    if isinstance(x, dict) and isinstance(y, dict):
        return differences(x, y, kind, f"{name}.")
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        if len(x) != len(y):
            return [f"{name}: lengths {len(x)} and {len(y)}"]
        return [
            d for i, (u, v) in enumerate(zip(x, y)) for d in _differ(u, v, kind, f"{name}[{i}]")
        ]
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        same = x.shape == y.shape and x.dtype == y.dtype and torch.equal(x.cpu(), y.cpu())
        return [] if same else [f"{name}: tensors differ"]  # chains, draws, parameters: exact
    if _number(x) and _number(y):
        if x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)):
            return []
        if kind == "cuda" and math.isclose(x, y, rel_tol=CUDA_REL_TOL, abs_tol=CUDA_ABS_TOL):
            return []
        return [f"{name}: {x!r} != {y!r}"]
    return [] if x == y else [f"{name}: {x!r} != {y!r}"]


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
