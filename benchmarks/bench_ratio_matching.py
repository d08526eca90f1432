"""Time and memory per training batch: ratio matching vs RMwGGIS (RMwGGIS paper Table 5).

2spirals encoded with d bits, MLP energy d -> 256 -> 256 -> 256 -> 1, batch 256, Adam.
One measured batch = loss forward + backward + grad-norm clip + optimizer step (data
generation excluded). Every (d, method) runs in a fresh subprocess so that its peak memory
is its own: on CPU the peak resident set (VmHWM from /proc/self/status; torch allocations are
invisible to tracemalloc), on CUDA ``torch.cuda.max_memory_allocated``. Memory is reported
as the peak minus the usage just before the first training step (model, optimizer and data
already allocated), i.e. the memory the objective itself needs.

The flipped neighbours are evaluated as ``--neighbours`` says (``learner.neighbours``):
``generic`` (the default) puts every flipped vector through the network as a batch (the
paper's cost model, the one Table 5 compares), ``model`` uses the MLP's first-layer linearity
(ebmlab's default for training); ``--neighbours generic,model`` measures both.
Every configuration runs ``--rounds`` times, the rounds interleaved, so that a change in the
machine's load falls on both methods. Rows go to ``outputs/bench/ratio_matching.json``, which
the reproduction report reads for the Table 5 claims (``bench:`` in conf/claims/rmwggis.yaml).

    python -m benchmarks.bench_ratio_matching [--dims 32,...,2048] [--rounds 3] [--repeats 5]

The paper reports 6.2x speed-up and 90.1% memory saving at d = 2048 (GPU).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import describe, machine_info, write_report

ROOT = Path(__file__).resolve().parents[1]
METHODS = {"rm": "RM", "rmwggis": "RMwGGIS (adv., s=10)"}


def _proc_status(key: str) -> int:
    """A memory line of /proc/self/status in bytes (0 when unavailable)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False when not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def worker(args) -> dict:
    import torch

    sys.path.insert(0, str(ROOT))
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from ebmlab.data.synthetic_2d import Synthetic2D

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    gen = torch.Generator(device=device).manual_seed(0)
    data = Synthetic2D("2spirals", args.dim)
    n_batches = args.warmup + args.repeats
    cpu_gen = torch.Generator().manual_seed(1)
    batches = [data.sample(args.batch, cpu_gen).to(device) for _ in range(n_batches)]
    torch.manual_seed(0)
    model = instantiate(OmegaConf.load(ROOT / "conf" / "model" / "mlp_energy.yaml"), dim=args.dim)
    model = model.to(device)
    node = OmegaConf.load(ROOT / "conf" / "learner" / f"{args.method}.yaml")
    learner = instantiate(
        node, variant="advanced", s=args.s, batch_size=args.batch, neighbours=args.neighbours
    )
    learner.setup(model, batches[0], gen)

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        reset_ok = _reset_peak_rss()
        base = _proc_status("VmRSS")
    times, cpu_times = [], []
    for k, x in enumerate(batches):
        if cuda:
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        learner.update(model, x, gen)
        if cuda:
            torch.cuda.synchronize()
        if k >= args.warmup:
            times.append(time.perf_counter() - t0)
            cpu_times.append(time.process_time() - c0)
    if cuda:
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = _proc_status("VmHWM")
        if not reset_ok:  # the high-water mark may predate training
            base = min(base, peak)
    mean = sum(times) / len(times)
    std = (sum((t - mean) ** 2 for t in times) / max(len(times) - 1, 1)) ** 0.5
    return {
        "dim": args.dim,
        "method": args.method,
        "neighbours": args.neighbours,
        "device": str(device),
        "batch": args.batch,
        "time_s": mean,
        "time_std_s": std,
        "cpu_time_s": sum(cpu_times) / len(cpu_times),
        "peak_bytes": peak,
        "base_bytes": base,
        "mem_bytes": peak - base,
        "threads": torch.get_num_threads(),
    }


