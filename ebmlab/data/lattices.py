"""Graphs behind the Ising targets: periodic lattices and Barabasi-Albert graphs."""

from __future__ import annotations

import networkx as nx
import torch
from torch import Tensor


def lattice_adjacency(n_side: int) -> Tensor:
    """Adjacency of the periodic 2-D n_side x n_side lattice (torus), row-major node order."""
    g = nx.grid_2d_graph(n_side, n_side, periodic=True)
    nodes = [(i, j) for i in range(n_side) for j in range(n_side)]
    return torch.as_tensor(nx.to_numpy_array(g, nodelist=nodes), dtype=torch.float32)


def ba_adjacency(n_nodes: int, n_attach: int, seed: int) -> Tensor:
    """Adjacency of a Barabasi-Albert graph (networkx, seeded)."""
    g = nx.barabasi_albert_graph(n_nodes, n_attach, seed=seed)
    return torch.as_tensor(nx.to_numpy_array(g, nodelist=range(n_nodes)), dtype=torch.float32)
