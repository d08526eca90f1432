"""Bernoulli-Bernoulli restricted Boltzmann machine.

Joint (DLP App. I.3; ACS Sec. 6.1.1): log p(v, h) = h^T W v + b^T v + c^T h - log Z with
v in {0,1}^V, h in {0,1}^H, W [H, V], visible bias b [V], hidden bias c [H]. Summing h out
gives the unnormalised marginal used by every sampler:

    log p~(v) = sum_j softplus(W v + c)_j + b^T v,

and exact conditionals p(h = 1 | v) = sigmoid(W v + c), p(v = 1 | h) = sigmoid(W^T h + b).
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ebmlab.errors import ConfigError
from ebmlab.models.base import EnergyModel


class BernoulliRBM(EnergyModel):
    """RBM with V visible and H hidden binary units.

    Args:
        n_visible: V (784 for the image benchmarks).
        n_hidden: H (500 in DLP / ACS).
        init_std: W starts as N(0, init_std^2); biases start at 0 (reference: 0.01).
        init_seed: seed of the initial W draw.
    """

    state_kind = "binary"
    n_states = 2

    def __init__(self, n_visible: int, n_hidden: int, init_std: float, init_seed: int):
        super().__init__()
        if not isinstance(n_visible, int) or isinstance(n_visible, bool) or n_visible < 1:
            raise ConfigError("n_visible", f"an integer >= 1 (got {n_visible!r})")
        if not isinstance(n_hidden, int) or isinstance(n_hidden, bool) or n_hidden < 1:
            raise ConfigError("n_hidden", f"an integer >= 1 (got {n_hidden!r})")
        if not float(init_std) >= 0.0:
            raise ConfigError("init_std", f"a float >= 0 (got {init_std!r})")
        self.dim = n_visible
        self.n_visible = n_visible
        self.n_hidden = n_hidden
        g = torch.Generator().manual_seed(int(init_seed))
        self.W = nn.Parameter(torch.randn(n_hidden, n_visible, generator=g) * float(init_std))
        self.b = nn.Parameter(torch.zeros(n_visible))
        self.c = nn.Parameter(torch.zeros(n_hidden))

    def extra_repr(self) -> str:
        return f"n_visible={self.n_visible}, n_hidden={self.n_hidden}"

    # -- densities ---------------------------------------------------------------------------
    def hidden_logits(self, v: Tensor) -> Tensor:
        """W v + c, [B, H]."""
        return v @ self.W.t() + self.c

    def visible_logits(self, h: Tensor) -> Tensor:
        """W^T h + b, [B, V]."""
        return h @ self.W + self.b

    def log_prob_from_hidden_logits(self, v: Tensor, hidden_logits: Tensor) -> Tensor:
        """log p~(v) given precomputed ``hidden_logits(v)`` (lets block Gibbs reuse them)."""
        return F.softplus(hidden_logits).sum(-1) + v @ self.b

    def log_prob(self, v: Tensor) -> Tensor:
        """Unnormalised marginal log p~(v) = sum softplus(W v + c) + b^T v, [B]."""
        return self.log_prob_from_hidden_logits(v, self.hidden_logits(v))

    def log_prob_and_grad(self, v: Tensor) -> tuple[Tensor, Tensor]:
        """(log p~(v), d/dv log p~(v) = b + W^T sigmoid(W v + c)), both detached."""
        with torch.no_grad():
            hl = self.hidden_logits(v)
            lp = self.log_prob_from_hidden_logits(v, hl)
            grad = torch.sigmoid(hl) @ self.W + self.b
        return lp, grad

    # -- single-coordinate flips (GWG-1, Gibbs-1) ----------------------------------------------
    def flip_tag(self) -> tuple:
        """Identifies the parameter values a flip cache belongs to (changes when they do)."""
        return tuple((id(t), t._version) for t in (self.W, self.b, self.c))

    @torch.no_grad()
    def flip_cache(self, v: Tensor, with_grad: bool) -> tuple[Tensor, Tensor | None, Tensor]:
        """(log p~(v), its gradient or None, the flip cache): one forward (+ backward).

        The cache is the hidden pre-activations W v + c in float64 [B, H]; :meth:`flip_update`
        moves it along single flips without a V x H product and without drift."""
        hl = self.hidden_logits(v)
        lp = self.log_prob_from_hidden_logits(v, hl)
        grad = torch.sigmoid(hl) @ self.W + self.b if with_grad else None
        return lp, grad, hl.double()

    @torch.no_grad()
    def flip_update(
        self, y: Tensor, idx: Tensor, cache: Tensor, with_grad: bool
    ) -> tuple[Tensor, Tensor | None, Tensor]:
        """(log p~(y), its gradient or None, the cache at y) for ``y`` = the state of ``cache``
        with coordinate ``idx[b]`` of chain b flipped: W y + c = W x + c + (y_i - x_i) W[:, i]
        (a rank-1 update per chain); the gradient still costs one H x V product."""
        rows = torch.arange(y.shape[0], device=y.device)
        delta = (2.0 * y[rows, idx] - 1.0).to(cache.dtype)  # y_i - x_i = +-1
        cols = self._visible_major().index_select(0, idx)  # W[:, i] of each chain, [B, H]
        cache_y = torch.addcmul(cache, delta[:, None], cols.to(cache.dtype))
        hl = cache_y.to(self.W.dtype)
        lp = self.log_prob_from_hidden_logits(y, hl)
        grad = torch.sigmoid(hl) @ self.W + self.b if with_grad else None
        return lp, grad, cache_y

    def _visible_major(self) -> Tensor:
        """W^T as a contiguous [V, H] copy, so that a column of W is one contiguous row
        (kept until W changes; not a parameter, not saved)."""
        key = (self.W.data_ptr(), self.W._version, self.W.dtype, self.W.device)
        memo = self.__dict__.get("_wt_memo")
        if memo is None or memo[0] != key:
            memo = (key, self.W.detach().t().contiguous())
            self.__dict__["_wt_memo"] = memo
        return memo[1]

    def clear_memos(self) -> None:
        """Forget the W^T copy (a captured CUDA graph recomputes it from W: core.graphs)."""
        self.__dict__.pop("_wt_memo", None)

    def log_joint(self, v: Tensor, h: Tensor) -> Tensor:
        """Unnormalised log p~(v, h) = h^T W v + b^T v + c^T h, [B]."""
        return ((h @ self.W) * v).sum(-1) + v @ self.b + h @ self.c

    # -- exact conditionals --------------------------------------------------------------------
    def sample_h(self, v: Tensor, generator: torch.Generator) -> Tensor:
        """h ~ p(h | v) = Bernoulli(sigmoid(W v + c))."""
        return _bernoulli(torch.sigmoid(self.hidden_logits(v)), generator)

    def sample_v(self, h: Tensor, generator: torch.Generator) -> Tensor:
        """v ~ p(v | h) = Bernoulli(sigmoid(W^T h + b))."""
        return _bernoulli(torch.sigmoid(self.visible_logits(h)), generator)

    @torch.no_grad()
    def gibbs(self, v: Tensor, n_steps: int, generator: torch.Generator) -> Tensor:
        """``n_steps`` block-Gibbs sweeps v -> h -> v; returns the last visible sample."""
        for _ in range(n_steps):
            v = self.sample_v(self.sample_h(v, generator), generator)
        return v

    # -- initialisation and helpers ------------------------------------------------------------
    @torch.no_grad()
    def init_visible_bias_from_data(self, mean: Tensor, eps: float = 0.01) -> None:
        """b = logit(clamp(data mean, eps, 1 - eps)) (GWG / DLP protocol)."""
        m = mean.detach().to(self.b).reshape(self.n_visible).clamp(eps, 1.0 - eps)
        self.b.copy_(torch.log(m) - torch.log1p(-m))

    def parameters_for_ais(self) -> tuple[Tensor, Tensor, Tensor]:
        """(W [H, V], b [V], c [H]) detached, for AIS with intermediate RBMs."""
        return self.W.detach(), self.b.detach(), self.c.detach()

    @torch.no_grad()
    def exact_log_partition(self) -> Tensor:
        """log Z by enumerating the smaller layer (tiny RBMs only: min(V, H) <= 20)."""
        V, H = self.n_visible, self.n_hidden
        if min(V, H) > 20:
            raise ValueError(f"exact log Z needs min(V, H) <= 20 (got V={V}, H={H})")
        W, b, c = (t.double() for t in self.parameters_for_ais())
        if H <= V:
            h = all_binary(H, dtype=torch.float64, device=W.device)
            terms = h @ c + F.softplus(h @ W + b).sum(-1)
        else:
            v = all_binary(V, dtype=torch.float64, device=W.device)
            terms = v @ b + F.softplus(v @ W.t() + c).sum(-1)
        return torch.logsumexp(terms, 0)


def _bernoulli(p: Tensor, generator: torch.Generator) -> Tensor:
    u = torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype)
    return (u < p).to(p.dtype)


def all_binary(n: int, dtype=torch.float32, device=None) -> Tensor:
    """All 2^n binary vectors, [2^n, n] (row k is k in binary, most significant bit first)."""
    rows = list(itertools.product((0.0, 1.0), repeat=n))
    return torch.tensor(rows, dtype=dtype, device=device).reshape(2**n, n)


@torch.no_grad()
def best_class_by_log_prob(
    model: EnergyModel, x: Tensor, labels: Tensor, batch_size: int = 1000
) -> tuple[int, Tensor]:
    """Class whose examples have the highest mean log p~ (ACS mode initialisation).

    Returns (class, mean log p~ per class [n_classes], NaN for absent classes)."""
    lp = torch.cat([model.log_prob(x[i : i + batch_size]) for i in range(0, len(x), batch_size)])
    n_cls = int(labels.max()) + 1
    sums = torch.zeros(n_cls, dtype=lp.dtype).index_add_(0, labels.cpu(), lp.cpu())
    counts = torch.bincount(labels.cpu(), minlength=n_cls).to(lp.dtype)
    means = sums / counts  # NaN where a class has no example
    best = int(torch.nan_to_num(means, nan=-float("inf")).argmax())
    return best, means
