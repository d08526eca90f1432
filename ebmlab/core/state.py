"""Explicit chain state and per-step info shared by every kernel (BlackJAX-style).

``ChainState`` caches ``log_prob(x)`` and ``grad log_prob(x)`` so a Metropolis-Hastings
step costs one forward and one backward; ``StepInfo`` is what one step did.

``ChainState.aux`` holds further per-chain quantities a kernel derived from (x, grad) or
from the model at x (a proposal's flip logits, an RBM's hidden pre-activations), so that
the reverse-move quantities of an accepted proposal are the next step's forward ones.
Each entry is ``name -> (tag, tensors)``: the tag says what the tensors were computed
with (proposal parameters, model parameter versions) and a kernel uses an entry only when
the tag matches. ``select`` combines entries row by row; replacing x, log_prob or grad
drops them. Checkpoints keep only the model's flip cache, tagged ``RESTORED`` until a
kernel has checked it against the model (the other entries are recomputed exactly).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

RESTORED = ("restored",)  # tag of an aux entry read from a checkpoint: check it before use


class _Capturing:
    """``depth`` > 0 while :mod:`ebmlab.core.graphs` captures or replays a block on its CPU
    stand-in: the CPU-only shortcuts below read tensor values on the host (``bool(t.all())``),
    which a captured block must not do, so they step aside (same numbers either way)."""

    depth = 0


CAPTURING = _Capturing()


def _host_reads_ok(t: Tensor) -> bool:
    return t.device.type == "cpu" and not CAPTURING.depth


@dataclass
class ChainState:
    """Per-chain state: ``x`` [chains, ...], ``log_prob`` [chains], ``grad`` like x or None.
    ``log_prob`` is None only after a step of a sampler that never reads it there (the GRBM
    Gibbs-Langevin step without its Metropolis test); such a sampler computes it when needed."""

    x: Tensor
    log_prob: Tensor | None
    grad: Tensor | None = None
    extra: dict = field(default_factory=dict)
    aux: dict = field(default_factory=dict)

    def replace(self, **kw) -> ChainState:
        """A copy with fields replaced; new x, log_prob or grad drop the (stale) ``aux``."""
        if "aux" not in kw and any(k in kw for k in ("x", "log_prob", "grad")):
            kw["aux"] = {}
        return replace(self, **kw)

    def state_dict(self) -> dict:
        """The chains and their cached log-probabilities and gradients, for a checkpoint,
        and the model's incremental flip cache when there is one (``aux["flip"]``: rebuilt
        from scratch it would differ by rounding, and a resumed run must continue exactly)."""
        d = {"x": self.x, "log_prob": self.log_prob, "grad": self.grad}
        if "flip" in self.aux:
            d["flip_cache"] = self.aux["flip"][1]
        return d

    def restored(self, d) -> ChainState:
        """This state with ``d`` (from :meth:`state_dict`, or an (x, log_prob, grad) tuple
        as older checkpoints hold) put back on this state's device, wherever ``d``'s tensors
        were loaded (a checkpoint written on a GPU restored on a CPU, or the other way round);
        ``extra`` is kept."""
        if isinstance(d, (tuple, list)):
            d = dict(zip(("x", "log_prob", "grad"), d))
        dev = self.x.device

        def here(t):
            return None if t is None else t.to(dev)

        cache = d.get("flip_cache")
        aux = {"flip": (RESTORED, tuple(here(t) for t in cache))} if cache else {}
        x, log_prob, grad = here(d["x"]), here(d["log_prob"]), here(d["grad"])
        return replace(self, x=x, log_prob=log_prob, grad=grad, aux=aux)

    def select(self, accept: Tensor, other: ChainState) -> ChainState:
        """Take ``other``'s values where ``accept`` [chains] is True, else keep ours (new
        tensors; neither state is modified). ``aux`` entries present in both states under
        the same tag are combined the same way, the others are dropped."""
        take = _take_rows
        if _host_reads_ok(accept):  # all or none accepted (common): no copy at all
            if bool(accept.all()):
                take = _take_new
            elif not bool(accept.any()):
                take = _take_old
        g = None
        if self.grad is not None and other.grad is not None:
            g = take(accept, other.grad, self.grad)
        aux = {}
        for name, (tag, ts) in other.aux.items():
            mine = self.aux.get(name)
            if mine is not None and mine[0] == tag:
                aux[name] = (tag, tuple(take(accept, o, m) for o, m in zip(ts, mine[1])))
        return ChainState(
            x=take(accept, other.x, self.x),
            log_prob=take(accept, other.log_prob, self.log_prob),
            grad=g,
            extra=self.extra,
            aux=aux,
        )

    def merge(self, accept: Tensor, proposal: ChainState) -> ChainState:
        """:meth:`select` for a ``proposal`` whose tensors the caller owns (made by this step
        and used by nothing else afterwards; a model must therefore not keep references to
        the batches it evaluates, e.g. ``TemperedEBM.last`` keeps a copy): on CPU, when at
        most half of the chains
        reject, their rows are copied into the proposal's tensors in place, which moves far
        less memory than building new tensors; otherwise this is :meth:`select`."""
        if not _host_reads_ok(accept):
            return self.select(accept, proposal)
        pairs = [(proposal.x, self.x), (proposal.log_prob, self.log_prob)]
        if self.grad is not None or proposal.grad is not None:
            pairs.append((proposal.grad, self.grad))
        for name, (tag, ts) in proposal.aux.items():
            mine = self.aux.get(name)
            if mine is None or mine[0] != tag:
                return self.select(accept, proposal)
            pairs.extend(zip(ts, mine[1]))
        rows = (~accept).nonzero().squeeze(1)
        if 2 * rows.numel() > accept.numel() or not all(_row_copyable(*p) for p in pairs):
            return self.select(accept, proposal)
        for dst, src in pairs if rows.numel() else ():
            dst.index_copy_(0, rows, src.index_select(0, rows))
        return proposal.replace(extra=self.extra)


def _row_copyable(dst: Tensor | None, src: Tensor | None) -> bool:
    """``dst``'s rows can be overwritten in place from ``src`` (no expand, no autograd)."""
    return (
        dst is not None
        and src is not None
        and dst.shape == src.shape
        and dst.dtype == src.dtype
        and dst.is_contiguous()
        and not dst.requires_grad
    )


