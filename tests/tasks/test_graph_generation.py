"""Ego-small graph generation (RMwGGIS Table 2): R-GCN energy, dataset wrapper, end-to-end task
runs through the real entry point (kill / resume included)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ebmlab.data.ego_small import adj_to_triu, bits_to_graphs, triu_to_adj
from ebmlab.errors import ConfigError
from ebmlab.samplers.base import value_and_grad
from tests.helpers import from_conf, run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "graphs" / "citeseer"
MMD_KEYS = ("degree", "clustering", "orbit", "avg")
TIMINGS = ("seconds", "time_per_iter")
TINY = [
    "experiment=rmwggis/table2_graphs",
    "scale=smoke",
    "run.n_steps=3",
    "run.eval_every=1",
    "run.checkpoint_every=2",
    "task.n_samples=4",
    "task.gen_sweeps=1",
    "task.n_show=2",
    "learner.batch_size=4",
    "learner.s=5",
    "model.num_layers=2",
    "model.hidden_dim=8",
]


def _random_bits(n: int, max_nodes: int, p: float, gen: torch.Generator) -> torch.Tensor:
    d = max_nodes * (max_nodes - 1) // 2
    return (torch.rand(n, d, generator=gen) < p).float()


def rgcn(**kw):
    return from_conf("model/rgcn", **kw)


def ego_small(cache_dir, **kw):
    """conf/dataset/ego_small.yaml on the fixture's Citeseer files."""
    return from_conf("dataset/ego_small", data_dir=str(FIXTURE), cache_dir=cache_dir, **kw)


@pytest.mark.parametrize("aggregation", ["sum", "mean", "scaled_sum"])
def test_energy_is_permutation_invariant(aggregation, gen):
    torch.manual_seed(0)
    model = rgcn(max_nodes=9, hidden_dim=16, num_layers=5, aggregation=aggregation)
    x = _random_bits(6, 9, 0.3, gen)
    adj = triu_to_adj(x, 9)
    perm = torch.randperm(9, generator=gen)
    x_perm = adj_to_triu(adj[:, perm][:, :, perm])
    assert not torch.equal(x, x_perm)  # the relabelling really changes the bit vector
    e, e_perm = model.energy(x), model.energy(x_perm)
    torch.testing.assert_close(e, e_perm, rtol=1e-5, atol=1e-5)
    # ...and the energy is not trivially constant: removing an edge changes it
    x2 = x.clone()
    x2[:, 0] = 1 - x2[:, 0]
    assert (model.energy(x2) - e).abs().max() > 1e-6


def test_adjacency_rebuild_matches_triu_to_adj(gen):
    model = rgcn(max_nodes=7, hidden_dim=4, num_layers=1)
    x = _random_bits(5, 7, 0.5, gen)
    torch.testing.assert_close(model.adjacency(x), triu_to_adj(x, 7))


def test_log_prob_and_grad_shapes_and_values(gen):
    torch.manual_seed(1)
    model = rgcn(max_nodes=6, hidden_dim=8, num_layers=3)
    x = _random_bits(4, 6, 0.4, gen)
    lp, g = value_and_grad(model, x)
    assert lp.shape == (4,) and g.shape == x.shape == (4, 15)
    assert torch.isfinite(g).all() and g.abs().sum() > 0
    torch.testing.assert_close(lp, -model.energy(x).detach())
    # autograd through the dense adjacency: compare one coordinate with a finite difference
    xd = x.double()
    model = model.double()
    _, gd = value_and_grad(model, xd)
    eps = 1e-6
    e1 = xd.clone()
    e1[:, 3] += eps
    fd = (model.log_prob(e1) - model.log_prob(xd)).detach() / eps
    torch.testing.assert_close(gd[:, 3], fd, rtol=1e-4, atol=1e-6)


def test_init_from_data_sets_edge_density(gen):
    model = rgcn(max_nodes=6, hidden_dim=4, num_layers=2)
    x = _random_bits(50, 6, 0.2, gen)
    model.init_from_data(x)
    p = float(x.mean())
    assert model.edge_bias.item() == pytest.approx(torch.logit(torch.tensor(p)).item(), rel=1e-5)
    with torch.no_grad():
        model.out.weight.zero_()
        model.out.bias.zero_()
    # only the field remains: an independent Bernoulli(p) per edge bit
    torch.testing.assert_close(model.log_prob(x), model.edge_bias.item() * x.sum(-1))
    assert rgcn(max_nodes=6, edge_bias=False).edge_bias is None


def test_bad_model_config_is_config_error():
    with pytest.raises(ConfigError, match="aggregation"):
        rgcn(aggregation="max")
    with pytest.raises(ConfigError, match="max_nodes"):
        rgcn(max_nodes=1)
    with pytest.raises(ValueError, match="max_nodes=5"):
        rgcn(max_nodes=5).energy(torch.zeros(2, 9))


def test_bits_to_graphs_drops_padding():
    adj = torch.zeros(1, 6, 6)
    for u, v in [(0, 1), (0, 2), (1, 2), (0, 3)]:
        adj[0, u, v] = adj[0, v, u] = 1
    (g,) = bits_to_graphs(adj_to_triu(adj), 6)
    assert g.number_of_nodes() == 4 and g.number_of_edges() == 4


