"""Fitted / true parameters of ratio matching on small Ising models, by exact expectations.

The data are the true model's exact distribution (all 2^d states); each estimator's expected
gradient is solved for zero (ebmlab.learning.ratio_matching_exact). The fitted model has a
coupling for every pair and a field per spin (as the learner's dense Ising). Prints a markdown
table (docs/ratio_matching.md, "Consistent ratio matching"):

    python scripts/ratio_matching_exact_fits.py
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor, nn

from ebmlab.data.lattices import lattice_adjacency
from ebmlab.learning.ratio_matching_exact import expected_dynamics, stationary_point
from ebmlab.models.base import EnergyModel
from ebmlab.models.enumeration import binary_states


class PairwiseIsing(EnergyModel):
    """log p(x) = s^T J s + b.s, s = 2x - 1, J symmetric with zero diagonal (float64);
    parameters: one value per pair i < j, then the fields."""

    def __init__(self, d: int):
        super().__init__()
        self.d = d
        self.pairs = torch.triu_indices(d, d, offset=1)
        self.theta = nn.Parameter(torch.zeros(self.pairs.shape[1] + d, dtype=torch.float64))

    def coupling(self) -> Tensor:
        j = torch.zeros(self.d, self.d, dtype=torch.float64)
        j = j.index_put((self.pairs[0], self.pairs[1]), self.theta[: self.pairs.shape[1]])
        return j + j.T

    def log_prob(self, x: Tensor) -> Tensor:
        s = 2.0 * x - 1.0
        return ((s @ self.coupling()) * s).sum(-1) + s @ self.theta[self.pairs.shape[1] :]


def truth_vector(model: PairwiseIsing, j: Tensor, b: Tensor) -> Tensor:
    return torch.cat([j[model.pairs[0], model.pairs[1]], b]).double()


def open_lattice(n: int) -> Tensor:
    a = torch.zeros(n * n, n * n)
    for r, c in itertools.product(range(n), range(n)):
        for rr, cc in ((r + 1, c), (r, c + 1)):
            if rr < n and cc < n:
                a[r * n + c, rr * n + cc] = a[rr * n + cc, r * n + c] = 1.0
    return a


CASES = {
    "1 bit (field 0.7)": (torch.zeros(1, 1), torch.tensor([0.7])),
    "3 spins": (
        torch.tensor([[0.0, 0.4, -0.3], [0.4, 0.0, 0.2], [-0.3, 0.2, 0.0]]),
        torch.tensor([0.3, -0.2, 0.1]),
    ),
    "3x3 periodic, sigma 0.3": (0.3 * lattice_adjacency(3).double(), torch.zeros(9)),
    "3x3 periodic, sigma 0.3, field 0.1": (
        0.3 * lattice_adjacency(3).double(),
        torch.full((9,), 0.1),
    ),
    "3x3 open, sigma 0.3, field 0.1": (0.3 * open_lattice(3).double(), torch.full((9,), 0.1)),
}
ROWS = [  # objective, estimator, variant, s, replacement
    ("eq3", "full", "-", 0, False),
    ("hyvarinen", "full", "-", 0, False),
    ("lyu", "full", "-", 0, False),
    ("eq3", "ggis", "advanced", 4, True),
    ("eq3", "ggis", "advanced", 1, False),
    ("eq3", "ggis", "advanced", 4, False),
    ("eq3", "ggis", "advanced", 8, False),
    ("eq3", "ggis", "reference_basic", 2, False),
    ("eq3", "ggis", "reference_basic", 4, False),
    ("hyvarinen", "ggis", "basic", 4, False),
]


def _ratio(fit: Tensor, true: Tensor, mask: Tensor) -> str:
    if not mask.any():
        return "-"
    if bool((true[mask] == 0).all()):
        return f"0 (fitted max abs {float(fit[mask].abs().max()):.1e})"
    r = fit[mask] / true[mask]
    if float(r.max() - r.min()) < 5e-4:
        return f"{float(r.mean()):.4f}"
    return f"{float(r.mean()):.4f} [{float(r.min()):.4f}, {float(r.max()):.4f}]"


def _diverges(model, **estimator) -> str:
    """When no stationary point is found: follow the expected gradient from 0 (Adam 0.01)."""
    with torch.no_grad():
        model.theta.zero_()
    g = expected_dynamics(model, 0.01, 300, **estimator)
    k = max(range(len(g)), key=g.__getitem__)
    return f"no stationary point; expected dynamics from 0: max abs grad {g[k]:.0e} at step {k + 1}"


def main() -> None:
    print(
        "| model | objective | estimator | coupling fitted/true | field fitted/true "
        "| max abs non-edge J | max residual |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, (j, b) in CASES.items():
        d = b.numel()
        model = PairwiseIsing(d)
        true = truth_vector(model, j, b)
        with torch.no_grad():
            model.theta.copy_(true)
            states = binary_states(0, 1 << d, d).double()
            p_data = torch.softmax(model.log_prob(states), 0)
        n_pairs = model.pairs.shape[1]
        edge = torch.zeros_like(true, dtype=torch.bool)
        edge[:n_pairs] = j[model.pairs[0], model.pairs[1]] != 0
        field = torch.zeros_like(edge)
        field[n_pairs:] = True
        for objective, estimator, variant, s, replacement in ROWS:
            if estimator != "full" and s > d:
                continue
            est = dict(
                states=states,
                p_data=p_data,
                objective=objective,
                estimator=estimator,
                proposal="value",
                variant=variant,
                s=s,
                replacement=replacement,
            )
            start = 0.9 * true / (4.0 if objective == "eq3" else 1.0)
            fit, residual = stationary_point(model, start, 1e-12, **est)
            how = (
                "full"
                if estimator == "full"
                else (f"{variant}, s={s}, {'with' if replacement else 'without'} repl.")
            )
            if residual > 1e-4:  # hybr failures leave residuals >= 1
                print(f"| {name} | {objective} | {how} | {_diverges(model, **est)} | | | |")
                continue
            off = fit[:n_pairs][~edge[:n_pairs]].abs()
            print(
                f"| {name} | {objective} | {how} | {_ratio(fit, true, edge)} "
                f"| {_ratio(fit, true, field)} "
                f"| {float(off.max()) if off.numel() else 0.0:.1e} | {residual:.0e} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
