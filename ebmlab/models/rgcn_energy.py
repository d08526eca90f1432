"""R-GCN energy over graphs given as the upper triangle of a padded adjacency (RMwGGIS Sec. 5.2).

Input x in {0,1}^(N(N-1)/2): the strict upper triangle (row-major, as
:func:`ebmlab.data.ego_small.adj_to_triu`) of the adjacency of a graph padded to N nodes.
The energy rebuilds the symmetric adjacency A (differentiably, so grad_x E exists for GWG and
the RMwGGIS proposal) and runs an R-GCN (Schlichtkrull et al. 2018) with two relations, as in
the GraphEBM / GraphDF lineage of R-GCN energies:

    relation 0 "edge":     A
    relation 1 "no edge":  1 - A - I   (every non-adjacent pair, padding nodes included)
    h^{l+1}_i = Swish( W_self h^l_i + b + sum_r agg_r(i) ),
    agg_r(i)  = sum_j A_r[i, j] W_r h^l_j        (aggregation "sum", GraphEBM's choice)
             or that sum / (1 + sum_j A_r[i, j]) (aggregation "mean": R-GCN's 1/c_{i,r},
                                                   +1 so E stays smooth in A at degree 0)

starting from a constant node feature h^0_i = 1 (the graphs carry no node attributes), then a
sum readout over nodes and a linear map to the scalar energy E; ``log_prob = -E``. With
``edge_bias`` (ours, not in the paper) a learnable b adds ``b * sum(x)`` to log_prob, initialised
by :meth:`init_from_data` to the logit of the training edge density: without it an R-GCN
trained by ratio matching, which only shapes the energy next to the data, leaves dense graphs
(vastly more numerous) with too little energy and Gibbs sampling drifts to them.

Node existence: there is no separate node-existence variable. A node "exists" iff it has an
edge; padding nodes are isolated nodes and are dropped when the bits are turned back into
graphs (``adjacency_to_graphs(..., remove_isolated=True)``). Ego graphs are connected, so this
loses nothing on the data. Because every one of the N slots is treated alike, E is invariant to
any relabelling of the N nodes (padding included): the BFS order of the data does not matter.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from ebmlab.errors import check
from ebmlab.models.base import EnergyModel

AGGREGATIONS = ("sum", "mean", "scaled_sum")


class _Swish(nn.Module):
    """x * sigmoid(beta x) with a learnable beta per layer (initialised to 1)."""

    def __init__(self):
        super().__init__()
        self.beta = nn.Parameter(torch.tensor(1.0))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.sigmoid(self.beta * x)


class RGCNLayer(nn.Module):
    """One relational graph convolution with a self connection (R-GCN Eq. 2)."""

    def __init__(self, in_dim: int, out_dim: int, n_relations: int, aggregation: str):
        super().__init__()
        self.self_loop = nn.Linear(in_dim, out_dim)
        self.rel = nn.Linear(in_dim, out_dim * n_relations, bias=False)
        self.n_relations, self.out_dim, self.aggregation = n_relations, out_dim, aggregation

    def forward(self, h: Tensor, adj: Tensor) -> Tensor:
        """h [B, N, in], adj [B, R, N, N] -> [B, N, out]."""
        b, n, _ = h.shape
        hw = self.rel(h).view(b, n, self.n_relations, self.out_dim).transpose(1, 2)  # [B,R,N,o]
        msg = adj @ hw  # [B, R, N, out]
        if self.aggregation == "mean":
            msg = msg / (1.0 + adj.sum(-1, keepdim=True))  # smooth in A, also at degree 0
        elif self.aggregation == "scaled_sum":
            msg = msg / (n - 1)
        return self.self_loop(h) + msg.sum(1)


class RGCNEnergy(EnergyModel):
    """E(x) = Linear(sum_i h^L_i) of an L-layer R-GCN on the graph encoded by x (module doc)."""

    state_kind = "binary"

    def __init__(
        self,
        max_nodes: int,
        hidden_dim: int,
        num_layers: int,
        aggregation: Literal["sum", "mean", "scaled_sum"],
        readout: Literal["sum", "mean"],
        edge_bias: bool,
    ):
        super().__init__()
        check(max_nodes >= 2, "max_nodes", f"must be an integer >= 2 (got {max_nodes})")
        check(hidden_dim >= 1, "hidden_dim", f"must be a positive integer (got {hidden_dim})")
        check(num_layers >= 1, "num_layers", f"must be an integer >= 1 (got {num_layers})")
        check(
            aggregation in AGGREGATIONS,
            "aggregation",
            f"must be one of {', '.join(AGGREGATIONS)} (got {aggregation!r})",
        )
        check(readout in ("sum", "mean"), "readout", f"must be sum or mean (got {readout!r})")
        self.max_nodes = max_nodes
        self.dim = max_nodes * (max_nodes - 1) // 2
        self.readout = readout
        sizes = [1] + [hidden_dim] * num_layers
        self.layers = nn.ModuleList(
            RGCNLayer(a, b, 2, aggregation) for a, b in zip(sizes[:-1], sizes[1:])
        )
        self.acts = nn.ModuleList(_Swish() for _ in range(num_layers))
        self.out = nn.Linear(hidden_dim, 1)
        # optional field on the edge count: log_prob += b * sum(x) (an Erdos-Renyi base measure)
        self.edge_bias = nn.Parameter(torch.zeros(())) if edge_bias else None
        rows, cols = torch.triu_indices(max_nodes, max_nodes, offset=1)
        self.register_buffer("_rows", rows, persistent=False)
        self.register_buffer("_cols", cols, persistent=False)
        self.register_buffer("_eye", torch.eye(max_nodes), persistent=False)

    def energy(self, x: Tensor) -> Tensor:
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise ValueError(
                f"expected x of shape [batch, {self.dim}] (max_nodes={self.max_nodes}), "
                f"got {tuple(x.shape)}"
            )
        a = self.adjacency(x)
        adj = torch.stack([a, 1.0 - a - self._eye], dim=1)  # [B, 2, N, N]
        h = x.new_ones(x.shape[0], self.max_nodes, 1)
        for layer, act in zip(self.layers, self.acts):
            h = act(layer(h, adj))
        pooled = h.sum(1) if self.readout == "sum" else h.mean(1)
        e = self.out(pooled).squeeze(-1)
        if self.edge_bias is not None:
            e = e - self.edge_bias * x.sum(-1)
        return e

    @torch.no_grad()
    def init_from_data(self, x: Tensor) -> None:
        """Edge bias = logit of the training edge density (clamped to [.01, .99]), like an
        RBM's visible bias: the untrained model then draws graphs of the data's density."""
        if self.edge_bias is not None:
            self.edge_bias.fill_(torch.logit(x.float().mean().clamp(0.01, 0.99)).item())

    def adjacency(self, x: Tensor) -> Tensor:
        """Symmetric [B, N, N] adjacency (zero diagonal) from the upper-triangle bits [B, D]."""
        b, n = x.shape[0], self.max_nodes
        flat = self._rows * n + self._cols  # [D] positions in the flattened N x N matrix
        upper = x.new_zeros(b, n * n).index_add(1, flat, x).view(b, n, n)
        return upper + upper.transpose(1, 2)

    def log_prob(self, x: Tensor) -> Tensor:
        return -self.energy(x)
