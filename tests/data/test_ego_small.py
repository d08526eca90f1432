"""Restricted unpickler and the Ego-small dataset (RMwGGIS Table 2 data)."""

import os
import pickle
import shutil
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import torch

from ebmlab.data import ego_small
from ebmlab.data.ego_small import (
    adj_to_triu,
    adjacency_to_graphs,
    build_ego_small,
    graphs_to_adjacency,
    load_ego_small,
    triu_to_adj,
)
from ebmlab.data.safe_pickle import ForbiddenPickleClass, safe_load_pickle, safe_loads

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "graphs" / "citeseer"


class _Evil:
    def __init__(self, target: Path):
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


class _EvilEval:
    def __reduce__(self):
        return (eval, ("1 + 1",))


# --------------------------------------------------------------------------- safe pickle
@pytest.mark.parametrize("protocol", [2, pickle.HIGHEST_PROTOCOL])
def test_malicious_reduce_is_refused(tmp_path, protocol):
    target = tmp_path / "pwned"
    payload = pickle.dumps({"a": [1, _Evil(target)]}, protocol=protocol)
    with pytest.raises(ForbiddenPickleClass, match=r"system"):
        safe_loads(payload)
    assert not target.exists()
    path = tmp_path / "evil.pkl"
    path.write_bytes(payload)
    with pytest.raises(ForbiddenPickleClass, match="forbidden global"):
        safe_load_pickle(path)
    assert not target.exists()


def test_other_forbidden_globals():
    with pytest.raises(ForbiddenPickleClass, match=r"builtins\.eval"):
        safe_loads(pickle.dumps(_EvilEval(), protocol=4))
    # a class the allow-list does not name, even a harmless one
    with pytest.raises(ForbiddenPickleClass, match=r"collections\.Counter"):
        safe_loads(pickle.dumps(__import__("collections").Counter("ab"), protocol=2))
    # _codecs.encode is allowed for latin-1 only
    bad = b"\x80\x02c_codecs\nencode\nq\x00X\x01\x00\x00\x00xX\x04\x00\x00\x00zlibq\x01\x86R."
    with pytest.raises(ForbiddenPickleClass, match="zlib"):
        safe_loads(bad)


def test_allowed_objects_round_trip():
    obj = {
        "m": sp.csr_matrix(np.array([[0, 1.5], [2, 0]], dtype=np.float32)),
        "a": np.arange(6, dtype=np.int64).reshape(2, 3),
        "t": (1, 2.0, "s", b"b", None, True),
    }
    for protocol in (2, 4):
        out = safe_loads(pickle.dumps(obj, protocol=protocol))
        assert (out["m"] != obj["m"]).nnz == 0 and out["m"].dtype == np.float32
        np.testing.assert_array_equal(out["a"], obj["a"])
        assert out["t"] == obj["t"]


def test_fixture_files_load():
    x = safe_load_pickle(FIXTURE / "ind.citeseer.x")
    assert sp.issparse(x) and x.shape == (3, 7)
    g = safe_load_pickle(FIXTURE / "ind.citeseer.graph")
    assert isinstance(g, dict) and g[5] == [100, 7, 9, 5]


def test_real_citeseer_files_load(shared_data):
    folder = shared_data / "citeseer"
    shapes = {"x": (120, 3703), "tx": (1000, 3703), "allx": (2312, 3703)}
    for name, shape in shapes.items():
        m = safe_load_pickle(folder / f"ind.citeseer.{name}")
        assert sp.issparse(m) and m.shape == shape
    graph = safe_load_pickle(folder / "ind.citeseer.graph")
    assert isinstance(graph, dict) and len(graph) == 3327
    assert all(isinstance(v, list) for v in graph.values())


# --------------------------------------------------------------------------- Ego-small build
def _edges(g):
    return sorted(tuple(sorted(e)) for e in g.edges())


def test_build_on_fixture_exact():
    graphs = build_ego_small(FIXTURE)
    assert len(graphs) == 2
    g0, g1 = graphs
    # centre 5 first, then neighbours 7, 9, 100; triangle 5-7-9; self-loop dropped
    assert list(g0.nodes()) == [0, 1, 2, 3]
    assert _edges(g0) == [(0, 1), (0, 2), (0, 3), (1, 2)]
    # centre 100 with 17 neighbours (5 and the 16 leaves): a star of 18 nodes
    assert g1.number_of_nodes() == 18 and _edges(g1) == [(0, v) for v in range(1, 18)]


