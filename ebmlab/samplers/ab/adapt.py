"""Burn-in adaptation of the AB samplers (AB Alg. 1, 3-4; Eq. 10; App. A.1), then FREEZE.

An adaptation moves through explicit phases (:class:`Phase`):

- COLLECT (quadratic samplers, until W is known): propose with AB-1st (W = D = 0) and collect
  (y - x, grad f(y) - grad f(x)) of every proposal for ``w_steps = round(w_fraction *
  burn_in)`` steps; then W (Eq. 10, in closed form), D (the SDP of
  :mod:`ebmlab.samplers.ab.sdp`) and the factor of W + D are computed once, and the
  (sigma, alpha) adaptation restarts (new cycle, initial gamma) for the quadratic proposal;
- ADAPT: (sigma, alpha) climb the average jump distance by coordinate ascent (Alg. 3-4) until
  ``burn_in`` steps have been taken (only with ``adapt``; probes are clipped to alpha in
  [1/2, alpha_max]);
- FROZEN: everything is fixed. :meth:`frozen` returns the exact kernel of
  :mod:`ebmlab.samplers.ab.kernel`; ``step`` keeps running it, so a task may call ``step``
  through burn-in and sampling alike. (The paper keeps adapting after burn-in; we freeze so
  that the reported chain is exact.) The ``*Alg1`` classes (configs ``ab_*_alg1``) follow
  Alg. 1 as written instead: (sigma, alpha) keep adapting for the whole run and the phase
  never becomes FROZEN, so their chain is an adaptive chain, not a fixed MH kernel.

The jumps are summed on the device and read once per probe window of ``n_probe`` steps.
Everything tuned is in ``state_dict`` for resume; the one-off cost of W, D and the square
root is in ``setup_stats``.
"""

from __future__ import annotations

import math
import time
from enum import Enum

import torch
from torch import Tensor

from ebmlab.errors import ConfigError, check
from ebmlab.samplers.ab import sdp
from ebmlab.samplers.ab.kernel import (
    AB1stKernel,
    ABDiagKernel,
    ABProposal,
    ABQuadraticKernel,
    DLPTraceKernel,
    GaussianTrick,
)
from ebmlab.samplers.base import ChainState, Sampler
from ebmlab.samplers.spaces import BINARY, ORDINAL

ALPHA_MIN = 0.5  # the locally balanced end of the any-scale family


class Phase(str, Enum):
    COLLECT = "collect"
    ADAPT = "adapt"
    FROZEN = "frozen"


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


