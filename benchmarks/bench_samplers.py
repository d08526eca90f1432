"""Cost of a sampler step relative to one forward+backward of the model (issue 15).

Models: the 25x25 periodic lattice Ising (``ebmlab.models.ising.LatticeIsing``, analytic
gradient) and the 784x500 Bernoulli RBM (``ebmlab.models.rbm.BernoulliRBM``, analytic
gradient). Samplers (``conf/sampler/*.yaml``): Gibbs-1, GWG-1, DULA, DMALA, ACS with a fixed
cyclical schedule (tune=false) and AB-1st with frozen (sigma, alpha) (adapt=false), each
through its ``init`` / ``step`` API. For each (model, chains): one forward (``log_prob``,
no grad), one forward+backward (``value_and_grad``) on the same batch and one step of each
sampler are timed INTERLEAVED (``benchmarks.harness``: rotated order, per-round ratios,
median and quartiles over rounds), by thread CPU time and by wall time. Goal for the
gradient samplers: step / (fwd+bwd) close to 1 (DMALA, GWG <= 1.3).

On CUDA (``--graphs auto``) the same steps are also timed captured as CUDA graphs (issue 46:
blocks of ``benchmarks.graphed.BLOCK`` steps replayed through the chain runner, per step),
interleaved with the eager ones, against a graphed forward+backward; on a CPU that table is
skipped with a line saying so (``--graphs stand-in`` runs its machinery on the CPU stand-in).

Results: ``<out-dir>/<name>.md`` (table) and ``<name>.json`` (every number and the machine).

    python -m benchmarks.bench_samplers [--threads 1] [--rounds 200] [--device auto]
        [--cases ising:100,rbm:100,rbm:500] [--name samplers] [--out-dir outputs/bench]
        [--graphs auto|off|stand-in]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from benchmarks.graphed import (
    BLOCK,
    GRAPH,
    backend_for,
    graphed_fwd_bwd,
    graphed_steps,
    per_step,
    skip_line,
    stand_in_note,
)
from benchmarks.harness import (
    clocks_for,
    cuda_sync,
    describe,
    fmt_iqr,
    interleave,
    machine_info,
)
from benchmarks.harness import write_report as _write
from ebmlab.models.ising import LatticeIsing
from ebmlab.samplers import proposals
from ebmlab.samplers.base import value_and_grad

ROOT = Path(__file__).resolve().parents[1]
REF = "fwd+bwd"
# sampler label -> (conf/sampler/<file>.yaml, overrides for a fixed, non-adaptive kernel)
SAMPLERS = {
    "Gibbs-1": ("gibbs", {}),
    "GWG-1": ("gwg", {"n_flips": 1}),
    "DULA": ("dula", {}),
    "DMALA": ("dmala", {}),
    "ACS": ("acs", {"tune": False, "alpha_max": 2.0, "alpha_min": 0.2}),
    "AB-1st": ("ab_1st", {"adapt": False}),
}


def make_sampler(label: str):
    name, overrides = SAMPLERS[label]
    return instantiate(OmegaConf.load(ROOT / "conf" / "sampler" / f"{name}.yaml"), **overrides)


def make_model(kind: str, device: torch.device):
    """The benchmark targets: the DLP 25x25 Ising lattice, or a 784x500 RBM whose weights
    look like a trained one's (W ~ 0.05 N(0,1), b ~ -1 + 0.5 N(0,1), c ~ 0.1 N(0,1))."""
    if kind == "ising":
        m = LatticeIsing(n_side=25, sigma=0.25, bias=0.0)
    elif kind == "rbm":
        m = instantiate(OmegaConf.load(ROOT / "conf" / "model" / "rbm.yaml"), n_visible=784)
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            m.W.copy_(0.05 * torch.randn(m.W.shape, generator=g))
            m.b.copy_(-1.0 + 0.5 * torch.randn(m.b.shape, generator=g))
            m.c.copy_(0.1 * torch.randn(m.c.shape, generator=g))
    else:
        raise ValueError(f"unknown model {kind!r} (ising | rbm)")
    m = m.to(device)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


MODEL_LABEL = {"ising": "Ising 25x25 periodic", "rbm": "RBM 784x500"}
FLOORS = ("floor DULA", "floor DMALA")


