"""Any-scale balanced (AB) samplers (Sun, Dai, Xia & Schuurmans, ICLR 2023).

All AB proposals factorise over coordinates (possibly given an auxiliary variable). With
``f = log pi``, ``g = grad f(x)`` and ``delta = v - x_i`` for a candidate value ``v`` of
coordinate ``i``, the per-coordinate log-weights are

    b_i * delta - P_i * delta^2 / 2                                             (*)

(a softmax over the values {0..S-1}; on binary states an independent flip with logit
``b_i (1 - 2 x_i) - P_i / 2``). The members of the family differ in ``b`` and ``P``:

- AB-1st (Eq. 11 with W = 0, weight g(t) = t^alpha, heat kernel of scale sigma):
  ``b = alpha g``, ``P = 1/sigma``; binary flip prob ``sigmoid(alpha d~_i - 1/(2 sigma))``.
  ``alpha = 1/2`` is exactly DMALA with step size sigma.
- Quadratic AB (Eq. 11-15, App. A.5; AB-shift / AB-max / AB-trace by how D is chosen):
  the Gaussian integral trick with ``A = W + D`` PSD and a factor ``B^T B = A``. The auxiliary
  variable is ``u | x ~ N(B x, I / alpha)`` (the variance ``1/alpha`` is what makes the
  conditional of y given u the form printed in Eq. 14; at alpha = 1 it is the N(., I) of the
  text), and ``y | x, u`` factorises with ``P = alpha D + 1/sigma`` and
  ``b = alpha (g - W x + B^T u) + x / sigma - P x`` (Eq. 14 as printed drops the kernel's
  ``y.x / sigma`` term, which would centre the kernel at 0 instead of x). Writing
  ``u = B x + xi / sqrt(alpha)``, ``eta = B^T xi ~ N(0, A)``: forward
  ``b = alpha g(x) + sqrt(alpha) eta``; reverse (same u)
  ``b' = alpha (g(y) + A (x - y)) + sqrt(alpha) eta``. The MH ratio of Eq. 15 is
  ``f(y) - f(x) + log q(x|y,u) - log q(y|x,u) + log N(u; B y) - log N(u; B x)`` with
  ``log N(u; B y) - log N(u; B x) = -sqrt(alpha) eta.(x - y) - alpha/2 (x - y)^T A (x - y)``.
  This is an exact MH kernel on the (x, u) space for any W and D (Gibbs refresh of u, then
  an MH move of x with u fixed). W is replaced by ``B^T B - D`` after factorising, so the
  formulas hold exactly (not just up to the rounding of the square root). For a quadratic
  target with W its Hessian, alpha = 1 and sigma = inf, every proposal is accepted.
- DLP-trace (Sec. 5.1): DLP (alpha = 1/2, W = 0) with the anisotropic kernel
  ``exp(-z^T D z / (2 sigma))``, D from the trace SDP: ``b = g / 2``, ``P = D / sigma``. (The
  paper prints ``exp(-z^T D z / sigma)``; the factor 2 is absorbed by sigma, here chosen so
  that D = I is the DLP kernel.)
- AB-diag (deep EBMs, Sec. 5.4 / App. B.6): a constant diagonal ``W_ii = 1 / (1 + var_i)``
  from the data's per-coordinate variance, no Gaussian trick: ``b = alpha g``,
  ``P = 1/sigma - diag_sign * alpha * W_ii``.

Burn-in then mixing (Alg. 1). For ``step_count < burn_in`` the sampler is adaptive:
(sigma, alpha) are tuned by coordinate ascent on the average jump distance (Alg. 3-4) when
``adapt`` is true, and the quadratic samplers collect (y - x, grad f(y) - grad f(x)) of every
proposal during the first ``w_fraction * burn_in`` steps (proposing with AB-1st, W = D = 0),
then estimate W (Eq. 10, solved in closed form), solve D (``ebmlab.samplers.ab_sdp``) and
factor W + D once; adaptation then restarts (new cycle, initial gamma) with the quadratic
proposal until ``burn_in``.
From ``step_count >= burn_in`` on everything is frozen: the chain is a fixed, exact MH kernel.
(The paper keeps adapting after burn-in; we freeze so the reported chain is exact.)
Everything tuned is in ``state_dict`` for resume. Every step costs one log_prob and one
gradient evaluation, like DMALA; the one-off cost of W, D and the square root is in
``setup_stats``.
"""