def _run_one(args, dim: int, method: str, neighbours: str) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_ratio_matching", "--worker", "--dim", str(dim)]
    cmd += ["--method", method, "--device", args.device, "--batch", str(args.batch)]
    cmd += ["--neighbours", neighbours]
    cmd += ["--s", str(args.s), "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    cmd += ["--threads", str(args.threads)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"dim": dim, "method": method, "error": f"timeout after {args.timeout} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["killed (out of memory?)"])[-1]
        return {"dim": dim, "method": method, "error": f"rc {p.returncode}: {tail}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _mib(b: float) -> str:
    return f"{b / 2**20:.1f}"


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def table(rows: list[dict], clock: str = "cpu") -> str:
    """One markdown row per (neighbours, d): medians over the rounds of RM and RMwGGIS time
    per batch and memory, and their ratios; a configuration that failed shows its error."""
    key = "time_s" if clock == "wall" else "cpu_time_s"
    what = "time" if clock == "wall" else "CPU time"
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r.get("neighbours", "model"), r["dim"], r["method"]), []).append(r)

    def med(nb, d, m, k):
        ok = [r[k] for r in groups.get((nb, d, m), []) if k in r]
        return _median(ok) if ok else None

    def err(nb, d, m):
        return next((r["error"] for r in groups.get((nb, d, m), []) if "error" in r), "-")

    out = [
        f"| neighbours | d | rounds | RM {what}/batch (s) | RMwGGIS {what}/batch (s) | speed-up "
        "| RM memory (MiB) | RMwGGIS memory (MiB) | memory saving |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for nb, d in sorted({(nb, d) for nb, d, _ in groups}):
        n = max(len(groups.get((nb, d, m), [])) for m in METHODS)
        ta, tb = med(nb, d, "rm", key), med(nb, d, "rmwggis", key)
        ma, mb = med(nb, d, "rm", "mem_bytes"), med(nb, d, "rmwggis", "mem_bytes")
        cells = [nb, str(d), str(n)]
        cells += [
            f"{t:.4f}" if t is not None else err(nb, d, m) for t, m in ((ta, "rm"), (tb, "rmwggis"))
        ]
        cells.append(f"{ta / tb:.1f}x" if ta is not None and tb else "-")
        cells += [_mib(m) if m is not None else "-" for m in (ma, mb)]
        cells.append(f"{100 * (1 - mb / ma):.1f}%" if ma and mb is not None else "-")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dims", default="32,64,128,256,512,1024,2048")
    ap.add_argument("--methods", default="rm,rmwggis")
    ap.add_argument(
        "--neighbours", default="generic", help="generic (the paper's cost model) and/or model"
    )
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--s", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="runs of every configuration")
    ap.add_argument("--repeats", type=int, default=5, help="timed batches per run")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0: torch default)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per configuration")
    ap.add_argument("--out", default=str(ROOT / "outputs" / "bench" / "ratio_matching"))
    ap.add_argument(
        "--clock",
        default="cpu",
        choices=["wall", "cpu"],
        help="time column: process CPU time (robust on a shared machine) or wall clock",
    )
    ap.add_argument("--from-json", default="", help="only print the table of a saved json")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dim", type=int, default=32, help=argparse.SUPPRESS)
    ap.add_argument("--method", default="rm", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.device == "auto":
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        print(table(data["rows"] if isinstance(data, dict) else data, args.clock))
        return
    dims = [int(v) for v in args.dims.split(",") if v]
    methods = [m for m in args.methods.split(",") if m]
    modes = [m for m in args.neighbours.split(",") if m]
    for m in methods:
        if m not in METHODS:
            ap.error(f"--methods: unknown {m!r}; allowed: {', '.join(METHODS)}")
    for m in modes:
        if m not in ("generic", "model"):
            ap.error(f"--neighbours: unknown {m!r}; allowed: generic, model")
    info = machine_info(args.device)
    hardware = (
        f"{info['gpu'] or info['cpu_model']} ({info['cpu_count']} cores), {args.threads} thread(s)"
    )
    rows = []
    for k in range(args.rounds):  # rounds outermost: a load change hits every configuration
        for nb in modes:
            for d in dims:
                for m in methods:
                    r = _run_one(args, d, m, nb) | {
                        "round": k,
                        "neighbours": nb,
                        "hardware": hardware,
                    }
                    rows.append(r)
                    msg = r.get("error") or f"{r['time_s']:.4f} s/batch, {_mib(r['mem_bytes'])} MiB"
                    print(
                        f"round {k} {nb:7s} d={d:5d} {METHODS[m]:22s} {msg}",
                        file=sys.stderr,
                        flush=True,
                    )
    mem_kind = "peak CUDA allocation" if args.device.startswith("cuda") else "peak RSS"
    text = (
        "# Ratio matching vs RMwGGIS: time and memory per training batch (RMwGGIS Table 5)\n\n"
        f"{describe(info)}.\n\n"
        f"2spirals, batch {args.batch}, s = {args.s}, {args.rounds} interleaved rounds of "
        f"{args.repeats} timed batches after {args.warmup} warm-up, each configuration in a "
        f"fresh process; medians over rounds; memory = {mem_kind} minus usage before training. "
        "`generic`: every flipped vector through the network (the paper's cost model); "
        "`model`: the MLP's first-layer linearity (ebmlab's default).\n\n"
        + table(rows, args.clock)
        + "\n"
    )
    print(text)
    write_report(args.out, text, {"machine": info, "rows": rows})


if __name__ == "__main__":
    main()
