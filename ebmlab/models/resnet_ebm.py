"""ResNet energy for binary 28x28 images (GWG / DLP / ACS deep-EBM experiments).

The network ("resnet-64", PROTOCOLS.md "Deep EBMs") maps x in {0,1}^784 to a scalar:
3x3 conv to ``n_channels`` maps, two stride-2 residual blocks (28 -> 14 -> 7), ``n_blocks``
more residual blocks (conv-Swish-conv + shortcut, Swish), no normalisation, mean pool over
space, linear to 1. At width 64 it has about 600k parameters.

The full unnormalised log density adds a factorised Bernoulli base term:

    log p~(x) = net(x) + sum_i [x_i log m_i + (1 - x_i) log(1 - m_i)],

m = the training-data mean clamped to [eps, 1 - eps]. The base is normalised, so it is also
the AIS base distribution (``base_log_prob``, ``sample_base``), and the intermediate AIS
densities are ``base + beta * net`` (see :class:`TemperedEBM`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmlab.errors import check
from ebmlab.models.base import EnergyModel


class _Block(nn.Module):
    """conv3x3(stride) - Swish - conv3x3, plus a (1x1 conv when strided) shortcut, then Swish."""

    def __init__(self, c: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, stride=stride, padding=1)
        self.conv2 = nn.Conv2d(c, c, 3, stride=1, padding=1)
        self.shortcut = nn.Conv2d(c, c, 1, stride=stride) if stride != 1 else nn.Identity()

    def forward(self, h: Tensor) -> Tensor:
        out = self.conv2(F.silu(self.conv1(h)))
        return F.silu(out + self.shortcut(h))


class ResNetEBM(EnergyModel):
    """``log_prob(x) = net(x) + log Bernoulli(x; m)`` over x [n, 784] (or [n, 28, 28]).

    Args:
        n_channels: feature maps (64 = the papers' resnet-64; smaller for CPU runs).
        n_blocks: stride-1 residual blocks after the two stride-2 ones (papers: 6).
        dim: number of pixels (784).
        image_shape: [28, 28].
        base_eps: clamp of the data mean in the Bernoulli base term (papers: 0.01).
    """

    state_kind = "binary"

    def __init__(
        self,
        n_channels: int,
        n_blocks: int,
        dim: int,
        image_shape: list[int],
        base_eps: float,
    ):
        super().__init__()
        check(n_channels >= 1, "n_channels", f"must be >= 1 (got {n_channels})")
        check(n_blocks >= 0, "n_blocks", f"must be >= 0 (got {n_blocks})")
        shape = tuple(int(s) for s in image_shape)
        check(
            len(shape) == 2 and shape[0] * shape[1] == dim,
            "image_shape",
            f"must be [H, W] with H * W = dim = {dim} (got {list(image_shape)})",
        )
        check(0 < base_eps < 0.5, "base_eps", f"must be in (0, 0.5) (got {base_eps})")
        self.dim, self.image_shape, self.base_eps = int(dim), shape, float(base_eps)
        self.n_channels, self.n_blocks = int(n_channels), int(n_blocks)
        c = self.n_channels
        self.proj = nn.Conv2d(1, c, 3, padding=1)
        self.blocks = nn.Sequential(
            _Block(c, 2), _Block(c, 2), *[_Block(c, 1) for _ in range(self.n_blocks)]
        )
        self.out = nn.Linear(c, 1)
        # base Bernoulli logits and log(1 - m); uniform until set_base_mean is called
        self.register_buffer("base_logits", torch.zeros(self.dim))
        self.register_buffer("base_log1m", torch.full((self.dim,), -0.6931471805599453))

    def set_base_mean(self, mean: Tensor) -> None:
        """Set m from the per-pixel training mean (clamped to [eps, 1 - eps])."""
        m = mean.detach().reshape(-1).to(self.base_logits).clamp(self.base_eps, 1 - self.base_eps)
        self.base_logits.copy_(torch.log(m) - torch.log1p(-m))
        self.base_log1m.copy_(torch.log1p(-m))

    @property
    def base_mean(self) -> Tensor:
        return torch.sigmoid(self.base_logits)

    def net(self, x: Tensor) -> Tensor:
        """The network's scalar output [n] (the learned part of log p~)."""
        h = x.reshape(x.shape[0], 1, *self.image_shape).to(self.proj.weight.dtype)
        h = self.blocks(self.proj(h))
        return self.out(h.mean(dim=(2, 3))).squeeze(-1)

    def base_log_prob(self, x: Tensor) -> Tensor:
        """Normalised log Bernoulli(x; m) [n]."""
        xf = x.reshape(x.shape[0], -1).to(self.base_logits.dtype)
        return xf @ self.base_logits + self.base_log1m.sum()

    def sample_base(self, n: int, generator: torch.Generator) -> Tensor:
        p = self.base_mean.expand(n, -1)
        u = torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype)
        return (u < p).to(p.dtype)

    def log_prob(self, x: Tensor) -> Tensor:
        return self.net(x) + self.base_log_prob(x)


class TemperedEBM:
    """Intermediate AIS density f_beta = (1 - beta) base + beta (net + base) = base + beta net.

    Any sampler run on this object leaves f_beta invariant. It remembers the network's value
    and gradient at the last batch it evaluated (``last``) so AIS can reuse them: a
    transition then costs the sampler's own one forward + backward per step.
    """

    state_kind = "binary"

    def __init__(self, model: ResNetEBM, beta: float = 1.0):
        self.model, self.beta = model, float(beta)
        self.dim = model.dim
        self.last: tuple[Tensor, Tensor, Tensor] | None = None

    def net_value_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        with torch.enable_grad():
            xg = x.detach().requires_grad_(True)
            v = self.model.net(xg)
            (g,) = torch.autograd.grad(v.sum(), xg)
        v, g = v.detach(), g.detach().reshape(x.shape)
        # a copy of x: kernels may reuse its storage (ChainState.merge)
        self.last = (x.detach().clone(), v, g)
        return v, g

    def combine(self, x: Tensor, net: Tensor, gnet: Tensor) -> tuple[Tensor, Tensor]:
        """(f_beta(x), grad f_beta(x)) from the network's value and gradient."""
        lp = self.model.base_log_prob(x) + self.beta * net
        g = self.model.base_logits.reshape(x.shape[1:]) + self.beta * gnet
        return lp, g

    def log_prob_and_grad(self, x: Tensor) -> tuple[Tensor, Tensor]:
        v, g = self.net_value_and_grad(x)
        return self.combine(x, v, g)

    def log_prob(self, x: Tensor) -> Tensor:
        return self.model.base_log_prob(x) + self.beta * self.model.net(x)