from __future__ import annotations

import math
import time

import torch
from torch import Tensor
from torch.nn.functional import softplus

from ebmlab.errors import ConfigError, check
from ebmlab.samplers import ab_sdp
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, bernoulli, mh_accept, value_and_grad
from ebmlab.samplers.gibbs import sample_categorical

ALPHA_MIN = 0.5  # the locally balanced end of the any-scale family


# ----------------------------------------------------------------------------- helpers


def _wide(t: Tensor) -> Tensor:
    dt = torch.promote_types(t.dtype, torch.float32)
    return t if t.dtype == dt else t.to(dt)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _kind(model) -> tuple[str, int]:
    kind = getattr(model, "state_kind", "binary")
    if kind == "binary":
        return kind, 2
    if kind == "ordinal":
        return kind, int(model.n_states)
    raise ValueError(f"AB samplers support binary and ordinal models, not state_kind={kind!r}")


def _flip_log_prob(a: Tensor, flip: Tensor) -> Tensor:
    """sum_i log Bernoulli(flip_i; sigmoid(a_i)), stable."""
    return (flip * a).sum(-1) - softplus(a).sum(-1)


def _ordinal_log_probs(x: Tensor, b: Tensor, P, S: int) -> Tensor:
    """log-softmax over v in {0..S-1} of (*) around x: [chains, d, S]."""
    vals = torch.arange(S, device=x.device, dtype=x.dtype)
    delta = vals[None, None, :] - x[:, :, None]
    Pc = P[None, :, None] if isinstance(P, Tensor) else P
    return torch.log_softmax(b[:, :, None] * delta - 0.5 * Pc * delta**2, dim=-1)


def factorized_propose(x: Tensor, b: Tensor, P, kind: str, S: int, generator) -> tuple:
    """Draw y from (*) around x; returns (y, log q(y|x)) (x, b flat [chains, d])."""
    if kind == "binary":
        sign = 1 - 2 * x
        a = b * sign - 0.5 * P
        flip = bernoulli(torch.sigmoid(a), generator)
        return x + flip * sign, _flip_log_prob(a, flip)
    lq = _ordinal_log_probs(x, b, P, S)
    y = sample_categorical(lq, generator).to(x.dtype)
    return y, lq.gather(2, y.long()[:, :, None])[:, :, 0].sum(-1)


def factorized_log_prob(x: Tensor, b: Tensor, P, y: Tensor, kind: str, S: int) -> Tensor:
    """log q(y|x) of (*) around x [chains]."""
    if kind == "binary":
        a = b * (1 - 2 * x) - 0.5 * P
        return _flip_log_prob(a, (x != y).to(x.dtype))
    lq = _ordinal_log_probs(x, b, P, S)
    return lq.gather(2, y.long()[:, :, None])[:, :, 0].sum(-1)


def symmetric_least_squares(C: Tensor, G: Tensor, rcond: float = 1e-10) -> Tensor:
    """The W of AB Eq. 10: argmin over symmetric W of sum_k ||W dx_k - dg_k||^2.

    Takes the sufficient statistics ``C = sum_k dx_k dx_k^T`` and ``G = sum_k dx_k dg_k^T``.
    The projected gradient (App. A.3) vanishes where ``C W + W C = G + G^T``; in the
    eigenbasis of C (``C = U diag(lam) U^T``) this is ``W~_ij (lam_i + lam_j) = H~_ij``.
    Pairs with ``lam_i + lam_j <= rcond * 2 max(lam)`` (directions never explored) get 0, the
    minimum-norm solution.
    """
    C = 0.5 * (C + C.T).double()
    H = (G + G.T).double()
    lam, U = torch.linalg.eigh(C)
    lam = lam.clamp_min(0.0)
    den = lam[:, None] + lam[None, :]
    ok = den > rcond * 2 * max(float(lam.max()), 1e-300)
    Wt = torch.where(ok, (U.T @ H @ U) / torch.where(ok, den, torch.ones_like(den)), 0.0)
    W = U @ Wt @ U.T
    return 0.5 * (W + W.T)


def _to_list(v, key: str) -> list[float] | None:
    if v is None:
        return None
    try:
        out = [float(t) for t in (v.reshape(-1).tolist() if isinstance(v, Tensor) else v)]
    except (TypeError, ValueError):
        raise ConfigError(key, f"must be null or a list of numbers (got {v!r})") from None
    check(
        len(out) > 0 and all(math.isfinite(t) and t >= 0 for t in out),
        key,
        f"must be a non-empty list of finite numbers >= 0 (got {v!r})",
    )
    return out


