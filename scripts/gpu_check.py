"""`make gpu-check`: everything a GPU changes, checked in one command (< 9 minutes on one H100).

    python scripts/gpu_check.py            # on a machine with one GPU
    python scripts/gpu_check.py --cpu      # the same phases on the CPU (a dry run: no CUDA)

Phases, each with its own time budget, each in try/except so one failure never hides the
others (its outcome goes into the report):
  (a) suite     the fast test suite with CUDA present (``device=auto`` runs every task there)
  (b) resume    per task family, a smoke run SIGKILLed mid-run and resumed, against an
                uninterrupted run: results under docs/gpu.md's rule (ebmlab.utils.same_results)
                and the final checkpoint's tensors (chains, buffers, parameters) exactly equal
  (c) portable  a run killed on the GPU resumed on the CPU, and the other way round
  (d) bench     bench_samplers at 100, 500 and 10,000 chains and bench_resnet_ebm, eager and
                CUDA-graphed steps side by side (issue 46), the PCD iteration both ways
  (e) graphs    eager vs CUDA-graphed (issue 46): DMALA, GWG-1, ACS and AB-1st chains on the
                RBM 784x500 and the 25x25 Ising through the chain runner, and a whole smoke
                run with ``compile=none`` and ``compile=graph``: identical numbers required
                (--cpu: the CPU stand-in capture, which checks the machinery only)

Writes ``docs/gpu/<date>-<gpu>.md`` (``--cpu``: ``outputs/gpu_check/<date>-cpu.md``) naming
the commit, GPU, driver and torch; logs and run directories go under ``$OUT/gpu_check`` when
``$OUT`` is set (and the report is copied there), else under ``outputs/gpu_check/``.
Exit code: 0 when every phase passed, 1 when one failed, 2 when it cannot start (no CUDA, or
missing packages: it names ``make install-offline WHEELS=<dir>``).
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import datetime as dt
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
FIX = REPO / "tests" / "fixtures"

# seconds per phase on the GPU (sum + start-up under 8 minutes); --cpu uses the same
BUDGET = {"suite": 230.0, "resume": 110.0, "portable": 45.0, "bench": 100.0, "graphs": 40.0}

# one tiny smoke configuration per task family (the resume tests' own sizes), and the step
# after which it is killed: between two checkpoints
FAMILIES: dict[str, tuple[list[str], int]] = {
    "ising_sampling": (
        ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "model.n_side=3", "sampler=gwg",
         "run.n_steps=120", "run.checkpoint_every=40"], 50),
    "ising_learning": (
        ["experiment=dlp/fig5_ising_learning", "scale=smoke", "dataset.n_side=4",
         "dataset.n_samples=64", "dataset.gibbs_steps=2000", "learner.buffer_size=32",
         "learner.batch_size=32", "learner.sampler_steps=3", "run.n_steps=60",
         "run.eval_every=5", "run.checkpoint_every=20", "sampler=dmala"], 47),
    "sampler_ess": (
        ["experiment=ab/tables1to5_ess", "scale=smoke", "model.n_side=4", "sampler=dmala",
         "task.tune_accept=0.574", "run.checkpoint_every=100", "task.n_chains=4",
         "run.n_steps=300", "task.burn_in=100", "run.eval_every=50"], 150),
    "rbm_sampling": (
        ["experiment=dlp/fig4_rbm_sampling", "scale=smoke", f"dataset.data_dir={FIX}/images",
         "model.n_hidden=8", "task.gt_steps=20", "task.gt_n_ref=20", "task.gt_n_floor=10",
         "sampler=dmala", "task.n_chains=8", "task.n_show=0", "run.n_steps=80",
         "run.checkpoint_every=40"], 50),
    "rbm_learning": (
        ["experiment=acs/table1_rbm_learning", "scale=smoke", "dataset=static_mnist",
         f"dataset.data_dir={FIX}/images", "model.n_hidden=8", "run.n_steps=20", "task.n_show=4",
         "learner.buffer_size=10", "learner.batch_size=10", "task.ais_temps=200",
         "run.eval_every=5", "run.checkpoint_every=10"], 13),
    "ebm_learning": (
        ["experiment=dlp/table1_ebm_learning", "scale=smoke", f"dataset.data_dir={FIX}/images",
         "model.n_channels=4", "model.n_blocks=0", "learner.buffer_size=16",
         "learner.batch_size=4", "learner.sampler_steps=1", "learner.warmup_iters=4",
         "run.n_steps=12", "run.eval_every=2", "run.checkpoint_every=4", "task.valid_every=6",
         "task.valid_ais_temps=8", "task.valid_ais_chains=4", "task.ais_temps=12",
         "task.ais_chains=6", "task.n_show=4"], 10),
    "multimodal_2d": (
        ["experiment=acs/fig1_toy", "scale=smoke", "sampler=acs", "task.n_chains=8",
         "run.n_steps=60", "run.eval_every=20", "run.checkpoint_every=20"], 30),
    "density_modeling": (
        ["experiment=rmwggis/table1_synthetic", "scale=smoke", "dataset.dim=16",
         "model.hidden_dim=32", "run.n_steps=20", "learner.batch_size=32", "run.eval_every=5",
         "task.mmd_every=10", "task.heatmap_every=10", "run.checkpoint_every=10",
         "task.mmd_samples=200", "task.gibbs_sweeps=2", "task.rm_samples=100",
         "task.heatmap_resolution=20"], 15),
    "graph_generation": (
        ["experiment=rmwggis/table2_graphs_gwg", "scale=smoke", "run.eval_every=1",
         "run.checkpoint_every=2", "task.n_samples=4", "task.gen_sweeps=1", "task.n_show=2",
         "learner.batch_size=4", "model.num_layers=2", "model.hidden_dim=8",
         "learner.buffer_size=4", "learner.sampler_steps=3", "task.buffer_reinit=0.5",
         f"dataset.data_dir={FIX}/graphs/citeseer", "dataset.n_test=1", "run.n_steps=4"], 3),
    "grbm_gmm": (
        ["experiment=grbm/fig1_gmm", "scale=smoke", "run.n_steps=2",
         "learner.batch_size=250", "learner.cd_steps=5", "run.eval_every=1",
         "run.checkpoint_every=1", "task.n_samples=200", "task.grid_points=41",
         "model.n_hidden=16"], 1),
}  # fmt: skip
PORTABLE = ("ising_sampling", "ising_learning")  # chains + flip cache; parameters + optimiser

NEEDED = {"hydra": "hydra-core", "omegaconf": "omegaconf", "torch": "torch"}
OPTIONAL = {  # missing: the tests that need them fail or skip, said in the report
    "pytest": "pytest",
    "xdist": "pytest-xdist",
    "pytest_timeout": "pytest-timeout",
    "submitit": "submitit",
    "wandb": "wandb",
}
INSTALL_HINT = (
    "install them from a wheelhouse: where PyPI is reachable `make wheelhouse WHEELS=<dir> "
    "TORCH=none PYVER=<this python>`, copy <dir> here, then `make install-offline WHEELS=<dir>` "
    "(keeps this machine's CUDA torch; docs/cluster.md)"
)


def missing(modules: dict) -> list[str]:
    return [pkg for mod, pkg in modules.items() if importlib.util.find_spec(mod) is None]


class Clock:
    """A phase's deadline: ``left()`` seconds remain of its budget."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self, at_least: float = 5.0) -> float:
        return max(self.end - time.monotonic(), at_least)


