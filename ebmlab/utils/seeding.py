"""Explicit randomness: one torch.Generator per run, seeded from the config."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch


def make_generator(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def seed_everything(seed: int) -> None:
    """Seed global RNGs too, for library code that does not take a generator."""
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 - global seeding is the point here
    torch.manual_seed(seed)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def restore_generator(generator: torch.Generator, state: torch.Tensor) -> bool:
    """Put a checkpointed ``get_state()`` back into ``generator``, whatever device the state
    was loaded to (a generator state is always a CPU byte tensor). Returns False when the state
    is another kind of generator's (a CUDA Philox state, 16 bytes, on a CPU run's Mersenne
    Twister, or the other way round: a checkpoint moved between a GPU and a CPU machine): the
    two kinds draw different streams, so no state carries over; ``generator`` is then seeded
    from the state's bytes, the same way every time, and the run continues reproducibly."""
    state = state.detach().to("cpu", torch.uint8)
    if state.numel() == generator.get_state().numel():
        generator.set_state(state)
        return True
    digest = hashlib.sha256(state.numpy().tobytes()).digest()
    generator.manual_seed(int.from_bytes(digest[:8], "little") >> 1)
    return False