# ------------------------------------------------------------------------- adaptation


class JumpAdapter:
    """Coordinate ascent of (sigma, alpha) on the average jump distance (AB Alg. 3 and 4).

    A cycle has one block per tuned parameter (sigma first, then alpha). A block runs
    ``n_probe`` steps each at theta, theta (1 + gamma), theta (1 - gamma) (the other parameter
    at its current value) and keeps the probe with the largest summed jump (ties: theta
    (1 + gamma) only if strictly best over theta, as in Alg. 4's order). After all blocks the
    new values are applied together; if none changed, gamma <- gamma_decay * gamma (Alg. 3).
    Probes are clipped to ``bounds``. Incomplete cycles are discarded.
    """

    def __init__(
        self, values: dict, names: list, gamma: float, decay: float, n_probe: int, bounds: dict
    ):
        self.values = dict(values)
        self.names = list(names)
        self.gamma = float(gamma)
        self.decay = float(decay)
        self.n_probe = int(n_probe)
        self.bounds = dict(bounds)
        self.reset_cycle()

    @property
    def cycle_length(self) -> int:
        return 3 * self.n_probe * len(self.names)

    def reset_cycle(self) -> None:
        self.pos = 0
        self.sums = [0.0] * (3 * len(self.names))

    def _probe(self, name: str, sub: int) -> float:
        theta = self.values[name]
        v = theta * (1.0, 1.0 + self.gamma, 1.0 - self.gamma)[sub]
        lo, hi = self.bounds.get(name, (0.0, math.inf))
        return min(max(v, lo), hi)

    def current(self) -> dict:
        """The parameter values to use for the next step."""
        slot = self.pos // self.n_probe
        block, sub = divmod(slot, 3)
        out = dict(self.values)
        name = self.names[block]
        out[name] = self._probe(name, sub)
        return out

    def record(self, jump: float) -> None:
        """Add the mean jump of the step just taken with :meth:`current`'s values."""
        self.sums[self.pos // self.n_probe] += float(jump)
        self.pos += 1
        if self.pos == self.cycle_length:
            new = {}
            for j, name in enumerate(self.names):
                d0, dp, dm = self.sums[3 * j : 3 * j + 3]
                best = max(d0, dp, dm)
                sub = 1 if best == dp else (2 if best == dm else 0)
                new[name] = self._probe(name, sub)
            if all(new[k] == self.values[k] for k in self.names):
                self.gamma *= self.decay
            else:
                self.values.update(new)
            self.reset_cycle()

    def state_dict(self) -> dict:
        return {
            "values": dict(self.values),
            "gamma": self.gamma,
            "pos": self.pos,
            "sums": list(self.sums),
        }

    def load_state_dict(self, d: dict) -> None:
        self.values = {k: float(v) for k, v in d["values"].items()}
        self.gamma = float(d["gamma"])
        self.pos = int(d["pos"])
        self.sums = [float(s) for s in d["sums"]]


# ---------------------------------------------------------------------------- samplers


class _AB(Sampler):
    """Shared machinery: validation, adaptation, the factorised MH step."""

    needs_grad = True
    exact = True
    tuned_names: tuple = ("sigma", "alpha")

    def __init__(
        self,
        sigma: float,
        alpha: float,
        adapt: bool,
        burn_in: int,
        gamma: float,
        gamma_decay: float,
        n_probe: int,
        alpha_max: float,
    ):
        check(_is_num(sigma) and sigma > 0, "sigma", f"must be a finite number > 0 (got {sigma!r})")
        check(
            _is_num(alpha) and ALPHA_MIN <= alpha < 1,
            "alpha",
            f"must be a number in [0.5, 1) (got {alpha!r})",
        )
        check(isinstance(adapt, bool), "adapt", f"must be true or false (got {adapt!r})")
        check(
            _is_int(burn_in) and burn_in >= 0, "burn_in", f"must be an int >= 0 (got {burn_in!r})"
        )
        check(_is_num(gamma) and 0 < gamma < 1, "gamma", f"must be in (0, 1) (got {gamma!r})")
        check(
            _is_num(gamma_decay) and 0 < gamma_decay <= 1,
            "gamma_decay",
            f"must be in (0, 1] (got {gamma_decay!r})",
        )
        check(
            _is_int(n_probe) and n_probe >= 1, "n_probe", f"must be an int >= 1 (got {n_probe!r})"
        )
        check(
            _is_num(alpha_max) and ALPHA_MIN <= alpha_max < 1 and alpha_max >= alpha,
            "alpha_max",
            f"must be in [0.5, 1) and >= alpha={alpha!r} (got {alpha_max!r})",
        )
        self.sigma = float(sigma)
        self.alpha = float(alpha)
        self.adapt = adapt
        self.burn_in = int(burn_in)
        self.gamma = float(gamma)
        self.gamma_decay = float(gamma_decay)
        self.n_probe = int(n_probe)
        self.alpha_max = float(alpha_max)
        self.step_count = 0
        self.adapter = JumpAdapter(
            {"sigma": self.sigma, "alpha": self.alpha},
            list(self.tuned_names),
            self.gamma,
            self.gamma_decay,
            self.n_probe,
            {"alpha": (ALPHA_MIN, self.alpha_max)},
        )

    # -- what subclasses define --------------------------------------------------------
    def _precision(self, sigma: float, alpha: float, d: int, device, dtype):
        """P of (*) for the factorised (auxiliary-free) proposal: a float or a [d] tensor."""
        return 1.0 / sigma

    def _quadratic_active(self) -> bool:
        return False

    def _before_step(self, model, d: int) -> None:  # noqa: B027 - optional hook
        pass

    def _after_step(self, x, y, gx, gy) -> None:  # noqa: B027 - optional hook
        pass

    # -- public ---------------------------------------------------------------------
    @property
    def adapting(self) -> bool:
        return self.adapt and self.step_count < self.burn_in

    @property
    def frozen(self) -> bool:
        """True once the kernel is fixed (adaptation and estimation over): exact from here on."""
        return not self.adapting

    def current_params(self) -> dict:
        """(sigma, alpha) the next step uses (a probe value while adapting)."""
        if self.adapting:
            return self.adapter.current()
        return {"sigma": self.sigma, "alpha": self.alpha}

    def log_proposal(self, model, x: Tensor, grad: Tensor, y: Tensor) -> Tensor:
        """log q(y|x) [batch] of the factorised proposal at the current (sigma, alpha)."""
        if self._quadratic_active():
            raise NotImplementedError(
                "the quadratic AB proposal has an auxiliary variable: q(y|x) is not tractable"
            )
        kind, S = _kind(model)
        x, grad, y = (_wide(t.reshape(t.shape[0], -1)) for t in (x, grad, y))
        p = self.current_params()
        P = self._precision(p["sigma"], p["alpha"], x.shape[1], x.device, x.dtype)
        return factorized_log_prob(x, p["alpha"] * grad, P, y, kind, S)

    def propose(self, model, state: ChainState, generator: torch.Generator) -> dict:
        """One proposal and its MH log-ratio at the current parameters (no state change).

        Returns a dict: x, y, gx, gy (flattened, float32 or wider), xi (the standard normal
        behind the auxiliary u = B x + xi / sqrt(alpha), or None), lp_y, g_y (model shape),
        log_ratio [chains] (Eq. 15 for the quadratic proposal), sigma, alpha.
        ``state`` must carry the gradient.
        """
        kind, S = _kind(model)
        shape, n = state.x.shape, state.x.shape[0]
        x = _wide(state.x.reshape(n, -1))
        gx = _wide(state.grad.reshape(n, -1))
        p = self.current_params()
        sigma, alpha = p["sigma"], p["alpha"]
        xi = None
        if self._quadratic_active():
            A, B, Dv = self._quad_mats(x.dtype, x.device)
            P = alpha * Dv + 1.0 / sigma
            xi = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
            eta = xi @ B  # rows ~ N(0, A)
            b = alpha * gx + math.sqrt(alpha) * eta
        else:
            P = self._precision(sigma, alpha, x.shape[1], x.device, x.dtype)
            b = alpha * gx
        y, fwd = factorized_propose(x, b, P, kind, S, generator)
        lp_y, g_y = value_and_grad(model, y.to(state.x.dtype).reshape(shape))
        gy = _wide(g_y.reshape(n, -1))
        if xi is not None:
            b_rev, aux = self._quad_reverse(x, y, gy, eta, A, alpha)
        else:
            b_rev, aux = alpha * gy, 0.0
        rev = factorized_log_prob(y, b_rev, P, x, kind, S)
        log_ratio = _wide(lp_y) - _wide(state.log_prob) + aux + rev - fwd
        return dict(
            x=x,
            y=y,
            gx=gx,
            gy=gy,
            xi=xi,
            lp_y=lp_y,
            g_y=g_y,
            log_ratio=log_ratio,
            sigma=sigma,
            alpha=alpha,
        )

    def step(self, model, state: ChainState, generator: torch.Generator):
        extra = 0
        if state.grad is None:  # state built by a gradient-free sampler: fill the cache
            lp, g = value_and_grad(model, state.x)
            state, extra = state.replace(log_prob=lp, grad=g), 1
        self._before_step(model, state.x[0].numel())
        pr = self.propose(model, state, generator)
        x, y = pr["x"], pr["y"]
        accepted, accept_prob = mh_accept(pr["log_ratio"], generator)
        y_state = ChainState(
            x=y.to(state.x.dtype).reshape(state.x.shape), log_prob=pr["lp_y"], grad=pr["g_y"]
        )
        new = state.select(accepted, y_state)
        jump = (y - x).abs().sum(-1) * accepted.to(x.dtype)
        self._after_step(x, y, pr["gx"], pr["gy"])
        if self.adapting:
            self.adapter.record(float(jump.mean()))
            self.sigma, self.alpha = self.adapter.values["sigma"], self.adapter.values["alpha"]
        self.step_count += 1
        info = StepInfo(
            accept_prob=accept_prob,
            accepted=accepted,
            jump=jump,
            n_log_prob=1 + extra,
            n_grad=1 + extra,
        )
        return new, info

    @staticmethod
    def _quad_reverse(x, y, gy, eta, A, alpha):
        """Reverse linear term b' (same u) and log N(u; B y) - log N(u; B x) (Eq. 15)."""
        sa = math.sqrt(alpha)
        delta = x - y
        dA = delta @ A
        b_rev = alpha * (gy + dA) + sa * eta
        aux = -sa * (eta * delta).sum(-1) - 0.5 * alpha * (dA * delta).sum(-1)
        return b_rev, aux

    def state_dict(self) -> dict:
        return {
            "sigma": self.sigma,
            "alpha": self.alpha,
            "step_count": self.step_count,
            "adapter": self.adapter.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.sigma, self.alpha = float(d["sigma"]), float(d["alpha"])
        self.step_count = int(d["step_count"])
        self.adapter.load_state_dict(d["adapter"])


class AB1st(_AB):
    """AB-1st: first-order any-scale balanced sampler (AB Eq. 11 with W = 0; Alg. 1-4).

    sigma: heat-kernel scale (> 0; Alg. 1 starts at 0.1). alpha: weight exponent g(t) = t^alpha
    in [0.5, 1) (start 0.5). adapt: tune (sigma, alpha) by Alg. 3 during the first ``burn_in``
    steps, then freeze. gamma / gamma_decay / n_probe: Alg. 3's update rate 0.2, decay 0.9,
    buffer N = 100. alpha_max: upper clip of alpha probes (< 1).
    """

    def __init__(
        self,
        sigma: float = 0.1,
        alpha: float = 0.5,
        adapt: bool = True,
        burn_in: int = 20000,
        gamma: float = 0.2,
        gamma_decay: float = 0.9,
        n_probe: int = 100,
        alpha_max: float = 0.99,
    ):
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)


class ABDiag(_AB):
    """AB for deep EBMs (Sec. 5.4, App. B.6): constant diagonal W_ii = 1 / (1 + var_i).

    var is the data's per-coordinate variance: ``data_variance`` (list) or
    :meth:`set_data_variance` (a task calls it before ``init``). The proposal is factorised
    (no Gaussian trick): P = 1/sigma - diag_sign * alpha * W_ii. diag_sign = +1 is the paper's
    literal W (+1/2 alpha W_ii delta^2 in Eq. 11); -1 treats W as a negative-curvature
    (Hessian-like) estimate. The paper grid-searches (sigma, alpha) (chosen alpha 0.6 MNIST,
    0.55 Omniglot / Caltech; sigma not reported), so ``adapt`` defaults to false.
    """

    def __init__(
        self,
        sigma: float = 0.2,
        alpha: float = 0.6,
        data_variance: list[float] | None = None,
        diag_sign: int = 1,
        adapt: bool = False,
        burn_in: int = 0,
        gamma: float = 0.2,
        gamma_decay: float = 0.9,
        n_probe: int = 100,
        alpha_max: float = 0.99,
    ):
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)
        check(
            diag_sign in (1, -1) and not isinstance(diag_sign, bool),
            "diag_sign",
            f"must be 1 or -1 (got {diag_sign!r})",
        )
        self.diag_sign = int(diag_sign)
        self.data_variance = _to_list(data_variance, "data_variance")
        self._w_cache: tuple | None = None

    def set_data_variance(self, var: Tensor) -> None:
        """Per-coordinate data variance (any shape with model.dim entries), e.g. m (1 - m)."""
        self.data_variance = _to_list(torch.as_tensor(var).detach().cpu(), "data_variance")
        self._w_cache = None

    def init(self, model, x: Tensor) -> ChainState:
        if self.data_variance is None:
            raise ConfigError(
                "data_variance",
                "ab_diag needs the data's per-coordinate variance: set sampler.data_variance "
                "or call sampler.set_data_variance(var) before init",
            )
        d = x[0].numel()
        check(
            len(self.data_variance) == d,
            "data_variance",
            f"needs one entry per model coordinate ({d}), got {len(self.data_variance)}",
        )
        return super().init(model, x)

    def _w_diag(self, device, dtype) -> Tensor:
        key = (device, dtype)
        if self._w_cache is None or self._w_cache[0] != key:
            var = torch.tensor(self.data_variance, device=device, dtype=dtype)
            self._w_cache = (key, 1.0 / (1.0 + var))
        return self._w_cache[1]

    def _precision(self, sigma, alpha, d, device, dtype):
        return 1.0 / sigma - self.diag_sign * alpha * self._w_diag(device, dtype)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "data_variance": self.data_variance}

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        if d.get("data_variance") is not None:
            self.data_variance = [float(v) for v in d["data_variance"]]
            self._w_cache = None