def run(cmd: list[str], log: Path, timeout: float, env: dict | None = None):
    """Run ``cmd`` in the repository, output to ``log``; returns (returncode, seconds)."""
    e = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})}
    t0 = time.monotonic()
    with open(log, "w") as f:
        try:
            p = subprocess.run(cmd, cwd=REPO, env=e, stdout=f, stderr=subprocess.STDOUT,
                               timeout=timeout)  # fmt: skip
            code = p.returncode
        except subprocess.TimeoutExpired:
            f.write(f"\n[gpu_check: killed after its {timeout:.0f} s budget]\n")
            code = "timeout"
    return code, time.monotonic() - t0


def ebmlab_run(args, run_dir: Path, log: Path, timeout: float, device: str, env=None):
    cmd = [sys.executable, "-m", "ebmlab.run", *args, f"device={device}", "logger=none",
           "progress=false", f"hydra.run.dir={run_dir}"]  # fmt: skip
    cache = {"EBMLAB_CACHE": str(run_dir.parent.parent / "cache"), "OMP_NUM_THREADS": "1"}
    return run(cmd, log, timeout, {**cache, **(env or {})})


def results(run_dir: Path) -> dict | None:
    from ebmlab.utils.jsonio import field, read_json

    f = run_dir / "results.json"
    return field(read_json(f, "the run's results"), "metrics", f) if f.exists() else None


