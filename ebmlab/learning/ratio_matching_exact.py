"""Exact expectations of the ratio matching estimators on enumerable models (analysis tool).

For a data distribution p_data over all 2^d states and a model, the expected stochastic
gradient of a ratio matching estimator is the gradient of

    S(theta) = sum_x p_data(x) sum_i c_i(x) t(delta_i(x)),   c_i = E[coefficient of term i]

with c held constant (the proposal and the weights carry no gradient): c = 1 for ``full`` and
the basic estimator (unbiased), c_i = s n(i) for advanced with replacement and c_i = pi_i
(inclusion probability) for advanced without replacement; ``variant="reference_basic"`` is
the reference code's basic estimator without replacement (weights 1 / (s n(i)), biased:
c_i = pi_i / (s n(i))). Training converges where
∇S = 0; :func:`stationary_point` solves that. docs/ratio_matching.md uses it for the fitted /
true numbers (scripts/ratio_matching_exact_fits.py).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import minimize, root
from torch import Tensor
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from ebmlab.learning.ratio_matching import gradient_proposal
from ebmlab.learning.ratio_matching_objectives import term


def inclusion_probabilities(q: Tensor, s: int) -> Tensor:
    """P(i among s indices drawn successively without replacement from q [n, d]) -> [n, d].

    Dynamic programme over the 2^d subsets drawn so far (small d only)."""
    n, d = q.shape
    bits = ((torch.arange(1 << d)[:, None] >> torch.arange(d)) & 1).to(q.dtype)  # [2^d, d]
    size = bits.sum(1).long()
    mass = q @ bits.T  # [n, 2^d] probability mass of each subset
    reach = torch.zeros(n, 1 << d, dtype=q.dtype)
    reach[:, 0] = 1.0
    for k in range(s):
        for m in torch.nonzero(size == k).flatten().tolist():
            step = reach[:, m : m + 1] * q / (1.0 - mass[:, m : m + 1])  # [n, d]
            for j in range(d):
                if not (m >> j) & 1:
                    reach[:, m | (1 << j)] += step[:, j]
    return reach[:, size == s] @ bits[size == s]


def expected_coefficients(q: Tensor, s: int, variant: str, replacement: bool) -> Tensor:
    """E[coefficient of term i] [n, d] of the sampled estimators with proposal q."""
    if variant == "basic":
        return torch.ones_like(q)
    if variant == "reference_basic":
        return inclusion_probabilities(q, s) / (s * q)
    return s * q if replacement else inclusion_probabilities(q, s)


def expected_surrogate(
    model,
    states: Tensor,
    p_data: Tensor,
    objective: str,
    estimator: str,
    proposal: str,
    variant: str,
    s: int,
    replacement: bool,
) -> Tensor:
    """S(theta) above: its parameter gradient is the expected stochastic gradient."""
    n, d = states.shape
    if estimator == "ggis":
        log_q = gradient_proposal(model, states, objective, proposal)[1]
    else:
        log_q = torch.full((n, d), -float(np.log(d)), dtype=torch.float64)
    t = term(objective, model.flip_deltas(states))
    if estimator == "full":
        c = torch.ones_like(t)
    else:
        c = expected_coefficients(log_q.exp(), s, variant, replacement).to(t.dtype)
    return (p_data[:, None] * c.detach() * t).sum()


def stationary_point(model, start: Tensor, tol: float, **estimator) -> tuple[Tensor, float]:
    """Parameters (flat) where the expected gradient of ``estimator`` (the keyword arguments
    of :func:`expected_surrogate`) vanishes, from ``start``; also returns the largest
    remaining |gradient|. With constant coefficients (``full``, ``basic``) S is the expected
    loss itself and is minimised by a trust-region Newton method with the exact Hessian;
    otherwise scipy's ``root`` (hybr) solves ∇S = 0. ``model`` is left at the solution."""
    params = list(model.parameters())

    def grad(theta: np.ndarray, create_graph: bool = False) -> tuple[Tensor, Tensor]:
        vector_to_parameters(torch.as_tensor(theta, dtype=params[0].dtype), params)
        value = expected_surrogate(model, **estimator)
        g = torch.autograd.grad(value, params, create_graph=create_graph)
        return value, parameters_to_vector(g)

    def hessian(theta: np.ndarray) -> np.ndarray:
        _, g = grad(theta, create_graph=True)
        rows = [torch.autograd.grad(gk, params, retain_graph=True) for gk in g]
        return torch.stack([parameters_to_vector(r) for r in rows]).detach().numpy()

    def value_and_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        value, g = grad(theta)
        return float(value.detach()), g.detach().numpy()

    x0 = start.detach().numpy()
    if estimator["estimator"] == "full" or estimator["variant"] == "basic":
        opts = {"gtol": tol, "maxiter": 1000}
        x = minimize(
            value_and_grad, x0, jac=True, hess=hessian, method="trust-exact", options=opts
        ).x
    else:
        x = root(lambda t: value_and_grad(t)[1], x0, method="hybr", tol=tol).x
    residual = float(np.abs(value_and_grad(x)[1]).max())
    return parameters_to_vector(params).detach().clone(), residual


def expected_dynamics(model, lr: float, steps: int, **estimator) -> list[float]:
    """Adam on the expected gradient (what training follows on average) from the model's
    current parameters; returns the largest |gradient| of every step (inf once not finite)."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    out = []
    for _ in range(steps):
        opt.zero_grad()
        expected_surrogate(model, **estimator).backward()
        g = max(float(p.grad.abs().max()) for p in model.parameters())
        out.append(g if np.isfinite(g) else float("inf"))
        if not np.isfinite(g):
            break
        opt.step()
    return out
