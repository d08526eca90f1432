"""A learner's divergence checks kept on the device (issue 46): an iteration reads nothing back.

Each iteration :meth:`DivergenceWatch.observe` records, on the device, the first iteration at
which one of the learner's checks failed (a non-finite loss or parameter, a loss out of
bounds) and which one; :meth:`DivergenceWatch.check` reads that once on the host and raises
:class:`~ebmlab.errors.DivergenceError` with that iteration. The run loop calls the parts'
``check_divergence()`` at every evaluation and checkpoint (and when an op meets a non-finite
value), so a diverged run stops there, reporting the iteration it diverged at, and no state
after it is checkpointed.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ebmlab.errors import DivergenceError


def all_finite(tensors, device: torch.device) -> Tensor:
    """A bool scalar on ``device``: every element of ``tensors`` is finite (no host read)."""
    flags = [torch.isfinite(t).all() for t in tensors]
    return torch.stack(flags).all() if flags else torch.tensor(True, device=device)


class DivergenceWatch:
    """The first failed check of a learner, on the device. ``reasons``: what each check
    guards, in the order :meth:`observe` gets their flags (the first failing one is named);
    a reason is a name (its check is finiteness) or a (name, problem) pair, e.g.
    ``("the PCD loss", "({loss:.3g}) exceeds max_abs_loss in magnitude")``."""

    def __init__(self, reasons: tuple[str | tuple[str, str], ...]):
        self.reasons = tuple(reasons)
        self.first: Tensor | None = None  # float64 [3]: iteration, reason (1-based), loss

    def observe(self, iteration: int, ok: list[Tensor], loss: Tensor) -> None:
        """Record ``iteration`` unless an earlier one failed: ``ok[i]`` is a bool device scalar,
        False when check i failed; ``loss`` the iteration's loss (shown for a bound)."""
        failed = ~torch.stack(ok)
        reason = torch.where(failed.any(), failed.to(torch.int64).argmax() + 1, 0)
        here = torch.stack([torch.zeros_like(reason), reason]).to(torch.float64)
        here = torch.cat([here, loss.detach().reshape(1).to(torch.float64)])
        here[0] = iteration  # a Python number written on the device: no host read
        if self.first is None:
            self.first = torch.zeros_like(here)
        new = (self.first[1] == 0) & (here[1] > 0)
        self.first = torch.where(new, here, self.first)

    def check(self) -> None:
        """DivergenceError naming the first failed iteration and check (one host read)."""
        if self.first is None:
            return
        iteration, reason, loss = self.first.tolist()
        if reason:
            what = self.reasons[int(reason) - 1]
            what, problem = (what, "is not finite") if isinstance(what, str) else what
            raise DivergenceError(int(iteration), what, problem.format(loss=loss))
