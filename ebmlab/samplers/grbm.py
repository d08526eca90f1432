"""Samplers for the Gaussian-Bernoulli RBM (Liao et al. 2022), on the ChainState interface.

* :class:`GRBMGibbs` - block Gibbs h ~ p(h|v), v ~ p(v|h) (App. A.2, Alg. 5).
* :class:`GRBMLangevin` - Langevin on the marginal energy F(v) (Alg. 1, Eq. 6) with the
  MALA acceptance of Eq. 7.
* :class:`GRBMGibbsLangevin` - K Langevin steps on v with h fixed, then h ~ p(h|v) (Alg. 2),
  Metropolis-adjusted with the closed-form K-step Gaussian proposal (Eq. 11-12).

State: ``x`` = v [chains, D], ``log_prob`` = -F(v) (always the untempered marginal),
``grad`` = -dF/dv (Langevin only). ``extra`` holds ``t`` (steps taken), ``h`` (joint
samplers; sampled from p(h|v) at the first step when absent), ``logits`` (hidden logits
of the current v, Gibbs-Langevin), ``horizon`` and ``adjust_step`` (set by ``init``).

Shared hyperparameters (the two Langevin samplers):

* ``step_size`` (alpha_0): initial Langevin step size.
* ``scale_by_var``: multiply alpha_0 by the model's current mean variance (Alg. 3 line 7).
* ``anneal``: "cosine" (Eq. 22) or "none". The schedule is counted from k = 0 as in the
  authors' code, alpha_k = alpha_0 (1 + cos(pi (k - 1) / K)) / 2 for k = 1..K, so the
  first step uses alpha_0 and no step has step size 0 (Eq. 22 read with k = 1..K would make
  the last step, and the whole of K = 1, a no-op).
* ``adjust_step`` (eta in Alg. 1-2): outer steps t <= adjust_step are always accepted,
  later ones go through the Metropolis test; 0 = adjust every step, >= total steps = never.
* ``energy_scale``: "none" (default, paper-faithful: Eq. 6-12 as written, target p) or
  "batch" (the authors' code: energies and their v-gradients are divided by the number of
  chains B while the Langevin noise stays sqrt(2 alpha); equivalently the chain targets the
  tempered density p^(1/B), and Gibbs-Langevin targets exp(-E(v,h)/B) with h still drawn
  from the untempered p(h|v); the stationary visible spread is then about B x var). The
  drift of "batch" at step size alpha_0 equals the drift of "none" at alpha_0 / B.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ebmlab.errors import ConfigError
from ebmlab.samplers.base import ChainState, Sampler, StepInfo, mh_accept
from ebmlab.samplers.spaces import CONTINUOUS

ANNEALS = ("cosine", "none")
ENERGY_SCALES = ("none", "batch")


def cosine_schedule(alpha0: float, n: int) -> list[float]:
    """Eq. 22 counted from 0: [alpha0 (1 + cos(pi k / n)) / 2 for k = 0..n-1]."""
    return [alpha0 * (1.0 + math.cos(math.pi * k / n)) / 2.0 for k in range(n)]


def kstep_proposal(
    model, v0: Tensor, h: Tensor, alphas: list[float], temperature: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Mean [B, D] and variance [D] of the K-step Langevin proposal q(v_K | v_0, h) (Eq. 11).

    With c_k = 1 - alpha_k / (T var) and beta_k = prod_{j>k} c_j (beta_K = 1):
    mean = beta_0 v_0 + (sum_k beta_k alpha_k) (mu + W h) / (T var),
    var = sum_k 2 alpha_k beta_k^2. T is the energy temperature (B under energy_scale=batch).
    """
    with torch.no_grad():
        beta0, a, s2 = _kstep_coeffs(model.var, alphas, temperature)
        return beta0 * v0 + a * model.mean_v_given_h(h), s2


