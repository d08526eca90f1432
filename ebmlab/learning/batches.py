"""How a learner draws its mini-batches from the training tensor given to ``setup``.

Two schemes, each as in the reference code of the papers that use it:

- :func:`draw_rows`: ``n`` rows uniformly with replacement (PCD, PCD with a replay buffer,
  ratio matching);
- :class:`EpochBatches`: shuffled passes over the data in full mini-batches, the last
  partial batch dropped (CD, GRBM modified CD). An epoch's permutation is drawn when its
  first batch is asked for, so the random draws interleave with the updates exactly as in
  a loop over epochs.

A ``Transform`` maps a drawn batch to model input with the run's generator (dynamic
binarisation, standardisation of images); it runs right after the draw.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

Transform = Callable[[Tensor, torch.Generator], Tensor]


def draw_rows(
    data: Tensor, n: int, generator: torch.Generator, transform: Transform | None = None
) -> Tensor:
    """``n`` rows of ``data`` drawn uniformly with replacement, then ``transform``."""
    idx = torch.randint(0, data.shape[0], (n,), generator=generator, device=data.device)
    batch = data[idx]
    return batch if transform is None else transform(batch, generator)


class EpochBatches:
    """Indices of shuffled full mini-batches, epoch after epoch (``next`` gives one batch).

    ``epoch`` is the epoch the next batch belongs to; ``per_epoch = n_rows // batch_size``.
    """

    def __init__(self, n_rows: int, batch_size: int, device: torch.device):
        self.n_rows, self.batch_size, self.device = n_rows, batch_size, device
        self.per_epoch = n_rows // batch_size
        self.epoch, self.index = 0, 0
        self.order: Tensor | None = None

    def next(self, generator: torch.Generator) -> Tensor:
        if self.order is None:
            self.order = torch.randperm(self.n_rows, generator=generator, device=self.device)
        b, bs = self.index, self.batch_size
        idx = self.order[b * bs : (b + 1) * bs]
        self.index += 1
        if self.index == self.per_epoch:
            self.epoch, self.index, self.order = self.epoch + 1, 0, None
        return idx

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index, "order": self.order}

    def load_state_dict(self, d: dict) -> None:
        self.epoch, self.index = int(d["epoch"]), int(d["index"])
        order = d["order"]
        self.order = None if order is None else order.to(self.device)
