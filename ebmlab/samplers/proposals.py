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
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor
from torch.nn.functional import softplus

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
        b = p.weight * grad if shift is None else p.weight * grad + shift
        return b * (1 - 2 * x) - p.flip_penalty()
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
        u = torch.rand(lg.shape, generator=generator, device=lg.device, dtype=lg.dtype)
        flip = (u < torch.sigmoid(lg)).to(lg.dtype)
        return x + flip * (1 - 2 * x), _flip_log_prob(lg, flip), flip.sum(-1)
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


def _flip_log_prob(a: Tensor, flip: Tensor) -> Tensor:
    """sum_i log Bernoulli(flip_i; sigmoid(a_i)) = sum_i flip_i a_i - softplus(a_i), stable."""
    return (flip * a).sum(-1) - softplus(a).sum(-1)


def _gather(lq: Tensor, idx: Tensor) -> Tensor:
    return lq.gather(2, idx[:, :, None])[:, :, 0].sum(-1)
