"""Burn-in adaptation of the AB samplers (AB Alg. 1, 3-4; Eq. 10; App. A.1), then FREEZE.

One :class:`ABAdaptation` (an :class:`~ebmlab.core.protocols.Adaptation`) owns the kernel of
:mod:`ebmlab.samplers.ab.kernel` and the updates of its parameters, built from parts:

- a :class:`JumpAdapter`: (sigma, alpha) by coordinate ascent on the average jump distance
  (Alg. 3-4) during the first ``burn_in`` steps (only with ``adapt``; alpha probes clipped to
  [1/2, alpha_max]);
- where W is not 0, where it comes from: :class:`DataDiagonalW` (AB-diag, W_ii = 1 / (1 + var_i)
  from the data) or :class:`BurnInW` (quadratic AB, DLP-trace: W from the pairs (y - x,
  grad f(y) - grad f(x)) of every proposal of the first ``w_steps = round(w_fraction *
  burn_in)`` steps (Eq. 10, in closed form), D from the SDP of :mod:`ebmlab.samplers.ab.sdp`
  and the factor of W + D, once; the (sigma, alpha) adaptation then restarts (new cycle,
  initial gamma) for the quadratic proposal).

Its phases (:class:`Phase`): COLLECT (W still to estimate), ADAPT ((sigma, alpha) move),
FROZEN: :meth:`ABAdaptation.frozen` returns the exact kernel with the final (sigma, alpha, W)
and ``step`` keeps running it. (The paper keeps adapting after burn-in; we freeze so that the
reported chain is exact.) The ``*Alg1`` configs follow Alg. 1 as written instead: (sigma,
alpha) adapt for the whole run and the phase never becomes FROZEN, so their chain is an
adaptive chain, not a fixed MH kernel.

The classes the configs name (``AB1st``, ``ABDiag``, ``ABQuadratic``, ``DLPTrace``,
``AB1stAlg1``, ``ABQuadraticAlg1``) only validate their settings and assemble these parts.
The jumps are summed on the device and read once per probe window of ``n_probe`` steps.
Everything tuned is in ``state_dict`` for resume; the one-off cost of W, D and the square
root is in ``setup_stats``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
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
from ebmlab.samplers.base import ChainState
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


class BurnInW:
    """W of the quadratic proposals from the burn-in pairs (Eq. 10), D (SDP, App. A.1) and the
    factor of W + D, computed once after ``w_steps`` steps; ``kernel_with`` builds the kernel
    of the quadratic proposal from (sigma, alpha, trick). Before that the proposal is AB-1st
    (W = D = 0). With ``keep_mean_precision`` (DLP-trace) sigma is multiplied by mean(D) when
    D arrives, so the mean kernel precision stays the same (our choice; the paper does not say
    how sigma carries over)."""

    def __init__(
        self,
        sdp_method: str,
        sdp_solver: str,
        sdp_tol: float,
        w_fraction: float,
        w_rcond: float,
        burn_in: int,
        kernel_with: Callable[[float, float, GaussianTrick], AB1stKernel],
        keep_mean_precision: bool,
    ):
        methods, solvers = list(sdp.METHODS), list(sdp.SOLVERS)
        check(sdp_method in methods, "sdp_method", f"must be one of {methods} (got {sdp_method!r})")
        check(sdp_solver in solvers, "sdp_solver", f"must be one of {solvers} (got {sdp_solver!r})")
        for key, v, hi in (("sdp_tol", sdp_tol, 1), ("w_fraction", w_fraction, None)):
            ok = _is_num(v) and 0 < v and (v < 1 if hi else v <= 1)
            check(ok, key, f"must be in (0, 1{')' if hi else ']'} (got {v!r})")
        ok = _is_num(w_rcond) and 0 < w_rcond < 1
        check(ok, "w_rcond", f"must be in (0, 1) (got {w_rcond!r})")
        if sdp_solver != "auto" and sdp_method != "shift":
            try:  # fail before sampling when the external solver cannot run at all
                sdp._check_external(sdp_solver)
            except RuntimeError as e:
                raise ConfigError("sdp_solver", str(e)) from None
        self.sdp_method, self.sdp_solver, self.sdp_tol = sdp_method, sdp_solver, float(sdp_tol)
        self.w_fraction, self.w_rcond = float(w_fraction), float(w_rcond)
        self.w_steps = int(round(self.w_fraction * burn_in))
        self.kernel_with, self.keep_mean_precision = kernel_with, keep_mean_precision
        self.trick: GaussianTrick | None = None
        self._C: Tensor | None = None  # sum dx dx^T
        self._G: Tensor | None = None  # sum dx dg^T
        self.n_pairs = 0
        self.setup_stats: dict = {}

    def kernel(self, sigma: float, alpha: float) -> AB1stKernel:
        """The kernel of the proposal in use: AB-1st until W is known, then the quadratic one."""
        if self.trick is None:
            return AB1stKernel(sigma, alpha)
        return self.kernel_with(sigma, alpha, self.trick)

    def check(self, d: int, burn_in: int) -> None:
        if self.trick is not None:
            n = self.trick.D.numel()
            msg = f"W has size {n} but the model has {d} coordinates"
            check(n == d, "set_quadratic", msg)
        elif self.w_steps == 0:
            raise ConfigError(
                "burn_in",
                f"must be > 0 to estimate W during burn-in (got {burn_in}), "
                "or call sampler.set_quadratic(W) first",
            )

    def observe(self, pr: ABProposal) -> None:
        """Add the pairs of the moving chains of one proposal to C and G."""
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

    def fit(self) -> None:
        """W from the collected pairs, then D and the factor (:meth:`set`)."""
        t0 = time.perf_counter()
        W = symmetric_least_squares(self._C.cpu(), self._G.cpu(), self.w_rcond)
        self.setup_stats["w_seconds"] = time.perf_counter() - t0
        self.setup_stats["n_pairs"] = self.n_pairs
        self.set(W)
        self._C = self._G = None

    def set(self, W: Tensor, D: Tensor | None = None) -> None:
        self.trick, stats = fit_gaussian_trick(W, self.sdp_method, self.sdp_solver, self.sdp_tol, D)
        self.setup_stats.update(stats)

    def state_dict(self) -> dict:
        d = {"trick": None if self.trick is None else self.trick.state_dict()}
        for k in ("_C", "_G"):
            v = getattr(self, k)
            d[k] = None if v is None else v.detach().cpu()
        return {**d, "n_pairs": self.n_pairs, "setup_stats": dict(self.setup_stats)}

    def load_state_dict(self, d: dict) -> None:
        self.trick = None if d["trick"] is None else GaussianTrick.from_state_dict(d["trick"])
        for k in ("_C", "_G"):
            v = d.get(k)
            setattr(self, k, None if v is None else v.to(torch.float64))
        self.n_pairs = int(d["n_pairs"])
        self.setup_stats = dict(d["setup_stats"])


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


class DataDiagonalW:
    """AB-diag's W (Sec. 5.4, App. B.6): W_ii = 1 / (1 + var_i), var the data's per-coordinate
    variance (given, or set by the task before ``init``); ``diag_sign`` as in ABDiagKernel."""

    def __init__(self, data_variance: list[float] | None, diag_sign: int):
        ok = diag_sign in (1, -1) and not isinstance(diag_sign, bool)
        check(ok, "diag_sign", f"must be 1 or -1 (got {diag_sign!r})")
        self.diag_sign = int(diag_sign)
        self.data_variance = _to_list(data_variance, "data_variance")

    def kernel(self, sigma: float, alpha: float) -> ABDiagKernel | None:
        if self.data_variance is None:
            return None
        return ABDiagKernel(sigma, alpha, self.data_variance, self.diag_sign)

    def check(self, d: int, burn_in: int) -> None:
        if self.data_variance is None:
            raise ConfigError(
                "data_variance",
                "ab_diag needs the data's per-coordinate variance: set sampler.data_variance "
                "or call sampler.set_data_variance(var) before init",
            )
        n = len(self.data_variance)
        msg = f"needs one entry per model coordinate ({d}), got {n}"
        check(n == d, "data_variance", msg)

    def state_dict(self) -> dict:
        return {"data_variance": self.data_variance}

    def load_state_dict(self, d: dict) -> None:
        if d.get("data_variance") is not None:
            self.data_variance = [float(v) for v in d["data_variance"]]


# ------------------------------------------------------------------------ the adaptation


class ABAdaptation:
    """The AB burn-in (Alg. 1): the kernel and the updates of its (sigma, alpha) and W.

    ``step`` proposes with the kernel at the adapter's current (sigma, alpha) (a probe value
    while adapting), records the jump, collects the pairs for W while ``w`` needs them, and
    moves through the phases; once FROZEN it runs :meth:`frozen`. ``whole_run`` (Alg. 1 as
    written) keeps adapting after ``burn_in``: never frozen, not exact. ``w`` builds, from
    ``burn_in``, where W comes from (:class:`BurnInW`, :class:`DataDiagonalW`); None: W = 0.
    """

    needs_grad = True
    state_spaces = (BINARY, ORDINAL)
    model_type = None
    exact = True  # the frozen kernel; burn-in steps adapt
    whole_run = False  # the Alg. 1 variants: adapt for the whole run, never freeze
    tuned_names: tuple = ("sigma", "alpha")

    def __init__(self, sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max, w):
        if self.whole_run:
            msg = "must be true for the Alg. 1 variant (it adapts throughout)"
            check(adapt is True, "adapt", msg)
        check(_is_num(sigma) and sigma > 0, "sigma", f"must be a finite number > 0 (got {sigma!r})")
        ok = _is_num(alpha) and ALPHA_MIN <= alpha < 1
        check(ok, "alpha", f"must be a number in [0.5, 1) (got {alpha!r})")
        check(isinstance(adapt, bool), "adapt", f"must be true or false (got {adapt!r})")
        ok = _is_int(burn_in) and burn_in >= 0
        check(ok, "burn_in", f"must be an int >= 0 (got {burn_in!r})")
        check(_is_num(gamma) and 0 < gamma < 1, "gamma", f"must be in (0, 1) (got {gamma!r})")
        ok = _is_num(gamma_decay) and 0 < gamma_decay <= 1
        check(ok, "gamma_decay", f"must be in (0, 1] (got {gamma_decay!r})")
        ok = _is_int(n_probe) and n_probe >= 1
        check(ok, "n_probe", f"must be an int >= 1 (got {n_probe!r})")
        ok = _is_num(alpha_max) and ALPHA_MIN <= alpha_max < 1 and alpha_max >= alpha
        msg = f"must be in [0.5, 1) and >= alpha={alpha!r} (got {alpha_max!r})"
        check(ok, "alpha_max", msg)
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
        self.w: BurnInW | DataDiagonalW | None = None if w is None else w(self.burn_in)
        self.kernel = self._kernel()
        self.phase = Phase.COLLECT if isinstance(self.w, BurnInW) else self._after_collect()

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
        return self.adapt and (self.whole_run or self.step_count < self.burn_in)

    def current_params(self) -> dict:
        """(sigma, alpha) the next step uses (a probe value while adapting)."""
        return self.adapter.current() if self.adapting else dict(self.adapter.values)

    @property
    def setup_stats(self) -> dict:
        """The one-off cost of W, D and the factor (quadratic proposals; else empty)."""
        return self.w.setup_stats if isinstance(self.w, BurnInW) else {}

    def _kernel(self) -> AB1stKernel | None:
        """The kernel of the proposal in use (None: AB-diag before its data variance)."""
        if self.w is None:
            return AB1stKernel(self.sigma, self.alpha)
        return self.w.kernel(self.sigma, self.alpha)

    def _after_collect(self) -> Phase:
        return Phase.ADAPT if self.adapting else Phase.FROZEN

    def set_warmup(self, n_steps: int) -> None:
        """Use ``n_steps`` as ``burn_in`` (a task's declared warm-up), before the first step;
        W then comes from the first ``w_fraction`` of them."""
        if self.step_count:
            raise RuntimeError(f"the warm-up is set before the first step ({self.step_count})")
        self.burn_in = int(n_steps)
        if isinstance(self.w, BurnInW):
            self.w.w_steps = int(round(self.w.w_fraction * self.burn_in))
        if self.phase is not Phase.COLLECT:
            self.phase = self._after_collect()

    def set_quadratic(self, W: Tensor, D: Tensor | None = None) -> None:
        """Fix W (symmetric [d, d], the quadratic term of f) and D (solved when None) of a
        quadratic proposal; ends the COLLECT phase. Timings go to ``setup_stats``."""
        self.w.set(W, D)
        self.kernel = self._kernel()
        self.phase = self._after_collect()

    # -- the Adaptation protocol -----------------------------------------------------
    def init(self, model, x: Tensor) -> ChainState:
        if self.w is not None:
            self.w.check(x[0].numel(), self.burn_in)
        return self.kernel.init(model, x)

    def init_cost(self) -> tuple[int, int]:
        return self.kernel.init_cost()

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
        observe = self.w.observe if self.phase is Phase.COLLECT else None
        new, info, _ = self.kernel.move(model, state, generator, p["sigma"], p["alpha"], observe)
        if self.adapting:
            self.adapter.record(info.jump.mean())
        self.step_count += 1
        if self.phase is Phase.COLLECT and self.step_count >= self.w.w_steps:
            self.w.fit()
            self.kernel = self._kernel()
            self.phase = self._after_collect()
            mean_d = float(self.w.trick.D.mean())
            if self.w.keep_mean_precision and mean_d > 0:
                self.adapter.values["sigma"] = self.sigma * mean_d
            # adapt afresh for the new proposal: new cycle, initial update rate
            self.adapter.reset_cycle()
            self.adapter.gamma = self.gamma
        if self.phase is Phase.ADAPT and not self.adapting:
            self.phase = Phase.FROZEN
        return new, info

    def state_dict(self) -> dict:
        return {
            "sigma": self.sigma,
            "alpha": self.alpha,
            "step_count": self.step_count,
            "phase": self.phase.value,
            "adapter": self.adapter.state_dict(),
            **(self.w.state_dict() if self.w is not None else {}),
        }

    def load_state_dict(self, d: dict) -> None:
        self.step_count = int(d["step_count"])
        self.phase = Phase(d["phase"])
        self.adapter.load_state_dict(d["adapter"])
        if self.w is not None:
            self.w.load_state_dict(d)
            self.kernel = self._kernel()


# ------------------------------------------------------------------ the configs' classes


class AB1st(ABAdaptation):
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
        super().__init__(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max, None)


class ABDiag(ABAdaptation):
    """AB for deep EBMs (Sec. 5.4, App. B.6): constant diagonal W_ii = 1 / (1 + var_i).

    var is the data's per-coordinate variance: ``data_variance`` (list) or
    :meth:`set_data_variance` (a task calls it before ``init``). The proposal is factorised
    (no Gaussian trick): P = 1/sigma - diag_sign * alpha * W_ii. diag_sign = +1 is the paper's
    literal W (+1/2 alpha W_ii delta^2 in Eq. 11); -1 treats W as a negative-curvature
    (Hessian-like) estimate. The paper grid-searches (sigma, alpha).
    """

    uses_data_variance = True  # declared (ebmlab.core.protocols.UsesDataVariance)

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
        args = (sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max)
        # the common settings are checked first, then W's
        super().__init__(*args, lambda _: DataDiagonalW(data_variance, diag_sign))

    def set_data_variance(self, var: Tensor) -> None:
        """Per-coordinate data variance (any shape with model.dim entries), e.g. m (1 - m)."""
        var = torch.as_tensor(var).detach().cpu()
        self.w.data_variance = _to_list(var, "data_variance")
        self.kernel = self._kernel()


class ABQuadratic(ABAdaptation):
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
        if self.whole_run:
            msg = f"must be 1 for the Alg. 1 variant (W from the whole burn-in; got {w_fraction!r})"
            check(adapt is not True or w_fraction == 1, "w_fraction", msg)
        sdp_args = (sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond)
        super().__init__(
            *(sigma, alpha, adapt, burn_in, gamma, gamma_decay, n_probe, alpha_max),
            lambda n: BurnInW(*sdp_args, n, ABQuadraticKernel, keep_mean_precision=False),
        )


def _dlp_trace_kernel(sigma: float, alpha: float, trick: GaussianTrick) -> DLPTraceKernel:
    return DLPTraceKernel(sigma, trick)


class DLPTrace(ABAdaptation):
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
        sdp_args = (sdp_method, sdp_solver, sdp_tol, w_fraction, w_rcond)
        super().__init__(
            *(sigma, 0.5, adapt, burn_in, gamma, gamma_decay, n_probe, 0.5),
            lambda n: BurnInW(*sdp_args, n, _dlp_trace_kernel, keep_mean_precision=True),
        )


class AB1stAlg1(AB1st):
    """AB-1st with Alg. 1's schedule as written: (sigma, alpha) adapt by Alg. 3 for the WHOLE
    run, not only the first ``burn_in`` steps (``adapt`` must be true). The chain is then
    adaptive (its parameters depend on its past, and Alg. 3's update rate shrinks only when
    a cycle changes nothing), not a fixed MH kernel: every step is an exact MH step for the
    current (sigma, alpha), but no frozen kernel exists (``done`` stays false). The paper's
    procedure; ebmlab's default (``AB1st``) freezes after burn-in."""

    exact, whole_run = False, True


class ABQuadraticAlg1(ABQuadratic):
    """Quadratic AB (shift / max / trace) with Alg. 1's schedule as written: W and D from the
    pairs of the whole burn-in (``w_fraction`` must be 1: Alg. 1 estimates them from
    x_{0:T1}), and (sigma, alpha) adapting by Alg. 3 through the burn-in AND the mixed period
    T1 <= t <= T ("continue the alternatively updating sigma, alpha"). As in ``ABQuadratic``
    the adaptation restarts its cycle with the initial update rate gamma when the quadratic
    proposal takes over (our choice; Alg. 1 says only "continue"). The chain is adaptive, not
    a fixed MH kernel (``done`` stays false; see ``AB1stAlg1``); ebmlab's default
    (``ABQuadratic``) fits W on the first quarter of burn-in and freezes after it."""

    exact, whole_run = False, True
