"""Graph-statistics MMD for graph generation (RMwGGIS Table 2; GraphRNN / GDSS protocol).

Three squared MMDs (biased V-statistic ``mean K_aa + mean K_bb - 2 mean K_ab``) between two
lists of graphs:

* degree: per-graph degree histogram normalised to sum 1, Gaussian-EMD kernel, sigma 1;
* clustering: per-graph histogram of node clustering coefficients, 100 bins on [0, 1],
  normalised, Gaussian-EMD kernel, sigma 0.1, with ground distance ``|i - j| / 100`` between
  bins (bin centres on [0, 1], the reference's ``distance_scaling = bins``);
* orbit: per-graph mean over nodes of the 15 ORCA orbit counts of graphlets with 2-4 nodes
  (orbits 0-14), Gaussian kernel on the L2 distance, sigma 30.

Gaussian-EMD: ``k(p, q) = exp(-EMD(p, q)^2 / (2 sigma^2))``; for 1-D histograms of equal mass
on a unit-spaced support, EMD = sum_i |cumsum(p)_i - cumsum(q)_i| (shorter histogram
zero-padded). With these conventions train (160) vs test (40) of Ego-small gives degree
0.014201, clustering 0.027289, orbit 0.004441 (tests/test_graphs_stats.py).

Orbit counts are computed in-process, exactly, from adjacency-matrix combinatorics: the
non-induced rooted subgraph counts ``N_k(v)`` of each orbit pattern have closed forms in
``A``, ``A^2``, degrees and triangle counts; induced (ORCA) counts follow by inverting the
unit-triangular matrix of how many copies of each pattern every induced graphlet contains.
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np

NUM_ORBITS = 15
DEGREE_SIGMA = 1.0
CLUSTERING_SIGMA = 0.1
CLUSTERING_BINS = 100
ORBIT_SIGMA = 30.0

# ORCA numbering of node orbits in graphlets with 2-4 nodes.
#   0 edge | 1 end, 2 middle of path P3 | 3 triangle | 4 end, 5 inner of path P4
#   6 leaf, 7 centre of star K1,3 | 8 cycle C4 | 9 tail end, 10 triangle degree-2 node,
#   11 degree-3 node of the paw | 12 degree-2, 13 degree-3 node of the diamond | 14 K4
# _CONTAIN[i, j]: number of (not necessarily induced) copies of orbit pattern i rooted at a
# node, inside an induced graphlet where that node is in orbit j. N = _CONTAIN @ o.
_CONTAIN = np.eye(NUM_ORBITS, dtype=np.int64)
for (_i, _j), _c in {
    (1, 3): 2, (2, 3): 1,
    (4, 8): 2, (4, 9): 2, (4, 10): 1, (4, 12): 4, (4, 13): 2, (4, 14): 6,
    (5, 8): 2, (5, 10): 1, (5, 11): 2, (5, 12): 2, (5, 13): 4, (5, 14): 6,
    (6, 9): 1, (6, 10): 1, (6, 12): 2, (6, 13): 1, (6, 14): 3,
    (7, 11): 1, (7, 13): 1, (7, 14): 1,
    (8, 12): 1, (8, 13): 1, (8, 14): 3,
    (9, 12): 2, (9, 14): 3,
    (10, 12): 2, (10, 13): 2, (10, 14): 6,
    (11, 13): 2, (11, 14): 3,
    (12, 14): 3, (13, 14): 3,
}.items():  # fmt: skip
    _CONTAIN[_i, _j] = _c
_INDUCE = np.rint(np.linalg.inv(_CONTAIN)).astype(np.int64)  # unit triangular: integer inverse


def _choose2(x: np.ndarray) -> np.ndarray:
    return x * (x - 1) // 2


def _k4_per_node(a: np.ndarray, max_block_elems: int = 1 << 22) -> np.ndarray:
    """Number of 4-cliques containing each node: 1/6 sum_{u,x,y} A_vu A_vx A_vy A_ux A_uy A_xy.

    O(n^4) time, O(block n^2) memory: meant for the small graphs of graph-generation benchmarks.
    """
    n = a.shape[0]
    out = np.zeros(n, dtype=np.int64)
    block = max(1, max_block_elems // max(1, n * n))
    for s in range(0, n, block):  # blocks of centre nodes keep the [b, n, n] tensor small
        av = a[s : s + block]  # [b, n]
        tri = av[:, :, None] * av[:, None, :] * a[None]  # A_vu A_vx A_ux
        common = np.einsum("uy,vy,xy->vux", a, av, a)  # sum_y A_vy A_uy A_xy
        out[s : s + block] = (tri * common).sum(axis=(1, 2)) // 6
    return out


def orbit_counts(g: nx.Graph) -> np.ndarray:
    """Induced graphlet orbit counts per node, ``[num_nodes, 15]`` int64, ORCA orbits 0-14.

    Nodes in ``g.nodes()`` order; self-loops and edge directions/weights are ignored.
    """
    a = nx.to_numpy_array(g, nodelist=list(g.nodes()), weight=None, dtype=np.int64)
    a = (a != 0).astype(np.int64)
    np.fill_diagonal(a, 0)
    n = a.shape[0]
    d = a.sum(1)
    a2 = a @ a
    t = (a2 * a).sum(1) // 2  # triangles at each node
    a_dm1 = a @ (d - 1)  # sum over neighbours of (deg - 1)
    a2_off = a2 - np.diag(np.diag(a2))
    at = a * a2  # A_vu * (common neighbours of v, u)
    nonind = np.zeros((n, NUM_ORBITS), dtype=np.int64)
    nonind[:, 0] = d
    nonind[:, 1] = a_dm1  # v-u-w
    nonind[:, 2] = _choose2(d)
    nonind[:, 3] = t
    nonind[:, 4] = a @ a_dm1 - d * (d - 1) - 2 * t  # v-a-b-c
    nonind[:, 5] = (d - 1) * a_dm1 - 2 * t  # a-v-b-c
    nonind[:, 6] = a @ _choose2(d - 1)
    nonind[:, 7] = _choose2(d) * (d - 2) // 3
    nonind[:, 8] = _choose2(a2_off).sum(1)  # pairs of common neighbours with the opposite node
    nonind[:, 9] = a @ t - 2 * t
    nonind[:, 10] = at @ (d - 2)
    nonind[:, 11] = t * (d - 2)
    # v, u, x triangle with u ~ x sharing a further common neighbour y != v.
    nonind[:, 12] = ((a @ (a * (a2 - 1))) * a).sum(1) // 2
    nonind[:, 13] = _choose2(at).sum(1)
    nonind[:, 14] = _k4_per_node(a)
    return nonind @ _INDUCE.T


def _check_graphs(graphs: Sequence[nx.Graph], name: str) -> None:
    if len(graphs) == 0:
        raise ValueError(f"{name}: empty list of graphs")
    for k, g in enumerate(graphs):
        if g.number_of_nodes() == 0:
            raise ValueError(f"{name}[{k}] has no nodes; graph statistics are undefined")


def degree_histograms(graphs: Sequence[nx.Graph]) -> list[np.ndarray]:
    """Normalised degree histograms (index = degree)."""
    out = []
    for g in graphs:
        h = np.asarray(nx.degree_histogram(g), dtype=np.float64)
        out.append(h / h.sum())
    return out


def clustering_histograms(graphs: Sequence[nx.Graph], bins: int = CLUSTERING_BINS) -> np.ndarray:
    """Normalised histograms ``[n, bins]`` of node clustering coefficients on [0, 1]."""
    out = np.zeros((len(graphs), bins))
    for k, g in enumerate(graphs):
        c = np.fromiter(nx.clustering(g).values(), dtype=np.float64)
        h, _ = np.histogram(c, bins=bins, range=(0.0, 1.0))
        out[k] = h / h.sum()
    return out


def orbit_features(graphs: Sequence[nx.Graph]) -> np.ndarray:
    """Per-graph orbit features ``[n, 15]``: orbit counts summed over nodes / number of nodes."""
    return np.stack([orbit_counts(g).sum(0) / g.number_of_nodes() for g in graphs])


def _pad(hists: Sequence[np.ndarray], length: int) -> np.ndarray:
    out = np.zeros((len(hists), length))
    for k, h in enumerate(hists):
        out[k, : len(h)] = h
    return out


def _mmd2(k_aa: np.ndarray, k_bb: np.ndarray, k_ab: np.ndarray) -> float:
    return float(k_aa.mean() + k_bb.mean() - 2.0 * k_ab.mean())


def gaussian_emd_mmd2(
    hists_a: Sequence[np.ndarray],
    hists_b: Sequence[np.ndarray],
    sigma: float,
    bin_width: float = 1.0,
) -> float:
    """Biased MMD^2 with ``k = exp(-EMD^2 / (2 sigma^2))`` between normalised 1-D histograms.

    EMD between histograms on bins ``bin_width`` apart = bin_width * sum |cdf_p - cdf_q|.
    """
    length = max(max(len(h) for h in hists_a), max(len(h) for h in hists_b))
    ca = np.cumsum(_pad(hists_a, length), axis=1)
    cb = np.cumsum(_pad(hists_b, length), axis=1)

    def kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        emd = bin_width * np.abs(x[:, None, :] - y[None, :, :]).sum(-1)
        return np.exp(-(emd**2) / (2.0 * sigma**2))

    return _mmd2(kernel(ca, ca), kernel(cb, cb), kernel(ca, cb))


def gaussian_mmd2(feats_a: np.ndarray, feats_b: np.ndarray, sigma: float) -> float:
    """Biased MMD^2 with ``k = exp(-||x - y||^2 / (2 sigma^2))`` between feature vectors."""

    def kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        sq = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        return np.exp(-sq / (2.0 * sigma**2))

    return _mmd2(kernel(feats_a, feats_a), kernel(feats_b, feats_b), kernel(feats_a, feats_b))


def degree_mmd2(graphs_a: Sequence[nx.Graph], graphs_b: Sequence[nx.Graph]) -> float:
    """Degree-histogram MMD^2, Gaussian-EMD kernel with sigma 1."""
    return gaussian_emd_mmd2(degree_histograms(graphs_a), degree_histograms(graphs_b), DEGREE_SIGMA)


def clustering_mmd2(graphs_a: Sequence[nx.Graph], graphs_b: Sequence[nx.Graph]) -> float:
    """Clustering-coefficient MMD^2: 100-bin histograms, Gaussian-EMD (bin width 1/100), 0.1."""
    return gaussian_emd_mmd2(
        list(clustering_histograms(graphs_a)),
        list(clustering_histograms(graphs_b)),
        CLUSTERING_SIGMA,
        bin_width=1.0 / CLUSTERING_BINS,
    )


def orbit_mmd2(graphs_a: Sequence[nx.Graph], graphs_b: Sequence[nx.Graph]) -> float:
    """4-node orbit MMD^2: Gaussian kernel on L2 distance of mean orbit counts, sigma 30."""
    return gaussian_mmd2(orbit_features(graphs_a), orbit_features(graphs_b), ORBIT_SIGMA)


def graph_mmd(graphs_a: Sequence[nx.Graph], graphs_b: Sequence[nx.Graph]) -> dict[str, float]:
    """Degree, clustering and orbit MMD^2 between two graph lists, and their average ``avg``."""
    _check_graphs(graphs_a, "graphs_a")
    _check_graphs(graphs_b, "graphs_b")
    out = {
        "degree": degree_mmd2(graphs_a, graphs_b),
        "clustering": clustering_mmd2(graphs_a, graphs_b),
        "orbit": orbit_mmd2(graphs_a, graphs_b),
    }
    out["avg"] = (out["degree"] + out["clustering"] + out["orbit"]) / 3.0
    return out


def generated_graph_stats(graphs: Sequence[nx.Graph]) -> dict[str, float]:
    """Mean nodes, edges and connected fraction of generated graphs (``gen_*``)."""
    n = len(graphs)
    return {
        "gen_nodes": sum(h.number_of_nodes() for h in graphs) / n,
        "gen_edges": sum(h.number_of_edges() for h in graphs) / n,
        "gen_connected": sum(nx.is_connected(h) for h in graphs) / n,
    }
