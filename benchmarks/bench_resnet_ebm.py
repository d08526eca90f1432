"""ResNet-EBM throughput (issue 7 "Performance"): sampler steps per second on the deep EBM.

For batch 100 (PCD) and 128 chains (mixing): steps per second of GWG, DULA, DMALA and ACS
(fixed schedule), their log_prob / gradient evaluations per step, and the cost of a step
relative to ONE forward+backward of the network measured in the same run (goal: DMALA about
1x, i.e. the cached gradient makes a step cost one forward+backward). Also: one PCD iteration
(``learner=pcd_buffer``, 40 DMALA steps, batch 100) and AIS temperatures per second
(GWG transitions, 100 chains).

On CUDA (``--graphs auto``, issue 46) every sampler step is also timed captured as a CUDA
graph (blocks of ``benchmarks.graphed.BLOCK`` steps through the chain runner, per step),
interleaved with the eager steps, against a captured forward+backward; and the PCD iteration
is timed both ways (a learner built under ``compile: none`` and one under ``compile: graph``,
alternating rounds). On a CPU the graphed parts are skipped with a line saying so.

    python -m benchmarks.bench_resnet_ebm [--device auto|cpu|cuda] [--width 64] [--rounds 20]
        [--graphs auto|off|stand-in]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from benchmarks.graphed import (
    FWD_BWD_GRAPH,
    GRAPH,
    backend_for,
    graphed_fwd_bwd,
    graphed_steps,
    per_step,
    skip_line,
    stand_in_note,
)
from benchmarks.harness import clocks_for, cuda_sync, describe, fmt_iqr, interleave, machine_info
from ebmlab.core import graphs
from ebmlab.metrics.ais import linear_betas
from ebmlab.metrics.tempered_ais import tempered_ais_log_z
from ebmlab.models.resnet_ebm import TemperedEBM
from ebmlab.samplers.base import value_and_grad
from ebmlab.samplers.dlp import DMALA, DULA
from ebmlab.samplers.gwg import GWG

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--rounds", "--steps", type=int, default=20, help="interleaved rounds")
    ap.add_argument("--ais-temps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--graphs", default="auto", choices=["auto", "off", "stand-in"])
    a = ap.parse_args(argv)
    dev = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    )
    torch.manual_seed(a.seed)
    node = OmegaConf.load(ROOT / "conf" / "model" / "resnet_ebm.yaml")
    model = instantiate(node, n_channels=a.width, dim=784).to(dev)
    model.set_base_mean(torch.full((784,), 0.13, device=dev))
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    sync = cuda_sync(dev) or (lambda: None)
    primary, cpu_clock = clocks_for(dev)
    backend = backend_for(dev, a.graphs)
    graphed_rows = []
    other = "wall" if primary == "cpu" else "cpu"
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"# ResNet EBM benchmark: width {a.width} ({n_params} parameters)\n\n"
        f"{describe(machine_info(dev))}.\n\nSteps and fwd+bwd timed interleaved over "
        f"{a.rounds} rounds (benchmarks/harness.py): medians [25th, 75th percentile] over "
        f"rounds by {primary} time ({other} time in the last column).\n"
    )
    print("| chains | sampler | steps/s | log_prob/step | grad/step | accept | "
          f"step / (fwd+bwd) | fwd+bwd ms | step / (fwd+bwd) ({other}) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    samplers = {
        "GWG-1": lambda: GWG(n_flips=1),
        "DULA a=0.1": lambda: DULA(step_size=0.1, precond=None),
        "DMALA a=0.15": lambda: DMALA(step_size=0.15, precond=None),
        "ACS (fixed schedule)": lambda: instantiate(
            OmegaConf.load(ROOT / "conf" / "sampler" / "acs.yaml"),
            tune=False,
            alpha_max=2.0,
            alpha_min=0.15,
        ),
    }
    for n in (100, 128):
        x0 = model.sample_base(n, gen)
        ops = {"fwd+bwd": lambda x0=x0: value_and_grad(model, x0)}
        boxes = {}
        for name, make in samplers.items():
            s = make()
            box = boxes[name] = {"s": s, "state": s.init(model, x0), "acc": [], "info": None}

            def one(s=s, box=box):
                box["state"], box["info"] = s.step(model, box["state"], gen)
                box["acc"].append(box["info"].accept_prob.float().mean())

            ops[name] = one
        ratios = {name: (name, "fwd+bwd") for name in samplers}
        if backend is not None:
            ops[FWD_BWD_GRAPH] = graphed_fwd_bwd(model, x0, backend, gen)
            for name, make in samplers.items():
                ops[name + GRAPH], _ = graphed_steps(model, make(), x0, gen, backend)
                ratios[f"{name}{GRAPH} / {FWD_BWD_GRAPH}"] = (name + GRAPH, FWD_BWD_GRAPH)
                ratios[f"{name} / {name}{GRAPH}"] = (name, name + GRAPH)
        res = interleave(
            ops,
            ratios,
            rounds=a.rounds,
            warmup=2,
            reps=1,
            sync=cuda_sync(dev),
            cpu_clock=cpu_clock,
        ).summary()
        res = per_step(res)
        fb = res["ops"]["fwd+bwd"][primary]["median"]
        for name in samplers:
            info, acc = boxes[name]["info"], float(torch.stack(boxes[name]["acc"]).mean())
            t = res["ops"][name][primary]["median"]
            r = res["ratios"][name]
            print(
                f"| {n} | {name} | {1 / t:.2f} | {info.n_log_prob} | {info.n_grad} | "
                f"{acc:.2f} | {fmt_iqr(r[primary])} | {fb * 1e3:.1f} | {fmt_iqr(r[other])} |"
            )
            if backend is not None:
                g, ops_s, rat = name + GRAPH, res["ops"], res["ratios"]
                graphed_rows.append(
                    f"| {n} | {name} | {fmt_iqr(ops_s[name][primary], 1e3, 3)} "
                    f"| {fmt_iqr(ops_s[g][primary], 1e3, 3)} "
                    f"| {fmt_iqr(rat[f'{name} / {g}'][primary])} "
                    f"| {fmt_iqr(rat[f'{g} / {FWD_BWD_GRAPH}'][primary])} "
                    f"| {fmt_iqr(ops_s[FWD_BWD_GRAPH][primary], 1e3, 3)} |"
                )
    if backend is None:
        print(f"\n{skip_line(dev, a.graphs)}")
    else:
        print(
            f"\nEager vs CUDA-graphed steps ({primary} time, per step, interleaved; graphed = "
            f"blocks replayed through the chain runner).{stand_in_note(backend)}\n\n"
            "| chains | sampler | eager ms/step | graphed ms/step | speed-up "
            "| graphed step / graphed fwd+bwd | graphed fwd+bwd ms |\n|---|---|---|---|---|---|---|"
        )
        print("\n".join(graphed_rows))
    # one PCD iteration (40 DMALA steps, batch 100, replay buffer 10,000)
    data = model.sample_base(100, gen)
    modes = ("none", "graph") if dev.type == "cuda" and a.graphs == "auto" else ("none",)
    learners = {m: pcd_learner(model, data, gen, m) for m in modes}
    times = {m: [] for m in modes}
    for r in range(max(2, a.rounds // 5)):
        for m in modes if r % 2 == 0 else modes[::-1]:  # alternating order
            sync()
            t = time.perf_counter()
            learners[m].update(model, data, gen)
            sync()
            times[m].append(time.perf_counter() - t)
    it = sorted(times["none"])[len(times["none"]) // 2]
    t = time.perf_counter()
    betas = linear_betas(a.ais_temps + 1)
    tempered_ais_log_z(TemperedEBM(model), GWG(n_flips=1), betas, 100, gen, False)
    sync()
    ais = (time.perf_counter() - t) / a.ais_temps
    if "graph" in times:
        git = sorted(times["graph"])[len(times["graph"]) // 2]
        pcd_graph = (
            f"; graphed (compile: graph) {git:.3f} s ({it / git:.1f}x; 50,000 iterations: "
            f"{git * 50000 / 3600:.1f} h)"
        )
    else:
        pcd_graph = "; graphed: skipped (CUDA graphs need a GPU and --graphs auto)"
    print(
        f"\nPCD iteration (40 DMALA steps, batch 100), medians of {len(times['none'])} "
        f"alternating rounds: eager {it:.3f} s (50,000 iterations: {it * 50000 / 3600:.1f} h)"
        f"{pcd_graph}\n"
        f"AIS (GWG, 100 chains): {1 / ais:.1f} temperatures/s "
        f"(300,000 temperatures x 500 chains: about {ais * 5 * 300000 / 3600:.1f} h if linear)"
    )


def pcd_learner(model, data, gen, mode: str):
    """``learner=pcd_buffer`` (40 DMALA steps) set up and run 3 iterations under
    ``compile: <mode>``: its chain runners are made then, so it keeps that mode (graphed:
    warmed up, captured, replayed)."""
    with graphs.compile_mode(mode):
        learner = instantiate(OmegaConf.load(ROOT / "conf" / "learner" / "pcd_buffer.yaml"))
        learner.setup(model, data, gen, DMALA(step_size=0.15, precond=None))
        for _ in range(3):
            learner.update(model, data, gen)
    return learner


if __name__ == "__main__":
    main()