def _kstep_coeffs(var: Tensor, alphas: list, temperature: float):
    """(beta_0, a, s2) of Eq. 11 for step sizes ``alphas``: K floats, or K per-coordinate [D]
    tensors (a step that differs by coordinate, e.g. alpha_0 var_d)."""
    if all(isinstance(a, (int, float)) for a in alphas):
        al = torch.tensor(alphas, dtype=var.dtype, device=var.device).unsqueeze(1)  # [K, 1]
    else:
        al = torch.stack([torch.as_tensor(a, dtype=var.dtype).expand_as(var) for a in alphas])
    tv = temperature * var
    c = 1.0 - al / tv  # [K, D]
    # beta_k for k = 0..K: reverse cumulative products of c_{k+1..K}
    rev = torch.flip(torch.cumprod(torch.flip(c, [0]), 0), [0])  # rev[k] = prod_{j>=k} c_j
    beta = torch.cat([rev, torch.ones_like(rev[:1])], 0)  # beta[k] = prod_{j>k} c_j (1-based)
    a = (beta[1:] * al).sum(0) / tv
    s2 = (2.0 * al * beta[1:] ** 2).sum(0)
    return beta[0], a, s2


def _check_common(step_size, anneal, adjust_step, energy_scale) -> None:
    if not (isinstance(step_size, (int, float)) and step_size > 0 and math.isfinite(step_size)):
        raise ConfigError("step_size", f"a finite float > 0 (got {step_size!r})")
    if anneal not in ANNEALS:
        raise ConfigError("anneal", f"one of {list(ANNEALS)} (got {anneal!r})")
    if not isinstance(adjust_step, int) or isinstance(adjust_step, bool) or adjust_step < 0:
        raise ConfigError("adjust_step", f"an integer >= 0 (got {adjust_step!r})")
    if energy_scale not in ENERGY_SCALES:
        raise ConfigError("energy_scale", f"one of {list(ENERGY_SCALES)} (got {energy_scale!r})")


class _GRBMSampler(Sampler):
    """Common state handling. ``init`` accepts optional per-run overrides ``horizon`` (T of
    the outer cosine schedule, Langevin) and ``adjust_step`` (e.g. the learner disables the
    Metropolis test during a warm-up by passing its number of CD steps)."""

    needs_grad = False
    state_spaces = (CONTINUOUS,)
    model_type = "ebmlab.models.grbm.GRBM"
    joint = True  # keeps h in state.extra
    adjust_step = 0
    anneal_steps = 1
    energy_scale = "none"
    anneals_step_size = False  # declared: a step size alpha_0 a task may anneal (GRBM Sec. 4)

    def init(
        self, model, x: Tensor, horizon: int | None = None, adjust_step: int | None = None
    ) -> ChainState:
        state = super().init(model, x)
        state.extra = {
            "t": 0,
            "horizon": int(horizon if horizon is not None else self.anneal_steps),
            "adjust_step": int(adjust_step if adjust_step is not None else self.adjust_step),
        }
        return state

    def _temperature(self, v: Tensor) -> float:
        return float(v.shape[0]) if self.energy_scale == "batch" else 1.0

    def _alpha0(self, model) -> float:
        a = self.step_size
        if self.scale_by_var:
            a = a * float(model.var.detach().mean())
        return a

    def _adjust_now(self, state: ChainState, t: int) -> bool:
        return t > state.extra.get("adjust_step", self.adjust_step)


