"""Graph statistics MMD (RMwGGIS Table 2 / GraphRNN protocol) and in-process ORCA orbit counts."""

import itertools
import math

import networkx as nx
import numpy as np
import pytest

from ebmlab.data.ego_small import load_ego_small
from ebmlab.metrics.graph_stats import (
    _k4_per_node,
    clustering_mmd2,
    degree_mmd2,
    graph_mmd,
    orbit_counts,
    orbit_features,
    orbit_mmd2,
)


def _row(**orbits):
    r = np.zeros(15, dtype=np.int64)
    for k, v in orbits.items():
        r[int(k[1:])] = v
    return r


# Hand-counted induced orbit counts (ORCA numbering), one row per node.
HAND = {
    "P4 0-1-2-3": (
        nx.path_graph(4),
        [_row(o0=1, o1=1, o4=1)] + [_row(o0=2, o1=1, o2=1, o5=1)] * 2 + [_row(o0=1, o1=1, o4=1)],
    ),
    "star S3 centre 0": (
        nx.star_graph(3),
        [_row(o0=3, o2=3, o7=1)] + [_row(o0=1, o1=2, o6=1)] * 3,
    ),
    "paw: triangle 0-1-2, tail 3-0": (
        nx.Graph([(0, 1), (1, 2), (0, 2), (0, 3)]),
        [_row(o0=3, o2=2, o3=1, o11=1)]
        + [_row(o0=2, o1=1, o3=1, o10=1)] * 2
        + [_row(o0=1, o1=2, o9=1)],
    ),
    "C4": (nx.cycle_graph(4), [_row(o0=2, o1=2, o2=1, o8=1)] * 4),
    "diamond: 0-1 shared by triangles with 2, 3": (
        nx.Graph([(0, 1), (0, 2), (1, 2), (0, 3), (1, 3)]),
        [_row(o0=3, o2=1, o3=2, o13=1)] * 2 + [_row(o0=2, o1=2, o3=1, o12=1)] * 2,
    ),
    "K4": (nx.complete_graph(4), [_row(o0=3, o3=3, o14=1)] * 4),
}


@pytest.mark.parametrize("name", list(HAND))
def test_orbit_counts_hand(name):
    g, expected = HAND[name]
    np.testing.assert_array_equal(orbit_counts(g), np.stack(expected))


def _brute_orbits(g):
    """Induced orbit counts by enumerating every connected 3- and 4-node subset."""
    nodes = list(g.nodes())
    pos = {v: i for i, v in enumerate(nodes)}
    out = np.zeros((len(nodes), 15), dtype=np.int64)
    for v in nodes:
        out[pos[v], 0] = g.degree(v)
    for k in (3, 4):
        for sub in itertools.combinations(nodes, k):
            h = g.subgraph(sub)
            if not nx.is_connected(h):
                continue
            e, deg = h.number_of_edges(), dict(h.degree())
            top = max(deg.values())
            for v in sub:
                dv = deg[v]
                if k == 3:
                    orb = 3 if e == 3 else (1 if dv == 1 else 2)
                elif e == 3:  # path P4 or star
                    orb = {1: 6 if top == 3 else 4, 2: 5, 3: 7}[dv]
                elif e == 4:  # cycle C4 or paw
                    orb = 8 if top == 2 else {1: 9, 2: 10, 3: 11}[dv]
                elif e == 5:
                    orb = 12 if dv == 2 else 13
                else:
                    orb = 14
                out[pos[v], orb] += 1
    return out


def test_orbit_counts_match_enumeration():
    rng = np.random.default_rng(0)
    for _ in range(25):
        n = int(rng.integers(1, 12))
        g = nx.gnp_random_graph(n, float(rng.uniform(0.15, 0.9)), seed=int(rng.integers(1 << 30)))
        np.testing.assert_array_equal(orbit_counts(g), _brute_orbits(g))