def test_dataset_wrapper_on_fixture(tmp_path):
    ds = ego_small(str(tmp_path), max_nodes=18, n_test=1).load()
    assert len(ds.test_graphs) == 1 and len(ds.train_graphs) == 1
    assert ds.train_x.shape == (1, 153) and ds.test_x.shape == (1, 153)
    assert ds.train_x.sum() == 17  # the K1,17 star
    with pytest.raises(ConfigError, match="max_nodes"):
        ego_small(None, max_nodes=10, n_test=1).load()
    with pytest.raises(ConfigError, match="n_test"):
        ego_small(None, n_test=40).load()


def test_end_to_end_on_fixture(tmp_path):
    run_dir = tmp_path / "run"
    p = run_cli(TINY + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1"], run_dir)
    res = p.results
    for k in MMD_KEYS:
        assert k in res and res[k] >= 0.0
    assert res["avg"] == pytest.approx((res["degree"] + res["clustering"] + res["orbit"]) / 3)
    assert res["n_samples"] == 4 and res["n_iters"] == 3
    assert "accept_rate" not in res  # ratio matching has no sampler: the key is left out
    text = (run_dir / "results.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert (run_dir / "figures" / "graphs.png").is_file()
    lines = (run_dir / "generated_graphs.txt").read_text().splitlines()
    assert sum(line.startswith("graph ") for line in lines) == 4


@pytest.mark.slow
def test_end_to_end_pcd_gwg_on_fixture(tmp_path):
    run_dir = tmp_path / "run"
    args = [a for a in TINY if not a.startswith(("experiment=", "learner.s="))]
    p = run_cli(
        [
            "experiment=rmwggis/table2_graphs_gwg",
            *args,
            "learner.buffer_size=4",
            "learner.batch_size=4",
            "learner.sampler_steps=2",
            "task.buffer_reinit=0.5",
            f"dataset.data_dir={FIXTURE}",
            "dataset.n_test=1",
        ],
        run_dir,
    )
    assert 0.0 <= p.results["accept_rate"] <= 1.0
    assert all(p.results[k] >= 0.0 for k in MMD_KEYS)


def test_end_to_end_real_data(shared_data, tmp_path):
    run_dir = tmp_path / "run"
    p = run_cli(TINY + [f"dataset.data_dir={shared_data}"], run_dir)
    res = p.results
    # train (160) vs test (40) reference values of PROTOCOLS.md
    assert res["ref_degree"] == pytest.approx(0.014201, abs=2e-6)
    assert res["ref_clustering"] == pytest.approx(0.027289, abs=2e-6)
    assert res["ref_orbit"] == pytest.approx(0.004441, abs=2e-6)
    assert all(res[k] >= 0.0 for k in MMD_KEYS)


def test_missing_data_is_exit_2(tmp_path):
    p = run_cli(TINY + [f"dataset.data_dir={tmp_path / 'nowhere'}"], tmp_path / "run", check=False)
    assert p.returncode == 2
    assert "ind.citeseer.graph" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_mismatched_max_nodes_is_exit_2(tmp_path):
    p = run_cli(
        TINY + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1", "model.max_nodes=20"],
        tmp_path / "run",
        check=False,
    )
    assert p.returncode == 2 and "model.max_nodes" in p.stderr
    assert not (tmp_path / "run" / "run_config.json").exists()  # refused before the run dir


# EBM(GWG): PCD buffer with re-initialisation, the GWG sampler's state, Adam
TINY_GWG = [
    "experiment=rmwggis/table2_graphs_gwg",
    *(a for a in TINY[1:] if not a.startswith("learner.s=")),
    "learner.buffer_size=4",
    "learner.sampler_steps=3",
    "task.buffer_reinit=0.5",
]


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", [2, 4])  # mid-run (checkpoint at 2) / after the last step
@pytest.mark.parametrize("tiny", [TINY, TINY_GWG], ids=["rmwggis", "pcd_gwg"])
def test_resume_after_kill_matches_uninterrupted(tmp_path, kill_at, tiny):
    """SIGKILL after step ``kill_at``, rerun: the same results as one uninterrupted run."""
    args = tiny + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1", "run.n_steps=4"]
    full = run_cli(args, tmp_path / "full").results
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    killed = run_cli(args, tmp_path / "res", env=env, check=False)
    assert killed.returncode != 0
    resumed = run_cli(args, tmp_path / "res").results
    assert resumed.keys() == full.keys()
    for k in full:
        if k not in TIMINGS:
            assert resumed[k] == full[k], k
    graphs = [
        (d / "generated_graphs.txt").read_text() for d in (tmp_path / "full", tmp_path / "res")
    ]
    assert graphs[0] == graphs[1]


def test_bad_eval_every_is_exit_2(tmp_path):
    p = run_cli(TINY + ["run.eval_every=2", "task.generate_every=3"], tmp_path / "run", check=False)
    assert p.returncode == 2 and "eval_every" in p.stderr


def test_buffer_reinit_with_ratio_matching_is_exit_2(tmp_path):
    args = TINY + [f"dataset.data_dir={FIXTURE}", "dataset.n_test=1", "task.buffer_reinit=0.5"]
    p = run_cli(args, tmp_path / "run", check=False)
    assert p.returncode == 2 and "buffer_reinit" in p.stderr
    assert not (tmp_path / "run" / "run_config.json").exists()  # refused before the run dir