class JumpAdapter:
    """Coordinate ascent of (sigma, alpha) on the average jump distance (AB Alg. 3 and 4).

    A cycle has one block per tuned parameter (sigma first, then alpha). A block runs
    ``n_probe`` steps each at theta, theta (1 + gamma), theta (1 - gamma) (the other parameter
    at its current value) and keeps the probe with the largest summed jump; ties go to theta
    (1 + gamma), then theta (1 - gamma), the order in which Alg. 4 tests them, so a chain that
    never moves (every jump 0) keeps raising both parameters. After all blocks the
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
        self._window = 0.0  # running sum of the current probe window (a device tensor)

    def _probe(self, name: str, sub: int) -> float:
        theta = self.values[name]
        v = theta * (1.0, 1.0 + self.gamma, 1.0 - self.gamma)[sub]
        lo, hi = self.bounds.get(name, (0.0, math.inf))
        return min(max(v, lo), hi)

    def current(self) -> dict:
        """The parameter values to use for the next step."""
        block, sub = divmod(self.pos // self.n_probe, 3)
        out = dict(self.values)
        name = self.names[block]
        out[name] = self._probe(name, sub)
        return out

    def record(self, jump: Tensor | float) -> None:
        """Add the mean jump of the step just taken with :meth:`current`'s values (a 0-dim
        tensor stays on its device; it is read once, at the end of the probe window)."""
        self._window = self._window + (jump.double() if isinstance(jump, Tensor) else jump)
        self.pos += 1
        if self.pos % self.n_probe:
            return
        self.sums[self.pos // self.n_probe - 1] = float(self._window)
        self._window = 0.0
        if self.pos == self.cycle_length:
            new = {}
            for j, name in enumerate(self.names):
                d0, dp, dm = self.sums[3 * j : 3 * j + 3]
                best = max(d0, dp, dm)
                new[name] = self._probe(name, 1 if best == dp else (2 if best == dm else 0))
            if all(new[k] == self.values[k] for k in self.names):
                self.gamma *= self.decay
            else:
                self.values.update(new)
            self.reset_cycle()

    def state_dict(self) -> dict:
        sums = list(self.sums)
        if self.pos % self.n_probe:  # the window in progress
            sums[self.pos // self.n_probe] = float(self._window)
        return {"values": dict(self.values), "gamma": self.gamma, "pos": self.pos, "sums": sums}

    def load_state_dict(self, d: dict) -> None:
        self.values = {k: float(v) for k, v in d["values"].items()}
        self.gamma = float(d["gamma"])
        self.pos = int(d["pos"])
        self.sums = [float(s) for s in d["sums"]]
        self._window = self.sums[self.pos // self.n_probe] if self.pos % self.n_probe else 0.0


class _Adaptation(Sampler):
    """Validation, phases and the adaptive step shared by the AB samplers (Alg. 1)."""

    needs_grad = True
    exact = True  # the frozen kernel; burn-in steps adapt
    state_spaces = (BINARY, ORDINAL)
    tuned_names: tuple = ("sigma", "alpha")
    adapt_after_burn_in = False  # True: Alg. 1's "mixed period" keeps adapting (never frozen)

    def __init__(self, sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max):
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
        self.adapt, self.burn_in, self.gamma = adapt, int(burn_in), float(gamma)
        self.step_count = 0
        self.adapter = JumpAdapter(
            {"sigma": float(sigma), "alpha": float(alpha)},
            list(self.tuned_names),
            self.gamma,
            gamma_decay,
            n_probe,
            {"alpha": (ALPHA_MIN, float(alpha_max))},
        )
        self.kernel: AB1stKernel | None = AB1stKernel(sigma, alpha)
        self.phase = Phase.ADAPT if self.adapting else Phase.FROZEN

    # -- parameters ------------------------------------------------------------------
    @property
    def sigma(self) -> float:
        return self.adapter.values["sigma"]

    @property
    def alpha(self) -> float:
        return self.adapter.values["alpha"]

    @property
    def adapting(self) -> bool:
        """(sigma, alpha) still adapt at the next step."""
        return self.adapt and (self.adapt_after_burn_in or self.step_count < self.burn_in)

    def current_params(self) -> dict:
        """(sigma, alpha) the next step uses (a probe value while adapting)."""
        return self.adapter.current() if self.adapting else dict(self.adapter.values)

    # -- the Adaptation protocol -----------------------------------------------------
    @property
    def done(self) -> bool:
        return self.phase is Phase.FROZEN

    def frozen(self) -> AB1stKernel:
        """The exact kernel with the final parameters (once :attr:`done`)."""
        if not self.done:
            raise RuntimeError(f"AB adaptation is not done (phase {self.phase.value})")
        self.kernel.sigma, self.kernel.alpha = self.sigma, self.alpha
        return self.kernel

    def step(self, model, state: ChainState, generator: torch.Generator):
        p = self.current_params()
        new, info, _ = self.kernel.move(
            model, state, generator, p["sigma"], p["alpha"], self._observe
        )
        if self.adapting:
            self.adapter.record(info.jump.mean())
        self.step_count += 1
        self._advance()
        return new, info

    def _observe(self, pr: ABProposal) -> None:  # noqa: B027 - COLLECT only
        pass

    def _advance(self) -> None:
        if self.phase is Phase.ADAPT and not self.adapting:
            self.phase = Phase.FROZEN

    def state_dict(self) -> dict:
        return {
            "sigma": self.sigma,
            "alpha": self.alpha,
            "step_count": self.step_count,
            "phase": self.phase.value,
            "adapter": self.adapter.state_dict(),
        }

    def load_state_dict(self, d: dict) -> None:
        self.step_count = int(d["step_count"])
        self.phase = Phase(d["phase"])
        self.adapter.load_state_dict(d["adapter"])


class AB1st(_Adaptation):
    """AB-1st (AB Eq. 11 with W = 0; Alg. 1-4) with burn-in adaptation of (sigma, alpha).

    sigma: heat-kernel scale (> 0; Alg. 1 starts at 0.1). alpha: weight exponent g(t) = t^alpha
    in [0.5, 1) (start 0.5). adapt: tune (sigma, alpha) by Alg. 3 during the first ``burn_in``
    steps, then freeze. gamma / gamma_decay / n_probe: Alg. 3's update rate, decay and buffer
    N. alpha_max: upper clip of alpha probes (< 1).
    """

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
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)


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


class ABDiag(_Adaptation):
    """AB for deep EBMs (Sec. 5.4, App. B.6): constant diagonal W_ii = 1 / (1 + var_i).

    var is the data's per-coordinate variance: ``data_variance`` (list) or
    :meth:`set_data_variance` (a task calls it before ``init``). The proposal is factorised
    (no Gaussian trick): P = 1/sigma - diag_sign * alpha * W_ii. diag_sign = +1 is the paper's
    literal W (+1/2 alpha W_ii delta^2 in Eq. 11); -1 treats W as a negative-curvature
    (Hessian-like) estimate. The paper grid-searches (sigma, alpha).
    """

    def __init__(
        self,
        sigma: float,
        alpha: float,
        data_variance: list[float] | None,
        diag_sign: int,
        adapt: bool,
        burn_in: int,
        gamma: float,
        gamma_decay: float,
        n_probe: int,
        alpha_max: float,
    ):
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)
        check(
            diag_sign in (1, -1) and not isinstance(diag_sign, bool),
            "diag_sign",
            f"must be 1 or -1 (got {diag_sign!r})",
        )
        self.diag_sign = int(diag_sign)
        self._set_variance(_to_list(data_variance, "data_variance"))

    def _set_variance(self, var: list[float] | None) -> None:
        self.data_variance = var
        self.kernel = None
        if var is not None:
            self.kernel = ABDiagKernel(self.sigma, self.alpha, var, self.diag_sign)

    def set_data_variance(self, var: Tensor) -> None:
        """Per-coordinate data variance (any shape with model.dim entries), e.g. m (1 - m)."""
        self._set_variance(_to_list(torch.as_tensor(var).detach().cpu(), "data_variance"))

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

    def state_dict(self) -> dict:
        return {**super().state_dict(), "data_variance": self.data_variance}

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        if d.get("data_variance") is not None:
            self._set_variance([float(v) for v in d["data_variance"]])


# ------------------------------------------------------------------------ W and D (Eq. 10)


def symmetric_least_squares(C: Tensor, G: Tensor, rcond: float) -> Tensor:
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


def fit_gaussian_trick(
    W: Tensor, method: str, solver: str, tol: float, D: Tensor | None = None
) -> tuple[GaussianTrick, dict]:
    """W (symmetric [d, d]) -> the fixed pieces of the quadratic proposal and their cost.

    Solves D with the SDP ``method`` / ``solver`` (App. A.1) when not given, then factors
    W + D (:meth:`GaussianTrick.factor`). Returns (trick, setup statistics).
    """
    W = torch.as_tensor(W).detach().to("cpu", torch.float64)
    if W.dim() != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"set_quadratic: W must be a square matrix (got {tuple(W.shape)})")
    W = 0.5 * (W + W.T)
    stats: dict = {}
    if D is None and method != "shift" and not bool(W.any()):
        D = torch.zeros(W.shape[0], dtype=torch.float64)  # W = 0 (no pairs): D = 0 is optimal
    if D is None:
        try:
            sol = sdp.solve_diagonal(W, method=method, solver=solver, tol=tol)
        except Exception as e:
            raise RuntimeError(
                f"AB sampler: could not compute the diagonal D (sdp_method={method}, "
                f"sdp_solver={solver}) for W of size {W.shape[0]}: {e}"
            ) from e
        Dv = sol.d.to(torch.float64)
        stats.update(
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
    trick = GaussianTrick.factor(W, Dv)
    stats.update(sqrt_seconds=trick.sqrt_seconds, lambda_min_w_plus_d=trick.lambda_min)
    return trick, stats


class _Quadratic(_Adaptation):
    """COLLECT phase: burn-in pairs -> W (Eq. 10) -> D (SDP, App. A.1) -> factor of W + D."""

    def _init_quadratic(self, sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond):
        check(
            sdp_method in sdp.METHODS,
            "sdp_method",
            f"must be one of {list(sdp.METHODS)} (got {sdp_method!r})",
        )
        check(
            sdp_solver in sdp.SOLVERS,
            "sdp_solver",
            f"must be one of {list(sdp.SOLVERS)} (got {sdp_solver!r})",
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
                sdp._check_external(sdp_solver)
            except RuntimeError as e:
                raise ConfigError("sdp_solver", str(e)) from None
        self.sdp_method, self.sdp_solver, self.sdp_tol = sdp_method, sdp_solver, float(sdp_tol)
        self.w_fraction, self.w_rcond = float(w_fraction), float(w_rcond)
        self.w_steps = int(round(self.w_fraction * self.burn_in))
        self.trick: GaussianTrick | None = None
        self._C: Tensor | None = None  # sum dx dx^T
        self._G: Tensor | None = None  # sum dx dg^T
        self.n_pairs = 0
        self.setup_stats: dict = {}
        self.phase = Phase.COLLECT

    def _quadratic_kernel(self) -> AB1stKernel:
        raise NotImplementedError

    def init(self, model, x: Tensor) -> ChainState:
        d = x[0].numel()
        if self.trick is not None:
            check(
                self.trick.D.numel() == d,
                "set_quadratic",
                f"W has size {self.trick.D.numel()} but the model has {d} coordinates",
            )
        elif self.w_steps == 0:
            raise ConfigError(
                "burn_in",
                f"must be > 0 to estimate W during burn-in (got {self.burn_in}), "
                "or call sampler.set_quadratic(W) first",
            )
        return super().init(model, x)

    def _observe(self, pr: ABProposal) -> None:
        if self.phase is not Phase.COLLECT:
            return
        dx, dg = (pr.y - pr.x).double(), (pr.gy - pr.gx).double()
        keep = dx.abs().sum(-1) > 0
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

    def _advance(self) -> None:
        if self.phase is Phase.COLLECT and self.step_count >= self.w_steps:
            t0 = time.perf_counter()
            W = symmetric_least_squares(self._C.cpu(), self._G.cpu(), self.w_rcond)
            self.setup_stats["w_seconds"] = time.perf_counter() - t0
            self.setup_stats["n_pairs"] = self.n_pairs
            self.set_quadratic(W)
            self._C = self._G = None
            self._on_quadratic_ready()
            # adapt afresh for the new proposal: new cycle, initial update rate
            self.adapter.reset_cycle()
            self.adapter.gamma = self.gamma
        super()._advance()

    def _on_quadratic_ready(self) -> None:  # noqa: B027 - DLP-trace rescales sigma
        pass

    def set_quadratic(self, W: Tensor, D: Tensor | None = None) -> None:
        """Fix W (symmetric [d, d], the quadratic term of f) and D (solved when None); ends
        the COLLECT phase. Timings go to ``setup_stats``."""
        self.trick, stats = fit_gaussian_trick(W, self.sdp_method, self.sdp_solver, self.sdp_tol, D)
        self.setup_stats.update(stats)
        self.kernel = self._quadratic_kernel()
        self.phase = Phase.ADAPT if self.adapting else Phase.FROZEN

    def state_dict(self) -> dict:
        d = super().state_dict()
        d["trick"] = None if self.trick is None else self.trick.state_dict()
        for k in ("_C", "_G"):
            v = getattr(self, k)
            d[k] = None if v is None else v.detach().cpu()
        d["n_pairs"] = self.n_pairs
        d["setup_stats"] = dict(self.setup_stats)
        return d

    def load_state_dict(self, d: dict) -> None:
        super().load_state_dict(d)
        if d["trick"] is not None:
            self.trick = GaussianTrick.from_state_dict(d["trick"])
            self.kernel = self._quadratic_kernel()
        for k in ("_C", "_G"):
            v = d.get(k)
            setattr(self, k, None if v is None else v.to(torch.float64))
        self.n_pairs = int(d["n_pairs"])
        self.setup_stats = dict(d["setup_stats"])


class ABQuadratic(_Quadratic):
    """Quadratic AB (AB-shift / AB-max / AB-trace by ``sdp_method``; Eq. 11-15, Alg. 1).

    During the first ``w_fraction * burn_in`` steps it proposes with AB-1st and collects
    (y - x, grad f(y) - grad f(x)) of every proposal; then W (Eq. 10, symmetric least squares
    in closed form, ``w_rcond`` drops unexplored directions), D (``sdp.solve_diagonal`` with
    ``sdp_method`` shift | max | trace, ``sdp_solver`` auto | mosek | scs, ``sdp_tol``) and the
    factor of W + D are computed once, and the Gaussian-integral-trick proposal is used from
    then on. (sigma, alpha) adapt (Alg. 3) over the whole burn-in when ``adapt``.
    ``set_quadratic(W)`` fixes W up front (e.g. a known quadratic target) instead.
    """

    def __init__(
        self,
        sdp_method: str,
        sigma: float,
        alpha: float,
        adapt: bool,
        burn_in: int,
        w_fraction: float,
        sdp_solver: str,
        sdp_tol: float,
        w_rcond: float,
        gamma: float,
        gamma_decay: float,
        n_probe: int,
        alpha_max: float,
    ):
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)
        self._init_quadratic(sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond)

    def _quadratic_kernel(self) -> ABQuadraticKernel:
        return ABQuadraticKernel(self.sigma, self.alpha, self.trick)


class DLPTrace(_Quadratic):
    """DLP-trace (AB Sec. 5.1): DLP (alpha = 1/2, W = 0) with the anisotropic kernel
    exp(-z^T D z / (2 sigma)), D from the trace SDP on the burn-in estimate of W.

    Before D is known (first ``w_fraction * burn_in`` steps) it is plain DLP with step sigma;
    when D arrives sigma is multiplied by mean(D) (same mean kernel precision). Only sigma is
    adapted (Alg. 4 on sigma alone) when ``adapt``.
    """

    tuned_names = ("sigma",)

    def __init__(
        self,
        sigma: float,
        adapt: bool,
        burn_in: int,
        w_fraction: float,
        sdp_method: str,
        sdp_solver: str,
        sdp_tol: float,
        w_rcond: float,
        gamma: float,
        gamma_decay: float,
        n_probe: int,
    ):
        super().__init__(sigma, 0.5, adapt, burn_in, gamma, gamma_decay, n_probe, 0.5)
        self._init_quadratic(sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond)

    def _quadratic_kernel(self) -> DLPTraceKernel:
        return DLPTraceKernel(self.sigma, self.trick)

    def _on_quadratic_ready(self) -> None:
        # keep the mean kernel precision when switching from I / sigma to D / sigma (our
        # choice; the paper does not say how sigma carries over), then adapt from there
        m = float(self.trick.D.mean())
        if m > 0:
            self.adapter.values["sigma"] = self.sigma * m


class _Alg1Schedule:
    """Mixin of the Alg. 1 variants: (sigma, alpha) adapt for the whole run, so the chain is
    adaptive, not a fixed MH kernel (``done`` stays false); ``adapt`` must be true."""

    exact = False  # adaptive chain
    adapt_after_burn_in = True

    @staticmethod
    def _require_adapt(adapt: bool) -> None:
        check(adapt is True, "adapt", "must be true for the Alg. 1 variant (it adapts throughout)")


class AB1stAlg1(_Alg1Schedule, AB1st):
    """AB-1st with Alg. 1's schedule as written: (sigma, alpha) adapt by Alg. 3 for the WHOLE
    run, not only the first ``burn_in`` steps (``adapt`` must be true). The chain is then
    adaptive (its parameters depend on its past, and Alg. 3's update rate shrinks only when
    a cycle changes nothing), not a fixed MH kernel: every step is an exact MH step for the
    current (sigma, alpha), but no frozen kernel exists (``done`` stays false). The paper's
    procedure; ebmlab's default (``AB1st``) freezes after burn-in."""

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
        self._require_adapt(adapt)
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)


