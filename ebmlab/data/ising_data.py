"""Ising training data: the end states of long single-site Gibbs chains (DLP 7.3.1).

Generated once and cached on disk, keyed by every generating parameter.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import networkx as nx
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ebmlab.data.lattices import lattice_adjacency
from ebmlab.errors import check
from ebmlab.utils.cache import load_cached, save_cached


def greedy_colouring(adjacency: Tensor) -> list[Tensor]:
    """Independent sets covering all nodes (networkx greedy colouring)."""
    g = nx.from_numpy_array(adjacency.numpy())
    colour = nx.greedy_color(g, strategy="largest_first")
    n_colours = max(colour.values()) + 1
    return [
        torch.tensor([v for v, c in colour.items() if c == k], dtype=torch.long)
        for k in range(n_colours)
    ]


def gibbs_ising_chains(
    adjacency: Tensor,
    sigma: float,
    bias: float,
    n_chains: int,
    n_site_updates: int,
    generator: torch.Generator,
    progress: bool = True,
) -> Tensor:
    """Exact Gibbs on log p = s^T J s + b.s, J = sigma * A (s = 2x - 1); returns x in {0,1}.

    p(s_i = +1 | rest) = sigmoid(4 (J s)_i + 2 b_i). Sites of one colour of a graph
    colouring are conditionally independent, so they are updated together: a
    sweep is one vectorised update per colour. ``n_site_updates`` single-site
    updates per chain are done as ceil(n_site_updates / d) sweeps (systematic
    scan; the reference uses random scan, which has the same stationary law).
    """
    d = adjacency.shape[0]
    j = sigma * adjacency
    colours = greedy_colouring(adjacency)
    s = torch.randint(0, 2, (n_chains, d), generator=generator).float() * 2 - 1
    n_sweeps = -(-n_site_updates // d)
    for _ in tqdm(
        range(n_sweeps), desc="Gibbs data (sweeps)", disable=not progress, mininterval=1.0
    ):
        for c in colours:
            field = s @ j[:, c]
            p_up = torch.sigmoid(4.0 * field + 2.0 * bias)
            u = torch.rand(p_up.shape, generator=generator)
            s[:, c] = torch.where(u < p_up, 1.0, -1.0)
    return (s + 1) / 2


class IsingLatticeData:
    """Samples from a periodic lattice Ising model (PROTOCOLS.md "Ising learning").

    Paper defaults: 25x25, sigma 0.25, 2,000 samples, each the end of a
    1,000,000-step single-site Gibbs chain (run as 1,600 colour-parallel sweeps).
    """

    def __init__(
        self,
        n_side: int,
        sigma: float,
        bias: float,
        n_samples: int,
        gibbs_steps: int,
        seed: int,
        cache_dir: str,
        dim: int | None,
    ):
        check(n_side >= 2, "n_side", f"lattice side must be an integer >= 2 (got {n_side})")
        check(n_samples >= 1, "n_samples", f"must be >= 1 (got {n_samples})")
        check(gibbs_steps >= 1, "gibbs_steps", f"must be >= 1 (got {gibbs_steps})")
        check(
            dim is None or dim == n_side * n_side,
            "dim",
            f"must equal n_side^2 = {n_side * n_side} (got {dim})",
        )
        self.n_side, self.sigma, self.bias = n_side, float(sigma), float(bias)
        self.n_samples, self.gibbs_steps, self.seed = n_samples, gibbs_steps, seed
        self.cache_dir = Path(cache_dir)
        self.dim = n_side * n_side

    def key(self) -> str:
        params = {
            "kind": "lattice_ising",
            "algo": "colour-sweeps-v1",
            "n_side": self.n_side,
            "sigma": self.sigma,
            "bias": self.bias,
            "n_samples": self.n_samples,
            "gibbs_steps": self.gibbs_steps,
            "seed": self.seed,
        }
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def cache_path(self) -> Path:
        return self.cache_dir / f"ising_lattice-{self.n_side}-{self.key()}.pt"

    def true_coupling(self) -> Tensor:
        return self.sigma * lattice_adjacency(self.n_side)

    def samples(self, progress: bool = True) -> Tensor:
        """The training set [n_samples, d] in {0,1}, generated on first use then cached."""
        path = self.cache_path
        cached = load_cached(path)
        if cached is not None:
            return cached["x"].float()
        g = torch.Generator().manual_seed(self.seed)
        x = gibbs_ising_chains(
            lattice_adjacency(self.n_side),
            self.sigma,
            self.bias,
            self.n_samples,
            self.gibbs_steps,
            g,
            progress,
        )
        save_cached({"x": x.to(torch.uint8)}, path)
        return x
