"""The factorised discrete Langevin proposal, written once for DLP, AB and ACS.

Every coordinate moves independently (DLP Eq. 2-3, AB Eq. 11 and 14, ACS Eq. 5-6):

    q_i(v | x) ∝ exp( b_i (v - x_i) - (v - x_i)^2 / (2 alpha_i) ),   b = w grad f(x) + s,

with the gradient weight ``w`` (DLP 1/2, AB alpha, ACS beta), an optional extra linear term
``s`` (AB's Gaussian integral trick) and the quadratic term given either as a step size alpha
(DLP, ACS) or as a precision ``P = 1 / alpha`` (AB, where P = alpha D + 1/sigma may be a
vector). The two forms are the same proposal; each sampler keeps the one it was written with,
so that its floating-point results do not change.

- binary {0,1}: independent flips with logit ``a_i = b_i (1 - 2 x_i) - 1 / (2 alpha_i)``;
- ordinal {0..S-1}: a softmax over the S values of each coordinate;
- categorical (one-hot, last dim S): ``||e_v - e_{x_i}||^2 = 2 [v != x_i]`` (DLP App. B), so the
  logits are ``w (g_v - g_{x_i}) - [v != x_i] / alpha_i``.

States are flat: x, grad [chains, d] (binary, ordinal) or [chains, d, S] (categorical).

Binary MH kernels use the split form :func:`flip_logits` / :func:`draw_flips` /
:func:`flip_log_q`: the logits and the normaliser ``sum_i softplus(a_i)`` computed at the
proposal for the reverse move are the next step's forward terms when the proposal is
accepted, so the kernels keep them in ``ChainState.aux`` (:func:`cached_flip_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor
from torch.nn.functional import softplus

from ebmlab.core.state import ChainState
from ebmlab.samplers.base import value_and_grad
from ebmlab.samplers.spaces import BINARY, ORDINAL, StateSpace


@dataclass(frozen=True)
class Langevin:
    """Parameters of one proposal: gradient weight and ONE of step size / precision.

    ``step`` and ``precision`` are a float or a per-coordinate tensor [d].
    """

    weight: float
    step: float | Tensor | None = None
    precision: float | Tensor | None = None

    def __post_init__(self):
        if (self.step is None) == (self.precision is None):
            raise ValueError("Langevin: give exactly one of step and precision")

    def _per_value(self, t):
        # a per-coordinate tensor [d] broadcast over the values axis of [chains, d, S]
        return t[:, None] if isinstance(t, Tensor) else t

    def flip_penalty(self):
        """1 / (2 alpha): the quadratic term of a binary flip."""
        return 0.5 / self.step if self.precision is None else 0.5 * self.precision

    def value_penalty(self, d2: Tensor) -> Tensor:
        """(v - x_i)^2 / (2 alpha_i) for squared distances d2 [chains, d, S]."""
        if self.precision is None:
            return d2 / (2 * self._per_value(self.step))
        return 0.5 * self._per_value(self.precision) * d2

    def tag(self) -> tuple | None:
        """What the proposal's cached terms depend on (None: per-coordinate tensors, no cache)."""
        if isinstance(self.step, Tensor) or isinstance(self.precision, Tensor):
            return None
        return ("langevin", float(self.weight), self.step, self.precision)

    def onehot_penalty(self, off: Tensor) -> Tensor:
        """[v != x_i] / alpha_i for the mask ``off`` = 1 - x [chains, d, S]."""
        if self.precision is None:
            return off / self._per_value(self.step)
        return self._per_value(self.precision) * off