class _WithDiagonal(_AB):
    """Burn-in estimation of W (Eq. 10), the SDP for D (App. A.1) and the factor of W + D."""

    def _init_quadratic(self, sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond):
        check(
            sdp_method in ab_sdp.METHODS,
            "sdp_method",
            f"must be one of {list(ab_sdp.METHODS)} (got {sdp_method!r})",
        )
        check(
            sdp_solver in ab_sdp.SOLVERS,
            "sdp_solver",
            f"must be one of {list(ab_sdp.SOLVERS)} (got {sdp_solver!r})",
        )
        check(
            _is_num(sdp_tol) and 0 < sdp_tol < 1, "sdp_tol", f"must be in (0, 1) (got {sdp_tol!r})"
        )
        check(
            _is_num(w_fraction) and 0 < w_fraction <= 1,
            "w_fraction",
            f"must be in (0, 1] (got {w_fraction!r})",
        )
        check(
            _is_num(w_rcond) and 0 < w_rcond < 1, "w_rcond", f"must be in (0, 1) (got {w_rcond!r})"
        )
        if sdp_solver != "auto" and sdp_method != "shift":
            try:  # fail before sampling when the external solver cannot run at all
                ab_sdp._check_external(sdp_solver)
            except RuntimeError as e:
                raise ConfigError("sdp_solver", str(e)) from None
        self.sdp_method, self.sdp_solver, self.sdp_tol = sdp_method, sdp_solver, float(sdp_tol)
        self.w_fraction, self.w_rcond = float(w_fraction), float(w_rcond)
        self.w_steps = int(round(self.w_fraction * self.burn_in))
        self.W: Tensor | None = None  # float64 CPU, the W actually used (B^T B - D)
        self.D: Tensor | None = None  # [d] float64
        self.A: Tensor | None = None  # W + D = B^T B
        self.B: Tensor | None = None
        self._C: Tensor | None = None  # sum dx dx^T
        self._G: Tensor | None = None  # sum dx dg^T
        self.n_pairs = 0
        self.setup_stats: dict = {}
        self._mat_cache: tuple | None = None

    @property
    def ready(self) -> bool:
        return self.D is not None

    @property
    def frozen(self) -> bool:
        return not self.adapting and self.ready

    def init(self, model, x: Tensor) -> ChainState:
        d = x[0].numel()
        if self.ready:
            check(
                self.D.numel() == d,
                "set_quadratic",
                f"W has size {self.D.numel()} but the model has {d} coordinates",
            )
        elif self.w_steps == 0:
            raise ConfigError(
                "burn_in",
                f"must be > 0 to estimate W during burn-in (got {self.burn_in}), "
                "or call sampler.set_quadratic(W) first",
            )
        return super().init(model, x)

    def _collecting(self) -> bool:
        return not self.ready and self.step_count < self.w_steps

    def _before_step(self, model, d: int) -> None:
        if not self.ready and self.step_count >= self.w_steps:
            C = self._C if self._C is not None else torch.zeros(d, d, dtype=torch.float64)
            G = self._G if self._G is not None else torch.zeros(d, d, dtype=torch.float64)
            t0 = time.perf_counter()
            W = symmetric_least_squares(C.cpu(), G.cpu(), self.w_rcond)
            self.setup_stats["w_seconds"] = time.perf_counter() - t0
            self.setup_stats["n_pairs"] = self.n_pairs
            self.set_quadratic(W)
            self._C = self._G = None
            self._on_quadratic_ready()
            # adapt afresh for the new proposal: new cycle, initial update rate
            self.adapter.reset_cycle()
            self.adapter.gamma = self.gamma

    def _on_quadratic_ready(self) -> None:  # noqa: B027 - optional hook
        pass

    def _after_step(self, x, y, gx, gy) -> None:
        if self._collecting():
            dx, dg = (y - x).double(), (gy - gx).double()
            keep = dx.abs().sum(-1) > 0
            if bool(keep.any()):
                dx, dg = dx[keep], dg[keep]
                if self._C is None:
                    d = dx.shape[1]
                    self._C = torch.zeros(d, d, dtype=torch.float64, device=dx.device)
                    self._G = torch.zeros(d, d, dtype=torch.float64, device=dx.device)
                elif self._C.device != dx.device:  # resumed from a CPU checkpoint
                    self._C, self._G = self._C.to(dx.device), self._G.to(dx.device)
                self._C += dx.T @ dx
                self._G += dx.T @ dg
                self.n_pairs += int(keep.sum())

    def set_quadratic(self, W: Tensor, D: Tensor | None = None) -> None:
        """Fix W (symmetric [d, d], the quadratic term of f) and D (solved when None).

        Solves D with ``sdp_method`` / ``sdp_solver``, factors W + D (eigendecomposition,
        float64; clipped at 0) and stores the timings in ``setup_stats``.
        """
        W = torch.as_tensor(W).detach().to("cpu", torch.float64)
        if W.dim() != 2 or W.shape[0] != W.shape[1]:
            raise ValueError(f"set_quadratic: W must be a square matrix (got {tuple(W.shape)})")
        W = 0.5 * (W + W.T)
        if D is None and self.sdp_method != "shift" and not bool(W.any()):
            D = torch.zeros(W.shape[0], dtype=torch.float64)  # W = 0 (no pairs): D = 0 is optimal
        if D is None:
            try:
                sol = ab_sdp.solve_diagonal(
                    W, method=self.sdp_method, solver=self.sdp_solver, tol=self.sdp_tol
                )
            except Exception as e:
                raise RuntimeError(
                    f"AB sampler: could not compute the diagonal D (sdp_method="
                    f"{self.sdp_method}, sdp_solver={self.sdp_solver}) for W of size "
                    f"{W.shape[0]}: {e}"
                ) from e
            Dv = sol.d.to(torch.float64)
            self.setup_stats.update(
                sdp_seconds=sol.seconds,
                sdp_solver=sol.solver,
                sdp_objective=sol.objective,
                sdp_rel_gap=-1.0 if sol.rel_gap is None else sol.rel_gap,
                sdp_lambda_min=sol.lambda_min,
            )
        else:
            Dv = torch.as_tensor(D).detach().to("cpu", torch.float64).reshape(-1)
            if Dv.numel() != W.shape[0] or bool((Dv < 0).any()):
                raise ValueError("set_quadratic: D must be [d] with entries >= 0")
        t0 = time.perf_counter()
        lam, V = torch.linalg.eigh(W + torch.diag(Dv))
        B = (V * lam.clamp_min(0.0).sqrt()).T  # B^T B = V diag(lam+) V^T
        A = B.T @ B
        A = 0.5 * (A + A.T)
        self.setup_stats["sqrt_seconds"] = time.perf_counter() - t0
        self.setup_stats["lambda_min_w_plus_d"] = float(lam[0])
        self.W, self.D, self.A, self.B = A - torch.diag(Dv), Dv, A, B
        self._mat_cache = None

    def _quad_mats(self, dtype, device):
        key = (dtype, device)
        if self._mat_cache is None or self._mat_cache[0] != key:
            self._mat_cache = (
                key,
                self.A.to(device, dtype),
                self.B.to(device, dtype),
                self.D.to(device, dtype),
            )
        return self._mat_cache[1:]

    def state_dict(self) -> dict:
        d = super().state_dict()
        for k in ("W", "D", "A", "B", "_C", "_G"):
            v = getattr(self, k)
            d[k] = None if v is None else v.detach().cpu()
        d["n_pairs"] = self.n_pairs
        d["setup_stats"] = dict(self.setup_stats)
        return d

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        for k in ("W", "D", "A", "B", "_C", "_G"):
            v = d.get(k)
            setattr(self, k, None if v is None else v.to(torch.float64))
        self.n_pairs = int(d.get("n_pairs", 0))
        self.setup_stats = dict(d.get("setup_stats", {}))
        self._mat_cache = None