def test_missing_file_message(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        load_ego_small(tmp_path)
    msg = str(e.value)
    assert "ind.citeseer.graph" in msg and str(tmp_path / "citeseer") in msg
    assert "planetoid" in msg.lower()


def test_cache_is_used_and_keyed_by_source(tmp_path, monkeypatch):
    src = tmp_path / "data" / "citeseer"
    shutil.copytree(FIXTURE, src)
    cache = tmp_path / "cache"
    train, test = load_ego_small(tmp_path / "data", cache)
    assert train == [] and len(test) == 2  # fewer than 40 graphs: all are test
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].suffix == ".txt"
    assert "graph 4 4" in files[0].read_text()

    def fail(*args, **kwargs):
        raise AssertionError("cache not used")

    monkeypatch.setattr(ego_small, "build_ego_small", fail)
    _, test2 = load_ego_small(src, cache)  # the Citeseer folder itself also works
    assert [_edges(g) for g in test2] == [_edges(g) for g in test]
    monkeypatch.undo()

    # a corrupted cache is rebuilt, a changed source gets a new cache file
    files[0].write_text(files[0].read_text().replace("graph 18 17", "graph 18 16"))
    _, test3 = load_ego_small(src, cache)
    assert [_edges(g) for g in test3] == [_edges(g) for g in test]
    data = safe_load_pickle(src / "ind.citeseer.graph")
    data[7].append(300)  # node 7 gains a neighbour: its ego graph now has 4 nodes
    (src / "ind.citeseer.graph").write_bytes(pickle.dumps(data, protocol=2))
    _, test4 = load_ego_small(src, cache)
    assert len(list(cache.glob("*.txt"))) == 2 and len(test4) == 3


def test_real_ego_small(shared_data, tmp_path):
    graphs = build_ego_small(shared_data / "citeseer")
    sizes = np.array([g.number_of_nodes() for g in graphs])
    assert len(graphs) == 200 and sizes.min() == 4 and sizes.max() == 17
    assert sizes.mean() == pytest.approx(6.41, abs=1e-9)
    for g in graphs:
        assert nx.number_of_selfloops(g) == 0 and nx.is_connected(g)
        assert g.degree(0) == g.number_of_nodes() - 1  # ego centre first
    train, test = load_ego_small(shared_data, tmp_path)
    assert len(train) == 160 and len(test) == 40
    assert [_edges(g) for g in test + train] == [_edges(g) for g in graphs]
    train2, test2 = load_ego_small(shared_data, tmp_path)  # from the text cache
    assert [_edges(g) for g in test2 + train2] == [_edges(g) for g in graphs]


# --------------------------------------------------------------------------- tensors
def test_adjacency_round_trip():
    graphs = [nx.path_graph(4), nx.complete_graph(3), nx.star_graph(5)]
    adj = graphs_to_adjacency(graphs, max_nodes=7)
    assert adj.shape == (3, 7, 7) and adj.dtype == torch.float32
    assert torch.equal(adj, adj.transpose(1, 2)) and adj.diagonal(dim1=1, dim2=2).sum() == 0
    assert adj[0].sum() == 6 and adj[0, 0, 1] == 1 and adj[0, 0, 2] == 0
    back = adjacency_to_graphs(adj)
    assert [_edges(g) for g in back] == [_edges(g) for g in graphs]
    kept = adjacency_to_graphs(adj, remove_isolated=False)
    assert [g.number_of_nodes() for g in kept] == [7, 7, 7]
    # empty graphs become a single node; soft adjacencies are thresholded on the upper triangle
    soft = torch.zeros(2, 4, 4)
    soft[1, 0, 2], soft[1, 2, 0] = 0.7, 0.1
    empty, one = adjacency_to_graphs(soft)
    assert empty.number_of_nodes() == 1 and empty.number_of_edges() == 0
    assert _edges(one) == [(0, 1)]
    with pytest.raises(ValueError, match="max_nodes=3"):
        graphs_to_adjacency(graphs, max_nodes=3)


def test_triu_round_trip(gen):
    n = 6
    v = torch.bernoulli(torch.full((5, n * (n - 1) // 2), 0.5), generator=gen)
    adj = triu_to_adj(v, n)
    assert torch.equal(adj, adj.transpose(-1, -2)) and adj.diagonal(dim1=-2, dim2=-1).sum() == 0
    assert torch.equal(adj_to_triu(adj), v)
    # row-major order: (0,1), (0,2), ..., (0,n-1), (1,2), ...
    e = torch.zeros(n * (n - 1) // 2)
    e[n - 1] = 1
    assert triu_to_adj(e, n)[1, 2] == 1
    with pytest.raises(ValueError, match="n\\(n-1\\)/2"):
        triu_to_adj(v, n + 1)