class GRBMGibbs(_GRBMSampler):
    """Block Gibbs for the GRBM (Alg. 5): h ~ p(h|v) (Eq. 4), then v ~ p(v|h) (Eq. 3).

    Always exact; ``state.extra["h"]`` is the h drawn in the last step (so (v, h) is a joint
    sample). The hidden logits of the new v serve both its log-probability and the next
    step's p(h|v) (``state.extra["logits"]``), so a step costs one hidden matmul, not two.
    Has no hyperparameters."""

    exact = True

    def __init__(self):
        pass

    def step(self, model, state: ChainState, generator: torch.Generator):
        with torch.no_grad():
            v = state.x
            logits = state.extra.get("logits")
            if logits is None:
                logits = model.hidden_logits(v)
            p = torch.sigmoid(logits)
            u = torch.rand(p.shape, generator=generator, device=p.device, dtype=p.dtype)
            h = (u < p).to(p.dtype)
            v_new = model.sample_v_given_h(h, generator).reshape(v.shape)
            logits_new = model.hidden_logits(v_new)
            lp = -(model._quad(v_new) - torch.nn.functional.softplus(logits_new).sum(-1))
        n = v.shape[0]
        ones = torch.ones(n, device=v.device)
        info = StepInfo(
            accept_prob=ones,
            accepted=torch.ones(n, dtype=torch.bool, device=v.device),
            jump=(v_new - v).reshape(n, -1).norm(dim=1),
            n_log_prob=1,
            n_grad=0,
        )
        extra = dict(state.extra, t=state.extra.get("t", 0) + 1, h=h, logits=logits_new)
        return ChainState(x=v_new, log_prob=lp, grad=None, extra=extra), info


class GRBMLangevin(_GRBMSampler):
    """Langevin on the marginal energy (Alg. 1), MALA-adjusted (Eq. 7) after ``adjust_step``.

    Step t (1-based) uses alpha_t = CosineScheduler(t, T, alpha_0) with T = ``anneal_steps``
    (the length of the chain, e.g. the CD steps; the schedule restarts every T steps).
    ``jump`` in StepInfo is the Euclidean distance moved.
    """

    anneals_step_size = True

    needs_grad = True
    joint = False

    def __init__(
        self,
        step_size: float,
        adjust_step: int,
        anneal: str,
        anneal_steps: int,
        scale_by_var: bool,
        energy_scale: str,
    ):
        _check_common(step_size, anneal, adjust_step, energy_scale)
        if not isinstance(anneal_steps, int) or anneal_steps < 1:
            raise ConfigError("anneal_steps", f"an integer >= 1 (got {anneal_steps!r})")
        self.step_size = float(step_size)
        self.adjust_step = adjust_step
        self.anneal = anneal
        self.anneal_steps = anneal_steps
        self.scale_by_var = bool(scale_by_var)
        self.energy_scale = energy_scale
        self.exact = adjust_step == 0

    def step_alpha(self, model, t: int, horizon: int) -> float:
        a0 = self._alpha0(model)
        if self.anneal == "none":
            return a0
        k = (t - 1) % horizon
        return a0 * (1.0 + math.cos(math.pi * k / horizon)) / 2.0

    def step(self, model, state: ChainState, generator: torch.Generator):
        with torch.no_grad():
            return self._step(model, state, generator)

    def _step(self, model, state: ChainState, generator: torch.Generator):
        v, lp, g = state.x, state.log_prob, state.grad
        n = v.shape[0]
        t = state.extra.get("t", 0) + 1
        temp = self._temperature(v)
        alpha = self.step_alpha(model, t, state.extra.get("horizon", self.anneal_steps))
        noise = torch.randn(v.shape, generator=generator, device=v.device, dtype=v.dtype)
        v_new = v + (alpha / temp) * g + math.sqrt(2.0 * alpha) * noise
        lp_new, g_new = model.log_prob_and_grad(v_new)
        extra = dict(state.extra, t=t)
        proposal = ChainState(x=v_new, log_prob=lp_new, grad=g_new, extra=extra)
        if self._adjust_now(state, t):
            # Eq. 7 with energies divided by the temperature (1 unless energy_scale=batch)
            fwd = (v_new - v - (alpha / temp) * g).reshape(n, -1).double().pow(2).sum(1)
            rev = (v - v_new - (alpha / temp) * g_new).reshape(n, -1).double().pow(2).sum(1)
            log_r = (lp_new.double() - lp.double()) / temp + (fwd - rev) / (4.0 * alpha)
            accepted, prob = mh_accept(log_r, generator)
            new = state.select(accepted, proposal)
            new.extra = extra
        else:
            accepted = torch.ones(n, dtype=torch.bool, device=v.device)
            prob = torch.ones(n, device=v.device)
            new = proposal
        jump = (new.x - v).reshape(n, -1).norm(dim=1)
        return new, StepInfo(prob, accepted, jump, n_log_prob=1, n_grad=1)


