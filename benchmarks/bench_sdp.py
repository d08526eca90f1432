"""Benchmark the AB sampler's SDP for the diagonal D (ebmlab.samplers.ab.sdp).

Prints a markdown table: ebmlab's own certified solver (``solver=auto``) against cvxpy+SCS
at a tight tolerance, on random symmetric W (d = 100, 400, 784), the 20x20 periodic Ising
grid and a Barabasi-Albert(400, 4) graph (J = 0.4407 times the adjacency matrix, AB paper
App. B). SCS is skipped at d >= 400 unless --with-scs-large (it takes minutes there).

    python benchmarks/bench_sdp.py [--methods trace,max] [--with-scs-large] [--threads 2]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import networkx as nx  # noqa: E402
import torch  # noqa: E402

from ebmlab.samplers.ab.sdp import solve_diagonal  # noqa: E402


def random_symmetric(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(n, n, generator=g, dtype=torch.float64)
    return (A + A.T) / math.sqrt(2 * n)


def graph_coupling(G: nx.Graph, J: float = 0.4407) -> torch.Tensor:
    A = nx.to_numpy_array(G, nodelist=sorted(G.nodes()), dtype=float)
    return J * torch.from_numpy(A)


def problems(seed: int) -> list[tuple[str, torch.Tensor]]:
    return [
        ("gauss-100", random_symmetric(100, seed)),
        ("gauss-400", random_symmetric(400, seed)),
        ("gauss-784", random_symmetric(784, seed)),
        ("ising-20x20", graph_coupling(nx.grid_2d_graph(20, 20, periodic=True))),
        ("BA-400-4", graph_coupling(nx.barabasi_albert_graph(400, 4, seed=seed))),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="trace,max")
    ap.add_argument("--tol", type=float, default=1e-4, help="our certified relative gap")
    ap.add_argument("--scs-tol", type=float, default=1e-6)
    ap.add_argument("--with-scs-large", action="store_true")
    ap.add_argument("--no-scs", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated problem names")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    methods = [m for m in args.methods.split(",") if m]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# SDP for the AB diagonal D: {platform.processor() or platform.machine()}, "
        f"{args.threads} torch threads, load average {load:.1f}, tol {args.tol}, "
        f"SCS eps {args.scs_tol}\n"
    )
    print(
        "| problem | d | method | ours s | ours objective | certified lambda_min | shift "
        "| cert. rel gap | SCS s | SCS objective | ours vs SCS | shift-method tr(D) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    only = set(filter(None, args.only.split(",")))
    for name, W in problems(args.seed):
        if only and name not in only:
            continue
        n = W.shape[0]
        for method in methods:
            r = solve_diagonal(W, method, "auto", tol=args.tol, seed=args.seed)
            scs_s = scs_obj = rel = "-"
            if not args.no_scs and (n < 400 or args.with_scs_large):
                try:
                    s = solve_diagonal(W, method, "scs", tol=args.scs_tol)
                    scs_s, scs_obj = f"{s.seconds:.2f}", f"{s.objective:.6g}"
                    rel = f"{(r.objective - s.objective) / abs(s.objective):+.2e}"
                except RuntimeError as e:
                    scs_s = f"failed: {e}"[:60]
            sh = solve_diagonal(W, "shift").objective if method == "trace" else float("nan")
            gap = "-" if r.rel_gap is None else f"{r.rel_gap:.1e}"
            print(
                f"| {name} | {n} | {method} | {r.seconds:.3f} | {r.objective:.6g} | "
                f"{r.lambda_min:.1e} | {r.shift:.1e} | {gap} | {scs_s} | {scs_obj} | {rel} | "
                f"{sh:.6g} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
