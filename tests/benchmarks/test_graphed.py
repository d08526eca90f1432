"""benchmarks/graphed.py: the eager-vs-graphed identity check and the graphed columns of the
benchmarks, run on the CPU stand-in (on a CPU the benchmarks skip them with a line)."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import bench_samplers
from benchmarks.graphed import (
    BLOCK,
    FWD_BWD_GRAPH,
    backend_for,
    identity_check,
    identity_markdown,
    per_step,
    skip_line,
)
from ebmlab.core import graphs
from ebmlab.models.rbm import BernoulliRBM


def _case(label):
    def make():
        m = BernoulliRBM(n_visible=16, n_hidden=6, init_std=0.5, init_seed=2)
        for p in m.parameters():
            p.requires_grad_(False)
        g = torch.Generator().manual_seed(1)
        x0 = (torch.rand(6, 16, generator=g) < 0.5).float()
        return m, bench_samplers.make_sampler(label), x0, g

    return make


def test_identity_check_passes_and_catches_a_capture_that_does_not_replay():
    cases = {label: _case(label) for label in ("DMALA", "GWG-1", "ACS", "AB-1st")}
    rows = identity_check(cases, graphs.StandInBackend, blocks=4, block=10)
    assert [r["same"] for r in rows] == [True] * 4, rows
    assert all(r["captures"] == 1 for r in rows)
    assert "| DMALA | 40 | 1 | identical |" in identity_markdown(rows, "stand-in")

    class Frozen(graphs.StandInBackend):
        """Captures but never replays: the outputs keep the capture's garbage."""

        def capture(self, fn, generator):
            graph, out = super().capture(fn, generator)
            graph.replay = lambda: None
            return graph, out

    (row,) = identity_check({"DMALA": cases["DMALA"]}, Frozen, blocks=3, block=10)
    assert not row["same"] and "x" in row["differs"]
    assert "DIFFERS: x" in identity_markdown([row], "broken")


def test_backend_choice_and_the_cpu_skip_line():
    assert backend_for(torch.device("cpu"), "auto") is None
    assert backend_for(torch.device("cuda"), "off") is None
    assert isinstance(backend_for(torch.device("cpu"), "stand-in"), graphs.StandInBackend)
    assert isinstance(backend_for(torch.device("cuda"), "auto"), graphs.CudaGraphBackend)
    assert "skipped (CUDA graphs need a GPU, this run is on cpu)" in skip_line("cpu", "auto")
    with pytest.raises(ValueError, match="--graphs"):
        backend_for(torch.device("cpu"), "yes")


def test_graphed_times_are_per_step():
    stats = {"median": 1.0, "p25": 0.5, "p75": 2.0, "min": 0.5, "n": 3}
    summary = {
        "ops": {
            "A [graph]": {"wall": dict(stats), "cpu": dict(stats)},
            FWD_BWD_GRAPH: {"wall": dict(stats), "cpu": dict(stats)},
        },
        "ratios": {
            "A [graph] / fb": {"of": ["A [graph]", FWD_BWD_GRAPH], "wall": dict(stats),
                               "cpu": dict(stats)},
            "A / A [graph]": {"of": ["A", "A [graph]"], "wall": dict(stats), "cpu": dict(stats)},
        },
    }  # fmt: skip
    out = per_step(summary)
    assert out["ops"]["A [graph]"]["wall"]["median"] == 1.0 / BLOCK
    assert out["ops"][FWD_BWD_GRAPH]["wall"]["median"] == 1.0  # one call, not a block
    assert out["ratios"]["A [graph] / fb"]["cpu"]["p75"] == 2.0 / BLOCK
    assert out["ratios"]["A / A [graph]"]["wall"]["median"] == 1.0 * BLOCK


@pytest.mark.slow
def test_bench_samplers_graphed_table_on_the_stand_in(tmp_path, capsys):
    """The whole benchmark with its graphed column (stand-in) and without it (CPU)."""
    common = ["--device", "cpu", "--rounds", "1", "--warmup", "0", "--cases", "ising:4"]
    bench_samplers.main([*common, "--out-dir", str(tmp_path), "--name", "g", "--graphs",
                         "stand-in"])  # fmt: skip
    md = (tmp_path / "g.md").read_text()
    assert "## Eager vs CUDA-graphed steps" in md and "Stand-in backend (CPU)" in md
    for label in bench_samplers.SAMPLERS:
        assert f"| Ising 25x25 periodic | 4 | {label} |" in md.split("CUDA-graphed")[1]
    data = json.loads((tmp_path / "g.json").read_text())
    assert data["cases"][0]["graph_block"] == BLOCK
    bench_samplers.main([*common, "--out-dir", str(tmp_path), "--name", "e"])
    assert "Graphed steps: skipped" in (tmp_path / "e.md").read_text()
    assert "Graphed steps: skipped" in capsys.readouterr().out
