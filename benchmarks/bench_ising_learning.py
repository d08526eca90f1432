"""Cost of one learning iteration on the 25x25 Ising task: PCD vs ratio matching (RMwGGIS
Table 3; issue 13: "RMwGGIS orders of magnitude cheaper per iteration than PCD").

Every learner is built from the experiments' own configs (``dlp/fig5_ising_learning`` for PCD
with each sampler and steps per iteration; ``rmwggis/table3_ising_learning`` for RMwGGIS and
RM, the latter both with the Ising closed form for the flipped neighbours and with the
generic batch of flipped vectors), so the numbers are those of the runs. One timed call is one
``learner.step`` (sampling, loss, backward, Adam, projection of J). All calls are timed
INTERLEAVED (``benchmarks.harness``) and reported as ratios to one RMwGGIS iteration. The
training set has the dataset config's size (``dataset.n_samples`` x ``dataset.dim``) but random
bits: no step's cost depends on the data's values, and generating the real samples takes
minutes.
PCD runs at the experiment's batch = buffer 256; ``--pcd-batch 100`` times it at the batch of
the paper's timing protocol (App. J: batch 100) instead.

    python -m benchmarks.bench_ising_learning [--rounds 30] [--steps 5,10] [--pcd-batch 256]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from benchmarks.harness import clocks_for, describe, fmt_iqr, interleave, machine_info
from benchmarks.harness import write_report as _write
from ebmlab.utils.config import build, compose_job

ROOT = Path(__file__).resolve().parents[1]
REF = "RMwGGIS"


def make_learner(overrides: list[str], seed: int):
    """(model, learner, generator) of ``python -m ebmlab.run <overrides> scale=paper``, set up on
    random bits of the dataset's size."""
    _, cfg = compose_job([*overrides, "scale=paper"])
    gen = torch.Generator().manual_seed(seed)
    shape = (int(cfg.dataset.n_samples), int(cfg.dataset.dim))
    x = (torch.rand(shape, generator=gen) < 0.5).float()
    model = build(cfg.model, "model")
    learner = build(cfg.learner, "learner")
    sampler = build(cfg.sampler, "sampler") if learner.needs_sampler else None
    learner.setup(model, x, gen, sampler)
    return model, learner, gen


def cases(steps: list[int], pcd_batch: int | None) -> dict[str, list[str]]:
    rm = ["experiment=rmwggis/table3_ising_learning"]
    out = {
        REF: [*rm, "learner=rmwggis"],
        "RM (closed form)": [*rm, "learner=rm"],
        "RM (generic)": [*rm, "learner=rm", "learner.neighbours=generic"],
    }
    batch = [f"learner.batch_size={pcd_batch}", f"learner.buffer_size={pcd_batch}"]
    for k in steps:
        for s, label in (("gibbs", "Gibbs-1"), ("gwg", "GWG-1"), ("dmala", "DMALA")):
            out[f"PCD {label}, {k} steps"] = [
                "experiment=dlp/fig5_ising_learning",
                f"sampler={s}",
                f"learner.sampler_steps={k}",
                *(batch if pcd_batch else []),
            ]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", default="5,10", help="PCD sampler steps per iteration")
    ap.add_argument("--pcd-batch", type=int, default=None, help="default: the experiment's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="ising_learning")
    ap.add_argument("--out-dir", default=str(ROOT / "outputs" / "bench"))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device("cpu")
    primary, cpu_clock = clocks_for(device)
    ops = {}
    for label, overrides in cases([int(k) for k in args.steps.split(",")], args.pcd_batch).items():
        model, learner, g = make_learner(overrides, args.seed)
        ops[label] = lambda m=model, lr=learner, g=g: lr.step(m, g)
    ratios = {f"{n} / {REF}": (n, REF) for n in ops if n != REF}
    t0 = time.perf_counter()
    res = interleave(ops, ratios, rounds=args.rounds, warmup=args.warmup, cpu_clock=cpu_clock)
    summary = res.summary()
    info = machine_info(device)
    info["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    other = "wall" if primary == "cpu" else "cpu"
    lines = [
        "# One learning iteration on the 25x25 Ising task, relative to one RMwGGIS iteration",
        "",
        describe(info),
        f"Rounds: {args.rounds} (interleaved, rotated); {primary} time primary; PCD batch: "
        f"{args.pcd_batch or 'as the experiment'}; {time.perf_counter() - t0:.0f} s.",
        "",
        f"| learner | ms per iteration ({primary}, median [p25, p75]) | x RMwGGIS ({primary}) "
        f"| x RMwGGIS ({other}) |",
        "|---|---|---|---|",
    ]
    for n in ops:
        per = summary["ops"][n][primary]
        ms = fmt_iqr(per, 1e3)
        if n == REF:
            lines.append(f"| {n} | {ms} | 1 | 1 |")
            continue
        r = summary["ratios"][f"{n} / {REF}"]
        lines.append(f"| {n} | {ms} | {fmt_iqr(r[primary])} | {fmt_iqr(r[other])} |")
    md = "\n".join(lines) + "\n"
    data = {"args": vars(args), "primary_clock": primary, "machine": info, "summary": summary}
    paths = _write(Path(args.out_dir) / args.name, md, data)
    print(md)
    print(f"written: {paths[0]}, {paths[1]}")


if __name__ == "__main__":
    main()