def checkpoint_task(run_dir: Path) -> dict:
    import torch

    return torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)[
        "task"
    ]


# ---- phases ----------------------------------------------------------------------------------


def phase_suite(work: Path, clock: Clock, cpu: bool, suite_args: list[str]) -> tuple[bool, str]:
    if missing({"pytest": "pytest"}):
        return False, "pytest is not installed: " + INSTALL_HINT
    log = work / "pytest.log"
    workers = [] if missing({"xdist": "x"}) else ["-n", str(max((os.cpu_count() or 2) - 2, 1))]
    tmo = [] if missing({"pytest_timeout": "x"}) else ["--timeout", "150"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, *tmo]
    code, secs = run(cmd + suite_args, log, clock.left())
    lines = log.read_text().splitlines()
    summary = next((ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "")
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    text = f"`{' '.join(cmd[1:] + suite_args)}`: {summary or f'exit {code}'} ({secs:.0f} s)"
    if failed:
        text += "\n\n" + "\n".join(f"    {ln[:160]}" for ln in failed[:40])
    return code == 0, text


def one_family(name: str, work: Path, clock: Clock, device: str) -> tuple[bool, str]:
    from ebmlab.utils.same_results import differences

    args, kill_at = FAMILIES[name]
    base = work / "resume" / name
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    clean, killed = base / "clean", base / "killed"
    code, _ = ebmlab_run(args, clean, base / "clean.log", clock.left(), device)
    if code != 0:
        return False, f"uninterrupted run failed (exit {code}; {base / 'clean.log'})"
    env = {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    code, _ = ebmlab_run(args, killed, base / "killed.log", clock.left(), device, env)
    if code != -9:
        return False, f"the run was not SIGKILLed after step {kill_at} (exit {code})"
    code, secs = ebmlab_run(args, killed, base / "resumed.log", clock.left(), device)
    if code != 0:
        return False, f"the resumed run failed (exit {code}; {base / 'resumed.log'})"
    diff = differences(results(killed), results(clean), device)
    diff += differences(checkpoint_task(killed), checkpoint_task(clean), device, "checkpoint.")
    if diff:
        return False, "differs from the uninterrupted run: " + "; ".join(diff[:5])
    return True, f"killed after step {kill_at}, resumed: same results and checkpoint"


def phase_resume(work: Path, clock: Clock, device: str, names: list[str]):
    rows = {}
    with futures.ThreadPoolExecutor(max_workers=4) as pool:
        jobs = {pool.submit(one_family, n, work, clock, device): n for n in names}
        for job in futures.as_completed(jobs):
            try:
                rows[jobs[job]] = job.result()
            except Exception as e:  # noqa: BLE001 - a phase never stops the check
                rows[jobs[job]] = (False, f"{type(e).__name__}: {e}")
    ok = all(r[0] for r in rows.values())
    table = "| family | outcome | detail |\n|---|---|---|\n" + "\n".join(
        f"| {n} | {'pass' if rows[n][0] else 'FAIL'} | {rows[n][1]} |" for n in names
    )
    return ok, table


def one_crossing(name: str, work: Path, clock: Clock, first: str, then: str):
    args, kill_at = FAMILIES[name]
    base = work / "portable" / f"{name}-{first}-to-{then}"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    run_dir, env = base / "run", {"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}
    code, _ = ebmlab_run(args, run_dir, base / "first.log", clock.left(), first, env)
    if code != -9:
        return False, f"the {first} run was not SIGKILLed (exit {code})"
    code, _ = ebmlab_run(args, run_dir, base / "then.log", clock.left(), then)
    if code != 0:
        return False, f"resuming on {then} failed (exit {code}; {base / 'then.log'})"
    said = "resuming on" in (base / "then.log").read_text()
    if first != then and not said:
        return False, "resumed without saying that the random stream changed"
    r = results(run_dir) or {}
    return True, f"resumed on {then} from step {kill_at}; {len(r)} results" + (
        " (said that the draws differ from here on)" if said else ""
    )


def phase_portable(work: Path, clock: Clock, cpu: bool):
    gpu = "cpu" if cpu else "cuda"
    both = ((gpu, "cpu"), ("cpu", gpu))  # --cpu: one cpu -> cpu resume per family
    pairs = list(dict.fromkeys((n, first, then) for n in PORTABLE for first, then in both))
    rows = {}
    with futures.ThreadPoolExecutor(max_workers=4) as pool:
        jobs = {pool.submit(one_crossing, n, work, clock, f, t): (n, f, t) for n, f, t in pairs}
        for job in futures.as_completed(jobs):
            try:
                rows[jobs[job]] = job.result()
            except Exception as e:  # noqa: BLE001 - a phase never stops the check
                rows[jobs[job]] = (False, f"{type(e).__name__}: {e}")
    table = "| resume | outcome | detail |\n|---|---|---|\n" + "\n".join(
        f"| {n} {f} -> {t} | {'pass' if rows[(n, f, t)][0] else 'FAIL'} | {rows[(n, f, t)][1]} |"
        for n, f, t in pairs
    )
    return all(r[0] for r in rows.values()), table


def phase_bench(work: Path, clock: Clock, cpu: bool):
    dev = "cpu" if cpu else "cuda"
    cases = "rbm:100" if cpu else "ising:100,rbm:100,rbm:500,rbm:10000,ising:10000"
    rounds = "2" if cpu else "20"
    out = work / "bench"
    out.mkdir(parents=True, exist_ok=True)
    sampler_cmd = [sys.executable, "-m", "benchmarks.bench_samplers", "--device", dev,
                   "--threads", "0", "--rounds", rounds, "--warmup", "1", "--cases", cases,
                   "--name", "gpu_check_samplers", "--out-dir", str(out)]  # fmt: skip
    small = ["--rounds", "2", "--ais-temps", "10", "--width", "8"]  # the CPU: machinery only
    sizes = small if cpu else ["--rounds", "10", "--ais-temps", "100"]
    resnet_cmd = [sys.executable, "-m", "benchmarks.bench_resnet_ebm", "--device", dev, *sizes]
    parts, ok = [], True
    for label, cmd in (("bench_samplers", sampler_cmd), ("bench_resnet_ebm", resnet_cmd)):
        log = out / f"{label}.log"
        code, secs = run(cmd, log, clock.left())
        ok &= code == 0
        tail = "\n".join(log.read_text().splitlines()[-60:])
        parts.append(f"`{' '.join(cmd[1:])}`: exit {code} ({secs:.0f} s)\n\n```\n{tail}\n```")
    return ok, "\n\n".join(parts)


GRAPH_RUN = "ising_learning"  # a whole run compared with compile=none/graph: PCD through the runner


def _identity_cases(cpu: bool) -> dict:
    import torch

    from benchmarks.bench_samplers import make_model, make_sampler

    dev = torch.device("cpu" if cpu else "cuda")
    kinds, chains = (("ising",), 8) if cpu else (("rbm", "ising"), 100)

    def case(label, kind):
        def make():
            model = make_model(kind, dev)
            gen = torch.Generator(device=dev).manual_seed(0)
            x0 = (torch.rand(chains, model.dim, generator=gen, device=dev) < 0.5).float()
            return model, make_sampler(label), x0, gen

        return make

    labels = ("DMALA", "GWG-1", "ACS", "AB-1st")
    return {f"{label}, {kind} x{chains}": case(label, kind) for kind in kinds for label in labels}


def phase_graphs(work: Path, clock: Clock, cpu: bool):
    """Eager vs graphed: the same chains step by step, and the same results of a whole run."""
    import torch

    from benchmarks.graphed import identity_check, identity_markdown
    from ebmlab.core import graphs
    from ebmlab.utils.same_results import differences

    if cpu:
        factory, label = graphs.StandInBackend, "CPU stand-in capture"
    else:
        factory, label = (lambda: graphs.CudaGraphBackend(torch.device("cuda"))), "CUDA graphs"
    rows = identity_check(_identity_cases(cpu), factory, blocks=4, block=20)
    ok = all(r["same"] for r in rows)
    parts = [identity_markdown(rows, label)]
    device = "cpu" if cpu else "cuda"
    args, _ = FAMILIES[GRAPH_RUN]
    base = work / "graphs"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    res = {}
    for mode in ("none", "graph"):
        run_dir = base / mode
        code, secs = ebmlab_run([*args, f"compile={mode}"], run_dir, base / f"{mode}.log",
                                clock.left(), device)  # fmt: skip
        if code != 0:
            ok = False
            parts.append(f"`compile={mode}` run of {GRAPH_RUN} failed (exit {code}; "
                         f"{base / f'{mode}.log'})")  # fmt: skip
        res[mode] = results(run_dir)
    if res["none"] is not None and res["graph"] is not None:
        diff = differences(res["graph"], res["none"], "cpu")  # exact: timings left out
        ok &= not diff
        parts.append(
            f"Whole run ({GRAPH_RUN} smoke, device {device}): compile=graph vs compile=none: "
            + ("identical results" if not diff else "DIFFERS: " + "; ".join(diff[:5]))
        )
    return ok, "\n".join(parts)


# ---- the report --------------------------------------------------------------------------------


def _cmd(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def machine(cpu: bool) -> dict:
    import torch

    commit = _cmd(["git", "rev-parse", "HEAD"]).strip() or "unknown (no git)"
    dirty = _cmd(["git", "status", "--porcelain", "--untracked-files=no"]).strip()
    info = {
        "commit": commit + (" (with uncommitted changes)" if dirty else ""),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    if cpu:
        info["gpu"] = "none (--cpu dry run)"
    else:
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cuda"] = str(torch.version.cuda)
        q = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        info["driver"] = _cmd(q).strip().splitlines()[0] if _cmd(q).strip() else "unknown"
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", "--dry-run", action="store_true", help="every phase on the CPU")
    ap.add_argument("--phases", default="suite,resume,portable,bench,graphs")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--suite-args", default="", help="pytest arguments (default: the fast suite)")
    ap.add_argument(
        "--report-dir", default=None, help="default docs/gpu (--cpu: outputs/gpu_check)"
    )
    ap.add_argument("--budget-scale", type=float, default=None, help="x budgets (--cpu: 6)")
    a = ap.parse_args(argv)

    gone = missing(NEEDED)
    if gone:
        print(f"gpu-check: missing packages: {', '.join(gone)}; {INSTALL_HINT}", file=sys.stderr)
        return 2
    import torch

    if not a.cpu and not torch.cuda.is_available():
        print("gpu-check: CUDA is not available here (torch "
              f"{torch.__version__}); use --cpu for a dry run", file=sys.stderr)  # fmt: skip
        return 2
    chosen = [p for p in a.phases.split(",") if p]
    if not chosen or any(p not in BUDGET for p in chosen):
        print(
            f"gpu-check: --phases takes some of {list(BUDGET)} (got {a.phases!r})", file=sys.stderr
        )
        return 2
    families = [f for f in a.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        print(f"gpu-check: unknown families {unknown}; known: {list(FAMILIES)}", file=sys.stderr)
        return 2
    out_env = os.environ.get("OUT")
    work = Path(out_env) / "gpu_check" if out_env else REPO / "outputs" / "gpu_check"
    work.mkdir(parents=True, exist_ok=True)
    info = machine(a.cpu)
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    slug = "cpu" if a.cpu else re.sub(r"[^a-z0-9]+", "-", info["gpu"].lower()).strip("-")
    report_dir = Path(a.report_dir or (REPO / ("outputs/gpu_check" if a.cpu else "docs/gpu")))
    device = "cpu" if a.cpu else "cuda"
    suite_args = a.suite_args.split() if a.suite_args else []
    missing_optional = missing(OPTIONAL)

    phases = {
        "suite": ("(a) fast suite with CUDA as the default device",
                  lambda c: phase_suite(work, c, a.cpu, suite_args)),
        "resume": ("(b) SIGKILL mid-run and resume, per task family",
                   lambda c: phase_resume(work, c, device, families)),
        "portable": ("(c) GPU-to-CPU and CPU-to-GPU resume",
                     lambda c: phase_portable(work, c, a.cpu)),
        "bench": ("(d) GPU benchmarks", lambda c: phase_bench(work, c, a.cpu)),
        "graphs": ("(e) eager vs CUDA-graphed, identical numbers",
                   lambda c: phase_graphs(work, c, a.cpu)),
    }  # fmt: skip
    sections, verdicts, t_start = [], {}, time.monotonic()
    for key in chosen:
        title, fn = phases[key]
        t0 = time.monotonic()
        budget = BUDGET[key] * (a.budget_scale or (6.0 if a.cpu else 1.0))  # CPUs are slower
        print(f"gpu-check: {title} (budget {budget:.0f} s)", file=sys.stderr, flush=True)
        try:
            ok, text = fn(Clock(budget))
        except Exception as e:  # noqa: BLE001 - each phase reports its own failure
            ok, text = False, f"the phase itself failed: {type(e).__name__}: {e}"
        verdicts[key] = ok
        took = time.monotonic() - t0
        sections.append(f"## {title}: {'pass' if ok else 'FAIL'} ({took:.0f} s)\n\n{text}\n")

    total = time.monotonic() - t_start
    head = [
        f"# GPU check {date}: {info['gpu']}",
        "",
        'Written by `make gpu-check` (scripts/gpu_check.py). "Same results" is docs/gpu.md\'s '
        "rule: bit-identical on a CPU; on CUDA identical chains, draws and parameters, and every "
        "reported number within ebmlab.utils.same_results.CUDA_REL_TOL.",
        "",
        *[f"- {k}: {v}" for k, v in info.items()],
        f"- total: {total:.0f} s; phases: "
        + ", ".join(f"{k} {'pass' if v else 'FAIL'}" for k, v in verdicts.items()),
        f"- packages not installed: {', '.join(missing_optional) or 'none'}"
        + (f" ({INSTALL_HINT})" if missing_optional else ""),
        f"- logs and run directories: {work}",
        "",
    ]
    report = "\n".join(head) + "\n" + "\n".join(sections)
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / f"{date}-{slug}.md"
    path.write_text(report)
    if out_env:
        shutil.copy(path, Path(out_env) / path.name)
    print(f"gpu-check: report {path} ({total:.0f} s)", file=sys.stderr)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