def floor_ops(model, x0: torch.Tensor, gen: torch.Generator) -> dict:
    """The least a binary Langevin step can do beyond one fwd+bwd, with ebmlab's primitives
    and no bookkeeping: the flip draw at x (uniforms, a sigmoid per coordinate) and fwd+bwd at
    y ("floor DULA"); for an MH step also the reverse logits and their softplus normaliser over
    every coordinate, and the accept test ("floor DMALA"). The forward terms come from the
    previous step in a real chain, so they are computed once here, outside the timed calls.
    A sampler's ratio minus its floor's is what its state handling costs. Each returns the
    new x, which from the same generator state is the sampler's own (tested)."""
    p, p_dula = (
        make_sampler(s).proposal(x0.shape[1], x0.device, x0.dtype) for s in ("DMALA", "DULA")
    )
    lp_x, g_x = value_and_grad(model, x0)
    a_x, a_dula = proposals.flip_logits(x0, g_x, p), proposals.flip_logits(x0, g_x, p_dula)
    norm_x = proposals.flip_norm(a_x)

    def dula():
        y, _ = proposals.draw_flips(x0, a_dula, gen)
        value_and_grad(model, y)
        return y

    def dmala():
        y, flip = proposals.draw_flips(x0, a_x, gen)
        lp_y, g_y = value_and_grad(model, y)
        a_y = proposals.flip_logits(y, g_y, p)
        rev = proposals.flip_log_q(a_y, proposals.flip_norm(a_y), flip)
        log_ratio = lp_y - lp_x + rev - proposals.flip_log_q(a_x, norm_x, flip)
        u = torch.rand(log_ratio.shape, generator=gen, device=log_ratio.device)
        return torch.where((u.log() < log_ratio)[:, None], y, x0)

    return dict(zip(FLOORS, (dula, dmala)))


def bench_case(kind, chains, device, rounds, warmup, seed, cpu_clock, backend=None) -> dict:
    """Interleaved timing of fwd, fwd+bwd and one step of every sampler for one model; with a
    capture ``backend`` also each sampler's graphed step and a graphed fwd+bwd."""
    model = make_model(kind, device)
    gen = torch.Generator(device=device).manual_seed(seed)
    x0 = (torch.rand(chains, model.dim, generator=gen, device=device) < 0.5).float()

    def fwd():
        with torch.no_grad():
            model.log_prob(x0)

    def fwd_bwd():
        value_and_grad(model, x0)

    ops = {"fwd": fwd, REF: fwd_bwd}
    boxes = {}
    for label in SAMPLERS:
        s = make_sampler(label)
        box = {"sampler": s, "state": s.init(model, x0), "info": None}
        boxes[label] = box

        def step(s=s, box=box):
            box["state"], box["info"] = s.step(model, box["state"], gen)

        ops[label] = step
    ops.update(floor_ops(model, x0, gen))
    ratios = {f"fwd / {REF}": ("fwd", REF)}
    ratios.update({f"{label} / {REF}": (label, REF) for label in (*SAMPLERS, *FLOORS)})
    if backend is not None:
        ops[REF + GRAPH] = graphed_fwd_bwd(model, x0, backend, gen)
        for label in SAMPLERS:
            ops[label + GRAPH], _ = graphed_steps(model, make_sampler(label), x0, gen, backend)
            ratios[f"{label}{GRAPH} / {REF}{GRAPH}"] = (label + GRAPH, REF + GRAPH)
            ratios[f"{label} / {label}{GRAPH}"] = (label, label + GRAPH)
    t0 = time.perf_counter()
    res = interleave(
        ops, ratios, rounds=rounds, warmup=warmup, sync=cuda_sync(device), cpu_clock=cpu_clock
    )
    seconds = time.perf_counter() - t0
    summary = per_step(res.summary())
    # evaluation counts and acceptance from a few untimed steps
    counts = {}
    for label, box in boxes.items():
        acc, n = 0.0, 20
        for _ in range(n):
            box["state"], info = box["sampler"].step(model, box["state"], gen)
            acc += float(info.accept_prob.float().mean())
        counts[label] = {"log_prob": info.n_log_prob, "grad": info.n_grad, "accept": acc / n}
    return {
        "model": kind,
        "model_label": MODEL_LABEL[kind],
        "chains": chains,
        "rounds": rounds,
        "seconds": seconds,
        "counts": counts,
        "graph_block": BLOCK if backend is not None else None,
        "graph_backend": backend.name if backend is not None else None,
        "summary": summary,
        "raw": res.raw(),
    }


