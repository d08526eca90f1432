"""Ego-small graph dataset (RMwGGIS Table 2; built as in GraphRNN / EDP-GNN / GDSS).

Source: the Planetoid Citeseer citation graph ``ind.citeseer.graph`` (a pickled
``defaultdict`` node -> neighbour list), read with the restricted unpickler of
:mod:`ebmlab.data.safe_pickle`. Build: undirected graph from the dict, self-loops dropped,
largest connected component with its nodes relabelled 0..n-1 in ascending Citeseer id (the
order networkx's component subgraph yields), radius-1 ego graph of every node in that order,
keep those with 4 <= |V| <= 18, take the first 200 (no shuffle). Result: 200 graphs of 4-17
nodes, mean 6.41 nodes; test = first 40, train = remaining 160.

Inside each ego graph the nodes are ordered breadth-first from the ego centre: centre first,
then its neighbours by ascending id. This order defines the padded adjacency that models see.

The built set is cached as a plain-text edge list (``ego_small_<hash>.txt``) keyed by the
SHA-256 of the source file, so a changed source file never reuses a stale cache.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

import networkx as nx
import torch
from torch import Tensor

from ebmlab.data.files import reading
from ebmlab.data.safe_pickle import safe_load_pickle

NUM_GRAPHS = 200
NUM_TEST = 40
MIN_NODES = 4
MAX_NODES = 18
_GRAPH_FILE = "ind.citeseer.graph"
_CACHE_VERSION = "ego_small-v1"


def _missing(path: Path, folder: Path) -> FileNotFoundError:
    return FileNotFoundError(
        f"Citeseer file '{path.name}' not found in {folder} (expected {path}). Ego-small is "
        "built from the Planetoid Citeseer files ind.citeseer.{x,tx,allx,graph,test.index}: "
        "download them from the 'data/' folder of https://github.com/kimiyoung/planetoid "
        f"and put them in {folder}."
    )


def _citeseer_graph_file(data_dir: str | Path) -> Path:
    """``data_dir`` may be the Citeseer folder itself or a data root holding ``citeseer/``."""
    data_dir = Path(data_dir)
    for folder in (data_dir, data_dir / "citeseer"):
        if (folder / _GRAPH_FILE).is_file():
            return folder / _GRAPH_FILE
    folder = data_dir if data_dir.name == "citeseer" else data_dir / "citeseer"
    raise _missing(folder / _GRAPH_FILE, folder)


def _ego_graph_bfs(g: nx.Graph, centre: int) -> nx.Graph:
    """Radius-1 ego graph with nodes inserted centre first, then neighbours by ascending id."""
    nodes = [centre, *sorted(g.neighbors(centre))]
    h = nx.Graph()
    h.add_nodes_from(nodes)
    h.add_edges_from(g.subgraph(nodes).edges())
    return h


def build_ego_small(citeseer_dir: str | Path) -> list[nx.Graph]:
    """Build the 200 Ego-small graphs from the Planetoid Citeseer graph file (see module doc)."""
    path = _citeseer_graph_file(citeseer_dir)
    with reading([path], "the Planetoid Citeseer files ind.citeseer.*"):
        adjacency = safe_load_pickle(path)
        if not isinstance(adjacency, dict):
            raise ValueError(f"expected a dict node -> neighbours, got {type(adjacency)}")
    g = nx.from_dict_of_lists(adjacency)
    g.remove_edges_from(list(nx.selfloop_edges(g)))
    lcc = sorted(max(nx.connected_components(g), key=len))
    g = nx.relabel_nodes(g.subgraph(lcc), {v: i for i, v in enumerate(lcc)}, copy=True)
    graphs = []
    for centre in range(len(lcc)):
        if MIN_NODES <= g.degree(centre) + 1 <= MAX_NODES:
            graphs.append(_ego_graph_bfs(g, centre))
            if len(graphs) == NUM_GRAPHS:
                break
    # Relabel each graph 0..k-1 in its BFS order (a self-contained graph, no Citeseer ids).
    return [nx.convert_node_labels_to_integers(h, ordering="default") for h in graphs]


# ---------------------------------------------------------------------------------------------
# Plain-text cache: "graph <num_nodes> <num_edges>" followed by one "u v" line per edge.
def _write_graphs(path: Path, graphs: list[nx.Graph], header: str) -> None:
    lines = [f"# {header}", f"# {len(graphs)} graphs"]
    for h in graphs:
        lines.append(f"graph {h.number_of_nodes()} {h.number_of_edges()}")
        lines.extend(f"{u} {v}" for u, v in h.edges())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def _read_graphs(path: Path) -> list[nx.Graph] | None:
    """Graphs from a cache file, or None when it is incomplete or malformed."""
    graphs: list[nx.Graph] = []
    sizes: list[tuple[int, int]] = []
    declared = None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("#"):
                m = re.fullmatch(r"# (\d+) graphs", line)
                declared = int(m.group(1)) if m else declared
                continue
            if not line:
                continue
            fields = line.split()
            if fields[0] == "graph":
                sizes.append((int(fields[1]), int(fields[2])))
                graphs.append(nx.Graph())
                graphs[-1].add_nodes_from(range(int(fields[1])))
            else:
                u, v = (int(t) for t in fields)
                graphs[-1].add_edge(u, v)
    ok = declared == len(graphs) and all(
        h.number_of_nodes() == n and h.number_of_edges() == m for h, (n, m) in zip(graphs, sizes)
    )
    return graphs if ok else None


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_ego_small(
    data_dir: str | Path, cache_dir: str | Path | None = None
) -> tuple[list[nx.Graph], list[nx.Graph]]:
    """Return ``(train, test)``: test = the first 40 Ego-small graphs, train = the other 160.

    ``data_dir`` is the Citeseer folder or a data root containing ``citeseer/``. With
    ``cache_dir`` the built set is stored there as a text edge list keyed by the source hash.
    """
    source = _citeseer_graph_file(data_dir)
    graphs = None
    if cache_dir is not None:
        key = hashlib.sha256(f"{_CACHE_VERSION}:{_file_sha256(source)}".encode()).hexdigest()
        cache = Path(cache_dir) / f"ego_small_{key[:16]}.txt"
        if cache.is_file():
            try:
                graphs = _read_graphs(cache)
            except (ValueError, IndexError):
                graphs = None  # malformed cache: rebuild and overwrite
        if graphs is None:
            graphs = build_ego_small(source.parent)
            _write_graphs(cache, graphs, f"{_CACHE_VERSION} source={source.name} key={key}")
    else:
        graphs = build_ego_small(source.parent)
    return graphs[NUM_TEST:], graphs[:NUM_TEST]


# ---------------------------------------------------------------------------------------------
# Tensor conversions. The model input is the strict upper triangle of the padded adjacency.
def graphs_to_adjacency(graphs: list[nx.Graph], max_nodes: int) -> Tensor:
    """Padded 0/1 adjacency ``[len(graphs), max_nodes, max_nodes]`` (float32) in node order."""
    out = torch.zeros(len(graphs), max_nodes, max_nodes)
    for k, h in enumerate(graphs):
        n = h.number_of_nodes()
        if n > max_nodes:
            raise ValueError(f"graph {k} has {n} nodes, more than max_nodes={max_nodes}")
        a = torch.as_tensor(nx.to_numpy_array(h, nodelist=list(h.nodes()), weight=None))
        out[k, :n, :n] = (a != 0).float()
    out.diagonal(dim1=-2, dim2=-1).zero_()
    return out


def adjacency_to_graphs(
    adj: Tensor, threshold: float = 0.5, remove_isolated: bool = True
) -> list[nx.Graph]:
    """Graphs from (possibly soft) adjacencies ``[n, N, N]``: edge where ``adj > threshold``.

    The upper triangle decides (the result is symmetric, without self-loops). With
    ``remove_isolated`` (the GDSS evaluation convention) padding/isolated nodes are dropped and
    a graph left empty becomes a single node, so graph statistics stay defined.
    """
    if adj.dim() != 3 or adj.shape[-1] != adj.shape[-2]:
        raise ValueError(f"expected adjacency of shape [n, N, N], got {tuple(adj.shape)}")
    upper = torch.triu(adj.detach().cpu() > threshold, diagonal=1)
    graphs = []
    for a in upper:
        h = nx.Graph()
        h.add_nodes_from(range(a.shape[0]))
        h.add_edges_from(a.nonzero().tolist())
        if remove_isolated:
            h.remove_nodes_from(list(nx.isolates(h)))
            if h.number_of_nodes() == 0:
                h.add_node(0)
            h = nx.convert_node_labels_to_integers(h)
        graphs.append(h)
    return graphs


def adj_to_triu(adj: Tensor) -> Tensor:
    """Strict upper triangle ``[..., N, N] -> [..., N(N-1)/2]`` (row-major order)."""
    n = adj.shape[-1]
    rows, cols = torch.triu_indices(n, n, offset=1, device=adj.device)
    return adj[..., rows, cols]


def triu_to_adj(v: Tensor, n: int) -> Tensor:
    """Inverse of :func:`adj_to_triu`: symmetric ``[..., n, n]`` with zero diagonal."""
    if v.shape[-1] != n * (n - 1) // 2:
        raise ValueError(f"last dim {v.shape[-1]} is not n(n-1)/2 = {n * (n - 1) // 2} for n={n}")
    rows, cols = torch.triu_indices(n, n, offset=1, device=v.device)
    adj = v.new_zeros(*v.shape[:-1], n, n)
    adj[..., rows, cols] = v
    return adj + adj.transpose(-1, -2)


# Bit vectors of generated graphs (tasks/graph_generation.py).
GEN_INITS = ("data_mean", "uniform", "zeros")


def bits_to_graphs(x: Tensor, max_nodes: int) -> list[nx.Graph]:
    """Upper-triangle bits [n, N(N-1)/2] -> graphs without isolated (padding) nodes."""
    return adjacency_to_graphs(triu_to_adj(x.detach().float().cpu(), max_nodes))


def init_bits(n: int, mode: str, x: Tensor, g: torch.Generator) -> Tensor:
    """``n`` initial bit vectors: zeros, Bernoulli(1/2), or Bernoulli of the per-bit mean of
    ``x`` clamped to [0.01, 0.99] (``data_mean``)."""
    d = x.shape[1]
    if mode == "zeros":
        return torch.zeros(n, d, device=x.device)
    if mode == "uniform":
        p = torch.full((n, d), 0.5, device=x.device)
    else:
        p = x.float().mean(0).clamp(0.01, 0.99).expand(n, d)
    return (torch.rand(p.shape, generator=g, device=x.device) < p).float()