class GRBMGibbsLangevin(_GRBMSampler):
    """Gibbs-Langevin (Alg. 2): ``n_inner`` (K) Langevin steps on v under E(v, h) with h fixed
    and the cosine schedule within the K steps, then h ~ p(h|v); from outer step
    ``adjust_step`` + 1 on, the (v, h) move is accepted with Eq. 12, using the closed-form
    K-step proposal density of Eq. 11 (:func:`kstep_proposal`).

    With h fixed, E(v, h) is quadratic in v, so the K inner steps compose to the Gaussian of
    Eq. 11; a step draws v_K from it directly (one normal draw per coordinate, not K), which
    is the same proposal in law (:meth:`langevin_inner` keeps the literal loop; the tests check
    the two agree). The hidden logits, log q(h|v), E(v, h) and W h + mu of the current state
    are kept in ``state.extra`` (``logits``, ``log_qh``, ``energy``, ``mean_h``), so a step
    evaluates them once, at the proposal (a step without the test keeps only the logits and
    leaves ``state.log_prob`` None: nothing in the step needs -F(v), and an adjusted step
    computes it from the kept logits); the Eq. 11 coefficients are memoised until the model's
    variances change. StepInfo counts the K conditional-energy gradients as ``n_grad`` and
    the hidden-logit evaluation at the proposal as one ``n_log_prob``.
    """

    anneals_step_size = True

    needs_grad = False
    joint = True

    def __init__(
        self,
        step_size: float,
        n_inner: int,
        adjust_step: int,
        anneal: str,
        scale_by_var: bool,
        energy_scale: str,
    ):
        _check_common(step_size, anneal, adjust_step, energy_scale)
        if not isinstance(n_inner, int) or isinstance(n_inner, bool) or n_inner < 1:
            raise ConfigError("n_inner", f"an integer >= 1 (got {n_inner!r})")
        self.step_size = float(step_size)
        self.n_inner = n_inner
        self.adjust_step = adjust_step
        self.anneal = anneal
        self.scale_by_var = bool(scale_by_var)
        self.energy_scale = energy_scale
        self.exact = adjust_step == 0

    def _coeffs(self, var: Tensor, alphas: list[float], temperature: float):
        """:func:`_kstep_coeffs`, memoised on (var, alphas, T): they change only when the
        model's variances do, so a chain of CD steps computes them once."""
        memo = getattr(self, "_coeffs_memo", None)
        key = (tuple(alphas), temperature, var.dtype, var.device)
        if memo is not None and memo[0] == key and torch.equal(memo[1], var):
            return memo[2]
        out = _kstep_coeffs(var, alphas, temperature)
        self._coeffs_memo = (key, var.detach().clone(), out)
        return out

    def inner_alphas(self, model) -> list[float]:
        a0 = self._alpha0(model)
        if self.anneal == "none":
            return [a0] * self.n_inner
        return cosine_schedule(a0, self.n_inner)

    def langevin_inner(
        self, model, v: Tensor, h: Tensor, alphas: list[float], temperature: float, generator
    ) -> Tensor:
        """The K inner steps of Alg. 2 (lines 2-6) as written: Langevin on E(v, h)/T with h
        fixed. The sampler draws their result in closed form instead (same law)."""
        shape = v.shape
        v = v.reshape(shape[0], -1)
        m = model.mean_v_given_h(h)
        tv = temperature * model.var
        for a in alphas:
            noise = torch.randn(v.shape, generator=generator, device=v.device, dtype=v.dtype)
            v = v - a * (v - m) / tv + math.sqrt(2.0 * a) * noise
        return v.reshape(shape)

    def step(self, model, state: ChainState, generator: torch.Generator):
        with torch.no_grad():
            v = state.x
            n = v.shape[0]
            vf = v.reshape(n, -1)
            t = state.extra.get("t", 0) + 1
            temp = self._temperature(v)
            h, logits = state.extra.get("h"), state.extra.get("logits")
            if logits is None:
                logits = model.hidden_logits(vf)
            if h is None:
                h = (
                    torch.rand(logits.shape, generator=generator, device=v.device)
                    < logits.sigmoid()
                ).to(v.dtype)
            alphas = self.inner_alphas(model)
            beta0, a, s2 = self._coeffs(model.var, alphas, temp)  # Eq. 11, each [D]
            m_h = state.extra.get("mean_h")  # W h + mu of the current h, kept by the last step
            if m_h is None:
                m_h = model.mean_v_given_h(h)
            mean_f = beta0 * vf + a * m_h
            noise = torch.randn(vf.shape, generator=generator, device=v.device, dtype=v.dtype)
            v_new = mean_f + s2.sqrt() * noise
            logits_new = model.hidden_logits(v_new)
            u = torch.rand(logits_new.shape, generator=generator, device=v.device)
            h_new = (u < logits_new.sigmoid()).to(v.dtype)
            if self._adjust_now(state, t):
                softplus_new = torch.nn.functional.softplus(logits_new).sum(-1)
                quad_new = model._quad(v_new)
                lp_new = -(quad_new - softplus_new)
                lp_old = state.log_prob
                if lp_old is None:  # left out by an unadjusted step: -F(v) from the kept logits
                    lp_old = -(model._quad(vf) - torch.nn.functional.softplus(logits).sum(-1))
                hl_new = (h_new * logits_new).sum(-1)
                log_qh_new = hl_new.double() - softplus_new.double()  # log q(h^t | v^t)
                e_new = quad_new.double() - hl_new.double()  # E(v^t, h^t)
                e_old = state.extra.get("energy")
                if e_old is None:
                    e_old = model._quad(vf).double() - (h * logits).sum(-1).double()
                log_qh_old = state.extra.get("log_qh")
                if log_qh_old is None:
                    log_qh_old = model.log_bernoulli(h, logits).double()
                m_h_new = model.mean_v_given_h(h_new)
                mean_r = beta0 * v_new + a * m_h_new
                s2d = 2.0 * s2.double()
                log_q_fwd = -((v_new.double() - mean_f.double()) ** 2 / s2d).sum(-1)
                log_q_rev = -((vf.double() - mean_r.double()) ** 2 / s2d).sum(-1)
                # Eq. 12 with energies divided by the temperature T
                log_r = (e_old - e_new) / temp + log_q_rev - log_q_fwd + log_qh_old - log_qh_new
                accepted, prob = mh_accept(log_r, generator)
                a1 = accepted.view(-1, 1)
                x = torch.where(a1, v_new, vf).reshape(v.shape)
                extra = dict(
                    state.extra,
                    t=t,
                    h=torch.where(a1, h_new, h),
                    logits=torch.where(a1, logits_new, logits),
                    log_qh=torch.where(accepted, log_qh_new, log_qh_old),
                    mean_h=torch.where(a1, m_h_new, m_h),
                    energy=torch.where(accepted, e_new, e_old),
                )
                lp = torch.where(accepted, lp_new, lp_old)
            else:
                accepted = torch.ones(n, dtype=torch.bool, device=v.device)
                prob = torch.ones(n, device=v.device)
                # -F(v) is not evaluated without the test (log_prob None, like the test's terms)
                x, lp = v_new.reshape(v.shape), None
                extra = dict(
                    state.extra,
                    t=t,
                    h=h_new,
                    logits=logits_new,
                    # not evaluated without the test; an adjusted step computes what is missing
                    log_qh=None,
                    energy=None,
                    mean_h=None,
                )
            jump = (x - v).reshape(n, -1).norm(dim=1)
        info = StepInfo(prob, accepted, jump, n_log_prob=1, n_grad=len(alphas))
        return ChainState(x=x, log_prob=lp, grad=None, extra=extra), info