def test_orbit_counts_larger_graph_identities():
    g = nx.gnp_random_graph(90, 0.3, seed=3)
    o = orbit_counts(g)
    assert (o >= 0).all()
    np.testing.assert_array_equal(o[:, 0], [d for _, d in g.degree()])
    np.testing.assert_array_equal(o[:, 3], list(nx.triangles(g).values()))
    k4 = np.zeros(90, dtype=np.int64)
    for c in nx.enumerate_all_cliques(g):
        if len(c) == 4:
            k4[c] += 1
        elif len(c) > 4:
            break
    np.testing.assert_array_equal(o[:, 14], k4)
    a = nx.to_numpy_array(g, dtype=np.int64)
    np.testing.assert_array_equal(_k4_per_node(a, max_block_elems=7 * 90 * 90), k4)  # 13 blocks
    # every induced 4-node graphlet counted once per member: orbit totals are multiples of
    # the orbit's size (P4 ends: 2 per copy, star leaves: 3, ...)
    tot = o.sum(0)
    assert tot[4] == tot[5] and tot[6] == 3 * tot[7] and tot[12] == tot[13]
    assert tot[9] * 2 == tot[10] == 2 * tot[11] and tot[8] % 4 == 0
    # relabelling permutes the rows
    perm = np.random.default_rng(1).permutation(90)
    h = nx.relabel_nodes(g, dict(enumerate(perm)))
    o_h = orbit_counts(h)
    pos = {v: i for i, v in enumerate(h.nodes())}
    np.testing.assert_array_equal(o_h[[pos[perm[i]] for i in range(90)]], o)


def test_mmd_hand_values():
    # degree histograms [0, 1] vs [0, 3/4, 0, 1/4]: EMD 0.5
    assert degree_mmd2([nx.path_graph(2)], [nx.star_graph(3)]) == pytest.approx(
        2 - 2 * math.exp(-0.125), rel=1e-12
    )
    # clustering 1 (bin 99) vs 0 (bin 0): EMD = 99 bins * 1/100, sigma 0.1
    assert clustering_mmd2([nx.complete_graph(3)], [nx.path_graph(3)]) == pytest.approx(
        2 - 2 * math.exp(-(0.99**2) / 0.02), rel=1e-12
    )
    # orbit features: K3 -> (2, 0, 0, 1, 0...), P3 -> (4/3, 2/3, 1/3, 0...): squared distance 2
    np.testing.assert_allclose(orbit_features([nx.path_graph(3)])[0, :4], [4 / 3, 2 / 3, 1 / 3, 0])
    assert orbit_mmd2([nx.complete_graph(3)], [nx.path_graph(3)]) == pytest.approx(
        2 - 2 * math.exp(-2 / 1800), rel=1e-9
    )
    # biased V-statistic with several graphs: within-set terms include the diagonal
    a, b = [nx.path_graph(2), nx.star_graph(3)], [nx.path_graph(2)]
    k = math.exp(-0.125)
    assert degree_mmd2(a, b) == pytest.approx((2 + 2 * k) / 4 + 1 - 2 * (1 + k) / 2, rel=1e-12)


def test_graph_mmd_properties():
    rng = np.random.default_rng(0)
    a = [nx.gnp_random_graph(int(rng.integers(4, 15)), 0.4, seed=i) for i in range(12)]
    b = [nx.gnp_random_graph(int(rng.integers(4, 15)), 0.2, seed=100 + i) for i in range(9)]
    same = graph_mmd(a, a)
    assert all(abs(v) < 1e-12 for v in same.values())
    ab, ba = graph_mmd(a, b), graph_mmd(b, a)
    assert set(ab) == {"degree", "clustering", "orbit", "avg"}
    for key in ab:
        assert ab[key] == pytest.approx(ba[key], abs=1e-15) and ab[key] > 1e-4
    assert ab["avg"] == pytest.approx((ab["degree"] + ab["clustering"] + ab["orbit"]) / 3)
    with pytest.raises(ValueError, match=r"graphs_b\[1\] has no nodes"):
        graph_mmd(a, [nx.path_graph(3), nx.Graph()])


def test_ego_small_train_vs_test_reference(shared_data, tmp_path):
    """GDSS/GraphRNN reference numbers for Ego-small train (160) vs test (40)."""
    train, test = load_ego_small(shared_data, tmp_path)
    out = graph_mmd(train, test)
    assert out["degree"] == pytest.approx(0.014201, abs=1e-6)
    assert out["clustering"] == pytest.approx(0.027289, abs=1e-6)
    assert out["orbit"] == pytest.approx(0.004441, abs=1e-6)