class ABQuadratic(_WithDiagonal):
    """Quadratic AB (AB-shift / AB-max / AB-trace by ``sdp_method``; Eq. 11-15, Alg. 1).

    During the first ``w_fraction * burn_in`` steps it proposes with AB-1st and collects
    (y - x, grad f(y) - grad f(x)) of every proposal; then W (Eq. 10, symmetric least squares
    in closed form, ``w_rcond`` drops unexplored directions), D (``ab_sdp.solve_diagonal``
    with ``sdp_method`` shift | max | trace, ``sdp_solver`` auto | mosek | scs, ``sdp_tol``)
    and the factor of W + D are computed once, and the Gaussian-integral-trick proposal is
    used from then on. (sigma, alpha) adapt (Alg. 3) over the whole burn-in when ``adapt``.
    ``set_quadratic(W)`` fixes W up front (e.g. a known quadratic target) instead.
    """

    def __init__(
        self,
        sdp_method: str = "trace",
        sigma: float = 0.1,
        alpha: float = 0.5,
        adapt: bool = True,
        burn_in: int = 20000,
        w_fraction: float = 0.25,
        sdp_solver: str = "auto",
        sdp_tol: float = 1e-4,
        w_rcond: float = 1e-10,
        gamma: float = 0.2,
        gamma_decay: float = 0.9,
        n_probe: int = 100,
        alpha_max: float = 0.99,
    ):
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)
        self._init_quadratic(sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond)

    def _quadratic_active(self) -> bool:
        return self.ready


