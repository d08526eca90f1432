"""Refuse runs whose tensors cannot fit, before any compute."""

from __future__ import annotations

import torch

from ebmlab.errors import ConfigError


def available_bytes(device: torch.device) -> int:
    """Free memory on ``device``: CUDA's free memory, else the host's MemAvailable."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import os

    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def check_memory(estimate: dict[str, int], device: torch.device, fraction: float = 0.9) -> None:
    """Raise a ConfigError when the estimated tensors exceed ``fraction`` of free memory."""
    if not estimate:
        return
    total = sum(int(v) for v in estimate.values())
    free = available_bytes(device)
    if total > fraction * free:
        parts = ", ".join(
            f"{k} {_gib(v)}" for k, v in sorted(estimate.items(), key=lambda kv: -kv[1])[:3]
        )
        raise ConfigError(
            "task",
            f"this run needs about {_gib(total)} for its largest tensors ({parts}), but "
            f"{device} has {_gib(free)} free; reduce the sizes (chains, buffer, samples)",
        )


def learner_batch_bytes(learner, dim: int, floats_per_entry: int = 4) -> dict[str, int]:
    """Bytes of a learner's per-step tensors from its config node alone: PCD's buffer and
    batch chains; ratio matching's ``batch_size`` rows with their ``n * d`` flipped neighbours
    (``estimator: full``; ``chunk_size`` rows at a time when set) or ``s`` sampled ones.
    ``floats_per_entry`` counts the float32 copies an entry has on the way (state, gradient,
    a network's activations per input)."""
    if learner is None:
        return {}
    batch = int(learner.get("batch_size", 0) or 0)
    rows = batch + int(learner.get("buffer_size", 0) or 0)
    if "estimator" in learner:  # ratio matching: each data row and its flipped neighbours
        per_row = dim if str(learner.get("estimator")) == "full" else int(learner.get("s", 1) or 1)
        rows = batch * (per_row + 1)
        chunk = int(learner.get("chunk_size", 0) or 0)
        if chunk > 0 and str(learner.get("estimator")) == "full":
            rows = min(rows, chunk + batch)
    return {"learner_batches": rows * dim * 4 * floats_per_entry}