def sample_categorical(logits: Tensor, generator: torch.Generator) -> Tensor:
    """Index of a categorical draw along the last dim (Gumbel-max), explicit generator."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
    tiny = torch.finfo(logits.dtype).tiny
    gumbel = -torch.log(-torch.log(u.clamp_min(tiny)))
    return torch.argmax(logits + gumbel, dim=-1)


def logits(
    space: StateSpace, x: Tensor, grad: Tensor, p: Langevin, shift: Tensor | None = None
) -> Tensor:
    """Binary: flip logits [chains, d]; ordinal / categorical: log q_i(v|x) [chains, d, S]."""
    if space.kind == BINARY:
        return flip_logits(x, grad, p, shift)
    if space.kind == ORDINAL:
        b = p.weight * grad if shift is None else p.weight * grad + shift
        delta = torch.arange(space.n_states, device=x.device, dtype=x.dtype) - x[:, :, None]
        return torch.log_softmax(b[:, :, None] * delta - p.value_penalty(delta**2), dim=-1)
    g_cur = (grad * x).sum(-1, keepdim=True)
    lin = p.weight * (grad - g_cur) if shift is None else p.weight * (grad - g_cur) + shift
    return torch.log_softmax(lin - p.onehot_penalty(1 - x), dim=-1)


def sample(
    space: StateSpace, x: Tensor, lg: Tensor, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """Draw y ~ q(.|x) from :func:`logits` ``lg``: (y, log q(y|x) [chains], jump [chains]).

    The jump is the Hamming distance (binary, categorical) or the L1 distance (ordinal).
    """
    if space.kind == BINARY:
        y, flip = draw_flips(x, lg, generator)
        return y, _flip_log_prob(lg, flip), flip.sum(-1)
    idx = sample_categorical(lg, generator)
    if space.kind == ORDINAL:
        y = idx.to(x.dtype)
        return y, _gather(lg, idx), (y - x).abs().sum(-1)
    y = torch.nn.functional.one_hot(idx, x.shape[-1]).to(x.dtype)
    return y, (lg * y).sum(-1).sum(-1), (y - x).abs().sum((1, 2)) / 2


def log_prob(space: StateSpace, x: Tensor, lg: Tensor, y: Tensor) -> Tensor:
    """log q(y|x) [chains] from :func:`logits` ``lg`` computed at x."""
    if space.kind == BINARY:
        return _flip_log_prob(lg, (x != y).to(lg.dtype))
    if space.kind == ORDINAL:
        return _gather(lg, y.long())
    return (lg * y).sum(-1).sum(-1)


def propose(
    space: StateSpace,
    x: Tensor,
    grad: Tensor,
    p: Langevin,
    generator: torch.Generator,
    shift: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Draw y ~ q(.|x): (y, log q(y|x) [chains], jump [chains])."""
    return sample(space, x, logits(space, x, grad, p, shift), generator)


def log_q(space: StateSpace, x: Tensor, grad: Tensor, p: Langevin, y: Tensor, shift=None) -> Tensor:
    """log q(y|x) [chains] given grad f at x (the reverse move's term of an MH ratio)."""
    return log_prob(space, x, logits(space, x, grad, p, shift), y)


def flip_logits(x: Tensor, grad: Tensor, p: Langevin, shift: Tensor | None = None) -> Tensor:
    """Binary flip logits ``a = b (1 - 2x) - 1/(2 alpha)``, ``b = w grad (+ shift)`` [chains, d]."""
    if shift is not None:
        return (p.weight * grad + shift) * (1 - 2 * x) - p.flip_penalty()
    # w (1 - 2x) = +-w exactly, so this is bit-identical to (w grad)(1 - 2x) - 1/(2 alpha)
    signed_w = torch.mul(x, -2.0 * p.weight).add_(p.weight)
    a, pen = torch.mul(grad, signed_w), p.flip_penalty()
    if isinstance(pen, Tensor) and torch.promote_types(a.dtype, pen.dtype) != a.dtype:
        return a - pen
    return a.sub_(pen)