class DLPTrace(_WithDiagonal):
    """DLP-trace (AB Sec. 5.1): DLP (alpha = 1/2, W = 0) with the anisotropic kernel
    exp(-z^T D z / (2 sigma)), D from the trace SDP on the burn-in estimate of W.

    Before D is known (first ``w_fraction * burn_in`` steps) it is plain DLP with step sigma;
    when D arrives sigma is multiplied by mean(D) (same mean kernel precision). Only sigma is
    adapted (Alg. 4 on sigma alone) when ``adapt``.
    """

    tuned_names = ("sigma",)

    def __init__(
        self,
        sigma: float = 0.1,
        adapt: bool = True,
        burn_in: int = 20000,
        w_fraction: float = 0.25,
        sdp_method: str = "trace",
        sdp_solver: str = "auto",
        sdp_tol: float = 1e-4,
        w_rcond: float = 1e-10,
        gamma: float = 0.2,
        gamma_decay: float = 0.9,
        n_probe: int = 100,
    ):
        super().__init__(sigma, 0.5, adapt, burn_in, gamma, gamma_decay, n_probe, 0.5)
        self._init_quadratic(sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond)

    def _precision(self, sigma, alpha, d, device, dtype):
        if not self.ready:
            return 1.0 / sigma
        return self._quad_mats(dtype, device)[2] / sigma

    def _on_quadratic_ready(self) -> None:
        # keep the mean kernel precision when switching from I / sigma to D / sigma (our
        # choice; the paper does not say how sigma carries over), then adapt from there
        m = float(self.D.mean())
        if m > 0:
            self.sigma *= m
            self.adapter.values["sigma"] = self.sigma