def graphed_markdown(cases: list[dict], primary: str, note: str = "") -> str:
    """The eager-vs-graphed table (cases timed with a capture backend)."""
    lines = [
        f"\n## Eager vs CUDA-graphed steps ({primary} time)\n",
        f"Graphed: blocks of {BLOCK} steps captured once and replayed through the chain runner "
        "(`ebmlab.core.graphs`, the run's generator registered), timed per step, interleaved "
        "with the eager ops above. Goal (issue 46): graphed step / graphed fwd+bwd <= 1.3."
        f"{note}\n",
        "| model | chains | sampler | eager ms/step | graphed ms/step | speed-up "
        "| graphed step / graphed fwd+bwd | graphed fwd+bwd ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        ops, rat = c["summary"]["ops"], c["summary"]["ratios"]
        if REF + GRAPH not in ops:
            continue
        fb = fmt_iqr(ops[REF + GRAPH][primary], 1e3, 3)
        for label in SAMPLERS:
            g = label + GRAPH
            lines.append(
                f"| {c['model_label']} | {c['chains']} | {label} "
                f"| {fmt_iqr(ops[label][primary], 1e3, 3)} | {fmt_iqr(ops[g][primary], 1e3, 3)} "
                f"| {fmt_iqr(rat[f'{label} / {g}'][primary])} "
                f"| {fmt_iqr(rat[f'{g} / {REF}{GRAPH}'][primary])} | {fb} |"
            )
    return "\n".join(lines) + "\n"


def markdown(cases: list[dict], info: dict, args, primary: str) -> str:
    other = "wall" if primary == "cpu" else "cpu"
    lines = [
        f"# Sampler step cost relative to one forward+backward ({args.name})\n",
        f"{describe(info)}; ebmlab from {info['ebmlab_path']}"
        f"{' (modified)' if info.get('ebmlab_modified') else ''}.\n",
        f"Each of {args.rounds} rounds (after {args.warmup} warm-up rounds) times fwd, fwd+bwd "
        "and one step of every sampler once, in an order rotated every round; a ratio is "
        "taken within each round and reported as median [25th, 75th percentile] over rounds. "
        f"Primary clock: **{primary}** ({'thread CPU time' if primary == 'cpu' else 'wall'}); "
        f"the {other} ratio is shown beside it. Steps/s are 1 / median step time.\n",
        f"| model | chains | op | step / fwd+bwd ({primary}) | step / fwd+bwd ({other}) "
        f"| ms/step ({primary}) | ms/step ({other}) | steps/s ({primary}) | steps/s (wall) "
        "| log_prob/step | grad/step | accept |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        ops, rat = c["summary"]["ops"], c["summary"]["ratios"]
        for op in ops:
            if op.endswith(GRAPH):
                continue  # the eager-vs-graphed table below
            key = f"{op} / {REF}"
            r_p = fmt_iqr(rat[key][primary]) if key in rat else "1 (reference)"
            r_o = fmt_iqr(rat[key][other]) if key in rat else "1 (reference)"
            cnt = c["counts"].get(op, {})
            lp = cnt.get("log_prob", "")
            gr = cnt.get("grad", "")
            acc = f"{cnt['accept']:.2f}" if cnt else ""
            med_p, med_w = ops[op][primary]["median"], ops[op]["wall"]["median"]
            lines.append(
                f"| {c['model_label']} | {c['chains']} | {op} | {r_p} | {r_o} "
                f"| {fmt_iqr(ops[op][primary], 1e3, 3)} | {fmt_iqr(ops[op][other], 1e3, 3)} "
                f"| {1 / med_p:.0f} | {1 / med_w:.0f} | {lp} | {gr} | {acc} |"
            )
    lines.append(
        "\nfwd = `log_prob` without grad; fwd+bwd = `value_and_grad` (the analytic "
        "`log_prob_and_grad` of both models). ACS runs a fixed schedule (alpha 2.0 -> 0.2, "
        "tune=false) and AB-1st its frozen kernel (adapt=false); the other samplers use "
        "conf/sampler/*.yaml as is. The floor rows time the least a binary Langevin step does "
        "beyond fwd+bwd (`floor_ops`: the flip draw, and for MH the reverse normaliser and the "
        "accept test) with no state handling: a sampler's ratio minus its floor's is what its "
        "bookkeeping costs."
    )
    graphed = any(REF + GRAPH in c["summary"]["ops"] for c in cases)
    note = args.graphs_note if graphed else ""
    tail = graphed_markdown(cases, primary, note) if graphed else f"\n{args.graphs_note}\n"
    return "\n".join(lines) + "\n" + tail


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda[:i]")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0 = torch default)")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--cases", default="ising:100,rbm:100,rbm:500", help="model:chains,...")
    ap.add_argument(
        "--clock",
        default="auto",
        choices=["auto", "cpu", "wall"],
        help="primary clock: auto = thread CPU time on CPU at 1 thread, else wall",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--graphs",
        default="auto",
        choices=["auto", "off", "stand-in"],
        help="graphed steps beside the eager ones: auto = on CUDA; stand-in = the CPU stand-in",
    )
    ap.add_argument("--name", default="samplers")
    ap.add_argument("--out-dir", default=str(ROOT / "outputs" / "bench"))
    args = ap.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    primary, cpu_clock = clocks_for(device)
    if args.clock != "auto":
        primary = args.clock
    info = machine_info(device)
    info["cpu_clock"] = cpu_clock.__name__
    backend = backend_for(device, args.graphs)
    args.graphs_note = skip_line(device, args.graphs) if backend is None else stand_in_note(backend)
    if backend is None:
        print(args.graphs_note)
    cases = []
    for spec in args.cases.split(","):
        kind, chains = spec.split(":")
        cases.append(
            bench_case(
                kind, int(chains), device, args.rounds, args.warmup, args.seed, cpu_clock, backend
            )
        )
    info["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    md = markdown(cases, info, args, primary)
    data = {"name": args.name, "args": vars(args), "primary_clock": primary, "machine": info,
            "cases": cases}  # fmt: skip
    paths = _write(Path(args.out_dir) / args.name, md, data)
    print(md)
    print(f"written: {paths[0]}, {paths[1]}")


if __name__ == "__main__":
    main()