class ABQuadraticAlg1(_Alg1Schedule, ABQuadratic):
    """Quadratic AB (shift / max / trace) with Alg. 1's schedule as written: W and D from the
    pairs of the whole burn-in (``w_fraction`` must be 1: Alg. 1 estimates them from
    x_{0:T1}), and (sigma, alpha) adapting by Alg. 3 through the burn-in AND the mixed period
    T1 <= t <= T ("continue the alternatively updating sigma, alpha"). As in ``ABQuadratic``
    the adaptation restarts its cycle with the initial update rate gamma when the quadratic
    proposal takes over (our choice; Alg. 1 says only "continue"). The chain is adaptive, not
    a fixed MH kernel (``done`` stays false; see ``AB1stAlg1``); ebmlab's default
    (``ABQuadratic``) fits W on the first quarter of burn-in and freezes after it."""

    def __init__(
        self,
        sdp_method: str,
        sigma: float,
        alpha: float,
        adapt: bool,
        burn_in: int,
        w_fraction: float,
        sdp_solver: str,
        sdp_tol: float,
        w_rcond: float,
        gamma: float,
        gamma_decay: float,
        n_probe: int,
        alpha_max: float,
    ):
        self._require_adapt(adapt)
        check(
            w_fraction == 1,
            "w_fraction",
            f"must be 1 for the Alg. 1 variant (W from the whole burn-in; got {w_fraction!r})",
        )
        super().__init__(
            sdp_method,
            sigma,
            alpha,
            adapt,
            burn_in,
            w_fraction,
            sdp_solver,
            sdp_tol,
            w_rcond,
            gamma,
            gamma_decay,
            n_probe,
            alpha_max,
        )