def _take_new(accept: Tensor, new: Tensor, old: Tensor) -> Tensor:
    return new if new.dtype == old.dtype else _take_rows(accept, new, old)


def _take_old(accept: Tensor, new: Tensor, old: Tensor) -> Tensor:
    return old if new.dtype == old.dtype else _take_rows(accept, new, old)


def _take_rows(accept: Tensor, new: Tensor, old: Tensor) -> Tensor:
    """Row b of ``new`` where accept[b], else of ``old``: the values torch.where gives.

    Floating [chains, ...] tensors go through ``lerp(old, new, accept)``: with weights exactly
    0 and 1 it returns the old or the new value exactly (a zero may change sign) whenever
    new - old is finite, at a fraction of the cost of a broadcast ``where`` on CPU. When the
    result is not finite (a non-finite input, an overflow) the rows are taken with ``where``,
    as they are on other devices."""
    mask = accept.view(-1, *([1] * (new.dim() - 1)))
    if new.dim() < 2 or not new.is_floating_point() or new.dtype != old.dtype:
        return torch.where(mask, new, old)
    if not _host_reads_ok(new):  # where is fast there, and the check below would sync
        return torch.where(mask, new, old)
    out = torch.lerp(old, new, mask.to(new.dtype))
    if not torch.isfinite(out.sum()):
        return torch.where(mask, new, old)
    return out


@dataclass
class StepInfo:
    """What one step did, per chain where it makes sense.

    accept_prob: MH acceptance probability [chains] (1 for always-accept moves).
    accepted: whether the move was taken [chains] (bool).
    jump: Hamming distance (or L1 for ordinal states) between old and new x [chains].
    n_log_prob: batched log_prob evaluations this step cost (one per chain each).
    n_grad: batched gradient evaluations this step cost.
    proposed_jump: coordinates the proposal changed [chains], before the MH test (None where a
        kernel does not report it).
    """

    accept_prob: Tensor
    accepted: Tensor
    jump: Tensor
    n_log_prob: int
    n_grad: int
    proposed_jump: Tensor | None = None

    def totals(self) -> dict:
        """Per-step scalars for :class:`ebmlab.core.loop.Totals`, left on the device."""
        return {
            "accept_rate": self.accept_prob.float().mean(),
            "jump": self.jump.float().mean(),
            "n_log_prob": self.n_log_prob,
            "n_grad": self.n_grad,
            **self._proposed(),
        }

    def _proposed(self) -> dict:
        if self.proposed_jump is None:
            return {}
        return {"proposal_flips": self.proposed_jump.float().mean()}

    def scalars(self) -> dict[str, float]:
        return {
            "accept_rate": float(self.accept_prob.float().mean()),
            "jump": float(self.jump.float().mean()),
            "n_log_prob": float(self.n_log_prob),
            "n_grad": float(self.n_grad),
            **{k: float(v) for k, v in self._proposed().items()},
        }
