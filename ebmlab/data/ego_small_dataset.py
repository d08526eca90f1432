"""Ego-small as a config-group dataset: graphs + upper-triangle bit vectors (RMwGGIS Table 2).

Wraps :func:`ebmlab.data.ego_small.load_ego_small`. ``data_dir`` is the Planetoid Citeseer
folder (``ind.citeseer.graph`` etc.) or a data root holding ``citeseer/``. Files are read in
:meth:`EgoSmall.load` (called by the task's setup), so a missing file ends the run with the
loader's message (exit code 2) before any compute.
"""

from __future__ import annotations

import networkx as nx
import torch
from torch import Tensor

from ebmlab.data.ego_small import adj_to_triu, graphs_to_adjacency, load_ego_small
from ebmlab.errors import ConfigError, check


class EgoSmall:
    """Train/test Ego-small graphs; ``train_x`` / ``test_x`` are [n, N(N-1)/2] float {0,1}."""

    def __init__(
        self,
        data_dir: str,
        cache_dir: str | None,
        max_nodes: int,
        n_test: int,
        dim: int | None,
    ):
        check(max_nodes >= 2, "max_nodes", f"must be an integer >= 2 (got {max_nodes})")
        check(n_test >= 1, "n_test", f"must be an integer >= 1 (got {n_test})")
        self.data_dir, self.cache_dir = data_dir, cache_dir
        self.max_nodes, self.n_test = max_nodes, n_test
        self.dim = max_nodes * (max_nodes - 1) // 2
        check(
            dim is None or dim == self.dim,
            "dim",
            f"must be null or max_nodes (max_nodes - 1) / 2 = {self.dim} (got {dim})",
        )
        self.train_graphs: list[nx.Graph] = []
        self.test_graphs: list[nx.Graph] = []

    def load(self) -> EgoSmall:
        """Build (or read from the cache) the graphs; test = the first ``n_test`` (paper: 40)."""
        train, test = load_ego_small(self.data_dir, self.cache_dir)
        graphs = list(test) + list(train)  # the build order: test was the first 40
        if self.n_test >= len(graphs):
            raise ConfigError(
                "dataset.n_test",
                f"must be smaller than the number of graphs built from {self.data_dir} "
                f"({len(graphs)}) (got {self.n_test})",
            )
        largest = max(g.number_of_nodes() for g in graphs)
        if largest > self.max_nodes:
            raise ConfigError(
                "dataset.max_nodes",
                f"must be >= the largest graph's node count {largest} (got {self.max_nodes})",
            )
        self.test_graphs, self.train_graphs = graphs[: self.n_test], graphs[self.n_test :]
        return self

    def _bits(self, graphs: list[nx.Graph]) -> Tensor:
        return adj_to_triu(graphs_to_adjacency(graphs, self.max_nodes))

    @property
    def train_x(self) -> Tensor:
        return self._bits(self.train_graphs)

    @property
    def test_x(self) -> Tensor:
        return self._bits(self.test_graphs)

    def edge_mean(self) -> Tensor:
        """Per-bit training mean (for Bernoulli initialisation of chains)."""
        return self.train_x.mean(0) if self.train_graphs else torch.zeros(self.dim)