def uniform(shape, generator: torch.Generator, device, dtype) -> Tensor:
    """U[0, 1) draws. float32 on CPU: two 24-bit uniforms (the resolution of torch.rand)
    from each 64-bit integer draw, cheaper than torch.rand there; otherwise torch.rand."""
    if dtype != torch.float32 or torch.device(device).type != "cpu":
        return torch.rand(shape, generator=generator, device=device, dtype=dtype)
    m = int(torch.Size(shape).numel())
    bits = torch.empty((m + 1) // 2, dtype=torch.int64, device=device).random_(generator=generator)
    low24 = bits.view(torch.int32)[:m].bitwise_and_(0xFFFFFF)  # bits 0-23 and 32-55
    return low24.to(torch.float32).mul_(2.0**-24).view(shape)


def draw_flips(x: Tensor, a: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Independent flips with probability sigmoid(a): (y, flip as 0/1 in x's dtype)."""
    u = uniform(a.shape, generator, a.device, a.dtype)
    flip = torch.lt(u, torch.sigmoid(a), out=u)  # 0/1 written over the uniforms
    flip = flip if flip.dtype == x.dtype else flip.to(x.dtype)
    return torch.sub(x, flip).abs_(), flip


def flip_norm(a: Tensor) -> Tensor:
    """sum_i softplus(a_i) [chains]: minus the log-probability of flipping nothing."""
    return softplus(a).sum(-1)


def flip_log_q(a: Tensor, norm: Tensor, flip: Tensor) -> Tensor:
    """log q [chains] of the flip pattern ``flip`` given logits ``a`` and :func:`flip_norm`."""
    return (flip * a).sum(-1) - norm


def cached_flip_terms(
    aux: dict, x: Tensor, grad: Tensor, p: Langevin
) -> tuple[Tensor, Tensor, bool]:
    """(logits, norm, hit) at x: from ``aux`` when they were cached for this proposal, else
    computed. A hit saves the logits and the softplus pass of the forward move."""
    tag = p.tag()
    entry = aux.get("langevin") if tag is not None else None
    if entry is not None and entry[0] == tag:
        a, norm = entry[1]
        return a, norm, True
    a = flip_logits(x, grad, p)
    return a, flip_norm(a), False


class BinaryMove(NamedTuple):
    """One binary proposal x -> y (flat [chains, d]) evaluated at y.

    ``proposed`` is the chain state at y (its ``aux`` holds the reverse terms for reuse),
    ``fwd`` / ``rev`` are log q(y|x) / log q(x|y) (None for an unadjusted move) and
    ``current`` is the input state with its forward terms put in ``aux`` (merge into it)."""

    y: Tensor
    gy: Tensor
    flip: Tensor
    proposed: ChainState
    fwd: Tensor | None
    rev: Tensor | None
    current: ChainState


def binary_move(
    model, state: ChainState, x: Tensor, gx: Tensor, p: Langevin, generator, mh: bool
) -> BinaryMove:
    """Draw y ~ q(.|x) on binary states and evaluate log p~ and its gradient at y (one
    forward + backward). With ``mh`` also the forward and reverse log q, reusing the forward
    terms cached in ``state.aux`` by the previous step when they were computed for ``p``."""
    shape, n = state.x.shape, state.x.shape[0]
    if mh:
        a, norm, hit = cached_flip_terms(state.aux, x, gx, p)
    else:  # an unadjusted move needs neither q(y|x) nor q(x|y)
        a, norm, hit = flip_logits(x, gx, p), None, True
    y, flip = draw_flips(x, a, generator)
    y_state = y.to(state.x.dtype).reshape(shape)
    lp_y, g_y = value_and_grad(model, y_state)
    gy = g_y.reshape(n, -1)
    gy = gy.to(torch.promote_types(gy.dtype, torch.float32))
    if not mh:
        proposed = ChainState(x=y_state, log_prob=lp_y, grad=g_y, extra=state.extra)
        return BinaryMove(y, gy, flip, proposed, None, None, state)
    a_y = flip_logits(y, gy, p)
    norm_y = flip_norm(a_y)
    tag, aux = p.tag(), {}
    if tag is not None:
        aux = {"langevin": (tag, (a_y, norm_y))}
        if not hit:
            state = state.replace(aux={**state.aux, "langevin": (tag, (a, norm))})
    proposed = ChainState(x=y_state, log_prob=lp_y, grad=g_y, extra=state.extra, aux=aux)
    fwd, rev = flip_log_q(a, norm, flip), flip_log_q(a_y, norm_y, flip)
    return BinaryMove(y, gy, flip, proposed, fwd, rev, state)


def _flip_log_prob(a: Tensor, flip: Tensor) -> Tensor:
    """sum_i log Bernoulli(flip_i; sigmoid(a_i)) = sum_i flip_i a_i - softplus(a_i), stable."""
    return flip_log_q(a, flip_norm(a), flip)


def _gather(lq: Tensor, idx: Tensor) -> Tensor:
    return lq.gather(2, idx[:, :, None])[:, :, 0].sum(-1)
