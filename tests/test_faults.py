"""Fault injection through the real entry point (issue: no wrong result ever exits 0).

Each case asserts the exit code, one readable message and no traceback, and either results
identical to an uninterrupted run or no results at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import REPO, assert_same_results, run_cli

SAMPLING = [
    "experiment=dlp/fig3_ising_sampling",
    "scale=smoke",
    "model.n_side=3",
    "run.n_steps=120",
    "run.checkpoint_every=40",
    "sampler=gwg",
]


def _clean_error(p, code: int, *fragments: str) -> None:
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    for f in fragments:
        assert f in p.stderr, (f, p.stderr)


def _metrics(run_dir):
    return json.loads((run_dir / "results.json").read_text())["metrics"]


def _same_numbers(a: dict, b: dict) -> None:
    assert_same_results(a, b)  # bit-identical on a CPU, docs/gpu.md's tolerance on CUDA


def test_finished_run_is_reused_only_for_the_same_config(tmp_path):
    d = tmp_path / "run"
    run_cli(SAMPLING, d)
    again = run_cli(SAMPLING, d)
    assert "already complete" in again.stdout
    p = run_cli([*SAMPLING, "run.n_steps=80"], d, check=False)
    _clean_error(p, 2, "holds a run of another configuration", "run.n_steps", "fresh=true")
    fresh = run_cli([*SAMPLING, "run.n_steps=80", "fresh=true"], d)
    assert fresh.returncode == 0 and "already complete" not in fresh.stdout


def test_long_override_names_stay_short_and_flat(tmp_path):
    sweep = tmp_path / "sweep"
    long_list = "[" + ",".join(["0.1"] * 100) + "]"
    run_cli([*SAMPLING, "run.n_steps=20", f"+extra_note={long_list}"], sweep, multirun=True)
    (job,) = [p for p in sweep.iterdir() if p.is_dir()]
    assert len(job.name) <= 200 and (job / "results.json").exists()


@pytest.mark.parametrize("kill_at", [40, 120])  # mid-run, and after the final checkpoint
def test_kill_at_any_point_resumes_to_identical_results(tmp_path, kill_at):
    ref = run_cli(SAMPLING, tmp_path / "ref").results
    d = tmp_path / "killed"
    first = run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}, check=False)
    assert first.returncode != 0 and not (d / "results.json").exists()
    _same_numbers(run_cli(SAMPLING, d).results, ref)


def test_corrupt_checkpoint_falls_back_to_the_previous_one(tmp_path):
    d = tmp_path / "run"
    ref = run_cli(SAMPLING, tmp_path / "ref").results
    run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": "100"}, check=False)
    last = d / "checkpoints" / "last.pt"
    b = bytearray(last.read_bytes())
    b[len(b) // 2] ^= 0xFF  # same size, changed bytes
    last.write_bytes(bytes(b))
    p = run_cli(SAMPLING, d)
    assert "last.pt is not usable" in p.stderr and "resuming from" in p.stderr
    _same_numbers(p.results, ref)


def test_no_usable_checkpoint_is_a_clear_error(tmp_path):
    d = tmp_path / "run"
    run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": "60"}, check=False)
    for f in (d / "checkpoints").glob("*.pt"):
        if not f.is_symlink():
            f.write_bytes(f.read_bytes()[:100])  # truncated
    p = run_cli(SAMPLING, d, check=False)
    _clean_error(p, 3, "last.pt", "fresh=true")
    assert not (d / "results.json").exists()


def test_divergence_names_the_checkpoint_that_exists(tmp_path):
    p = run_cli(
        [
            "experiment=dlp/fig5_ising_learning",
            "scale=smoke",
            "dataset.n_side=4",
            "dataset.n_samples=64",
            "dataset.gibbs_steps=200",
            "learner.lr=1e38",
            "run.n_steps=30",
            "run.checkpoint_every=10",
            "run.eval_every=5",
        ],
        tmp_path / "run",
        check=False,
    )
    _clean_error(p, 1, "diverged")
    assert not (tmp_path / "run" / "results.json").exists()
    assert "no checkpoint had been written" in p.stderr or "last good checkpoint is" in p.stderr
    if "last good checkpoint is" in p.stderr:
        assert (tmp_path / "run" / "checkpoints" / "last.pt").exists()


def test_second_writer_exits_at_once(tmp_path):
    d = tmp_path / "run"
    args = [*SAMPLING, "run.n_steps=200000", "run.checkpoint_every=100000"]
    env = dict(os.environ, OMP_NUM_THREADS="1", EBMLAB_CACHE=str(tmp_path / "cache"))
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ebmlab.run",
            *args,
            "logger=none",
            "progress=false",
            f"hydra.run.dir={d}",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if (d / ".lock").exists():
                break
            time.sleep(0.1)
        p = run_cli(args, d, check=False, timeout=120)
        _clean_error(p, 3, "is in use by process", str(first.pid))
    finally:
        first.kill()
        first.wait()


def test_sweep_survives_a_bad_job_and_exits_nonzero(tmp_path):
    sweep = tmp_path / "sweep"
    p = run_cli(
        [*SAMPLING, "run.n_steps=20", "sampler.n_flips=1,0"], sweep, multirun=True, check=False
    )
    assert p.returncode == 2, p.stderr
    assert "1 of 2 jobs succeeded" in p.stderr and "FAILED (exit 2)" in p.stderr
    status = {
        d.name: json.loads((d / "status.json").read_text())
        for d in sweep.iterdir()
        if (d / "status.json").exists()
    }
    assert sorted(s["exit_code"] for s in status.values()) == [0, 2]
    assert all(s["choices"]["sampler"] == "gwg" for s in status.values())  # for the reports
    assert len(list(sweep.glob("*/results.json"))) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["sampler=null"], "cannot be removed on the command line"),
        (
            [
                "experiment=rmwggis/table1_synthetic",
                "scale=smoke",
                "sampler=gwg",
                "learner=pcd",
                "model=multimodal_2d",
            ],
            "ordinal",
        ),
        (["experiment=dlp/fig3_ising_sampling", "scale=smoke", "sampler=grbm_gibbs"], "binary"),
        (
            ["experiment=dlp/fig3_ising_sampling", "scale=smoke", "task.n_chains=1000000000000"],
            "free",
        ),
    ],
)
def test_bad_input_is_one_clear_message(tmp_path, args, fragment):
    p = run_cli(args, tmp_path / "run", check=False)
    _clean_error(p, 2, fragment)
    assert not (tmp_path / "run" / "results.json").exists()


def test_corrupt_dataset_file_names_the_file(tmp_path, shared_data):
    data = tmp_path / "data" / "caltech101_silhouettes"
    data.mkdir(parents=True)
    src = shared_data / "caltech101_silhouettes" / "caltech101_silhouettes_28_split1.mat"
    (data / src.name).write_bytes(src.read_bytes()[:200_000])
    p = run_cli(
        ["experiment=acs/table1_rbm_learning", "scale=smoke", "dataset=caltech", "sampler=dmala"],
        tmp_path / "run",
        env={"EBMLAB_DATA_DIR": str(tmp_path / "data")},
        check=False,
    )
    _clean_error(p, 2, src.name, "corrupt or truncated")


def test_read_only_output_directory_is_exit_3(tmp_path):
    from pathlib import Path

    if os.geteuid() == 0:  # root ignores permission bits: use a read-only file system
        if not Path("/sys").is_dir():
            pytest.skip("no read-only file system to write to")
        target = Path("/sys/ebmlab_read_only_test/run")
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        target = ro / "run"
    p = run_cli(SAMPLING, target, env={"EBMLAB_CACHE": str(tmp_path / "cache")}, check=False)
    _clean_error(p, 3, "cannot write the output directory", "not writable")


# ---- issue 43: run directories that survive anything --------------------------------------

FILE_OPS = ("open", "replace", "rename", "symlink", "link", "unlink", "remove", "fsync", "mkdir")


def _save_killed_before_op(run_dir, state: dict, k: int) -> int:
    """Save ``state`` in a forked child that is killed (``os._exit``: no cleanup runs) just
    before its k-th file operation; returns the child's exit code (0: the save finished)."""
    import builtins
    import io

    from ebmlab.utils.workspace import Workspace

    pid = os.fork()
    if pid == 0:  # the child
        try:
            count = [0]

            def killing(fn):
                def op(*a, **kw):
                    count[0] += 1
                    if count[0] == k:
                        os._exit(9)
                    return fn(*a, **kw)

                return op

            for name in FILE_OPS:
                setattr(os, name, killing(getattr(os, name)))
            builtins.open = io.open = killing(builtins.open)
            Workspace(run_dir).save(state)
            os._exit(0)
        except BaseException:  # noqa: BLE001 - any failure is a failed save
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _old_layout(run_dir, steps=(1, 2)) -> None:
    """A checkpoint directory as ebmlab wrote it before issue 43: last.pt (newest),
    last.prev.pt, each with a .sha256 beside it."""
    import hashlib

    import torch

    d = run_dir / "checkpoints"
    d.mkdir(parents=True)
    for name, step in zip(("last.prev.pt", "last.pt"), steps):
        torch.save({"step": step}, d / name)
        (d / f"{name}.sha256").write_text(hashlib.sha256((d / name).read_bytes()).hexdigest())


@pytest.mark.parametrize("layout", ["generations", "older ebmlab", "first save"])
def test_a_kill_between_any_two_file_operations_of_a_save_leaves_a_good_checkpoint(
    tmp_path, layout
):
    """Kill a save before each of its file operations in turn: every time, a fresh process
    finds a complete checkpoint (the previous or the new one), and saving goes on from it."""
    import shutil

    from ebmlab.utils.workspace import Workspace

    template = tmp_path / "template"
    if layout == "generations":
        for step in (1, 2):
            Workspace(template).save({"step": step})
    elif layout == "older ebmlab":
        _old_layout(template)
    else:
        template.mkdir()
    expected = {3} | ({2} if layout != "first save" else {None})
    k = 0
    while True:
        k += 1
        d = tmp_path / f"kill_{k}"
        shutil.copytree(template, d, symlinks=True)
        code = _save_killed_before_op(d, {"step": 3}, k)
        found = Workspace(d).load()
        assert (found or {}).get("step") in expected, (k, code, sorted(os.listdir(d)))
        Workspace(d).save({"step": 4})  # the directory keeps working after the kill
        assert Workspace(d).load() == {"step": 4}
        assert Workspace(d).load("last") == {"step": 4}
        if code == 0:
            break
        assert code == 9, (k, code)
    assert k >= 6  # the save's sequence has that many file operations at least


def test_an_older_ebmlab_run_directory_resumes_and_is_moved_to_the_new_layout(tmp_path):
    from ebmlab.utils.workspace import Workspace

    _old_layout(tmp_path)
    ws = Workspace(tmp_path)
    assert ws.load() == {"step": 2}
    ws.save({"step": 3})
    ckpts = tmp_path / "checkpoints"
    assert (ckpts / "last.pt").is_symlink() and not (ckpts / "last.prev.pt").exists()
    assert Workspace(tmp_path).load() == {"step": 3}
    (ckpts / "last.pt").resolve().write_bytes(b"damaged")  # the older checkpoint stays the fallback
    assert Workspace(tmp_path).load() == {"step": 2}


def test_checkpoints_load_to_the_device_asked_for(tmp_path):
    import torch

    from ebmlab.utils.workspace import Workspace

    Workspace(tmp_path).save({"x": torch.ones(2)})
    assert Workspace(tmp_path, device="cpu").load()["x"].device.type == "cpu"
    assert Workspace(tmp_path).load("last", torch.device("cpu"))["x"].device.type == "cpu"


def _steps(run_dir) -> list[int]:
    rows = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["step"] for line in rows]


# kill before the first checkpoint (at 40), between two, after the last
@pytest.mark.parametrize(
    "kill_at", [20, *(pytest.param(k, marks=pytest.mark.slow) for k in (60, 120))]
)
def test_a_resumed_run_logs_each_step_once(tmp_path, kill_at):
    ref = tmp_path / "ref"
    run_cli(SAMPLING, ref)
    d = tmp_path / "killed"
    run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": str(kill_at)}, check=False)
    run_cli(SAMPLING, d)
    assert _steps(d) == _steps(ref) == list(range(10, 121, 10))


LONG = [*SAMPLING, "run.n_steps=400000", "run.checkpoint_every=200000"]


def _start(args, run_dir, tmp_path, multirun=False):
    base = ["logger=none", "progress=false"]
    base.append(f"hydra.sweep.dir={run_dir}" if multirun else f"hydra.run.dir={run_dir}")
    env = dict(os.environ, OMP_NUM_THREADS="1", EBMLAB_CACHE=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "ebmlab.run", *(["-m"] if multirun else []), *args, *base]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(path, proc, timeout=120):
    for _ in range(int(timeout * 20)):
        if path.exists() or proc.poll() is not None:
            return
        time.sleep(0.05)


def _progress_step(run_dir) -> int:
    return json.loads((run_dir / "progress.json").read_text())["step"]


@pytest.mark.parametrize(("sig", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_stops_at_a_step_checkpoints_and_says_how_to_resume(tmp_path, sig, code):
    import signal

    d = tmp_path / "run"
    p = _start(LONG, d, tmp_path)
    _wait_for(d / "metrics.jsonl", p)
    time.sleep(1.0)
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=120)
    assert p.returncode == code, (p.returncode, err)
    assert "Traceback" not in err and "Traceback" not in out
    (line,) = [ln for ln in err.splitlines() if ln.strip()]
    step = _progress_step(d)
    assert line == f"ebmlab: stopped at step {step} by {sig}; rerun the same command to resume"
    assert not (d / ".lock").exists() and not (d / "results.json").exists()
    # the checkpoint holds that very step (a cadence step or not), and the rerun continues from it
    from ebmlab.utils.workspace import Workspace

    assert Workspace(d).load()["_run"]["step"] == step


@pytest.mark.slow
def test_a_stopped_run_resumes_to_identical_results(tmp_path):
    import signal

    args = [*SAMPLING, "run.n_steps=3000", "run.checkpoint_every=1000"]
    ref = run_cli(args, tmp_path / "ref").results
    d = tmp_path / "run"
    p = _start(args, d, tmp_path)
    _wait_for(d / "metrics.jsonl", p)
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.skip("the run finished before the signal arrived")
    assert p.returncode == 143
    again = run_cli(args, d)
    _same_numbers(again.results, ref)
    assert _steps(d) == _steps(tmp_path / "ref")


def test_a_second_signal_exits_at_once_and_leaves_a_usable_directory(tmp_path):
    """Both signals arrive while the data is generated (long before a step boundary)."""
    import signal

    args = [
        "experiment=dlp/fig5_ising_learning",
        "scale=smoke",
        "dataset.n_side=4",
        "dataset.n_samples=64",
        "dataset.gibbs_steps=3000000",
        "run.n_steps=4",
        "run.checkpoint_every=2",
    ]
    d = tmp_path / "run"
    p = _start(args, d, tmp_path)
    _wait_for(d / ".lock", p)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert "Traceback" not in err and "exiting now" in err
    assert not (d / ".lock").exists()
    quick = [*args, "dataset.gibbs_steps=200", "fresh=true"]  # the directory is free to use
    assert run_cli(quick, d).returncode == 0


def test_a_signal_stops_a_sweep_with_its_summary(tmp_path):
    import signal

    sweep = tmp_path / "sweep"
    p = _start([*LONG, "seed=0,1"], sweep, tmp_path, multirun=True)
    for _ in range(2400):
        if list(sweep.glob("*/metrics.jsonl")) or p.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 143, err
    assert "Traceback" not in err
    assert "Sweep: 0 of 1 jobs succeeded." in err and "STOPPED (exit 143)" in err
    assert "rerun the same command to resume" in err
    (job,) = [p for p in sweep.iterdir() if p.is_dir()]  # its next job never started
    assert "seed=0" in job.name
    assert not list(sweep.glob("*/status.json"))  # a stopped job is unfinished, not failed


def test_a_lock_whose_pid_now_belongs_to_another_process_is_stale(tmp_path):
    """The lock names a live pid, but that process started after the lock's holder did."""
    import socket
    from pathlib import Path

    d = tmp_path / "run"
    d.mkdir()
    other = subprocess.Popen(["sleep", "60"])
    try:
        stat = Path(f"/proc/{other.pid}/stat").read_text()
        started = int(stat[stat.rfind(")") + 2 :].split()[19])  # field 22: its start time
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        lock = {"pid": other.pid, "host": socket.gethostname(), "since": time.time()}
        lock.update(started=started - 1, boot=boot)  # the holder was an earlier process
        (d / ".lock").write_text(json.dumps(lock))
        p = run_cli([*SAMPLING, "run.n_steps=20"], d, check=False)
        assert p.returncode == 0, p.stderr
        assert "taking over a stale lock" in p.stderr and "is another process now" in p.stderr
        # with the real start time recorded, the same live pid holds the directory
        lock.update(started=started)
        (d / ".lock").write_text(json.dumps(lock))
        _clean_error(run_cli([*SAMPLING, "run.n_steps=20", "fresh=true"], d, check=False), 3)
    finally:
        other.kill()
        other.wait()


def _damage(path) -> None:
    path.write_text(path.read_text()[: len(path.read_text()) // 2])


@pytest.mark.parametrize("name", ["run_config.json", "results.json"])
def test_a_damaged_json_file_in_a_run_directory_is_one_clear_message(tmp_path, name):
    d = tmp_path / "run"
    run_cli([*SAMPLING, "run.n_steps=20"], d)
    _damage(d / name)
    env = dict(os.environ, OMP_NUM_THREADS="1", EBMLAB_CACHE=str(tmp_path / "cache"))
    args = [*SAMPLING, "run.n_steps=20", "logger=none", "progress=false", f"hydra.run.dir={d}"]
    cmd = [sys.executable, "-m", "ebmlab.run", *args]
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    _clean_error(p, 3, name, "is damaged", "fresh=true")


def test_a_hand_edited_run_config_is_detected(tmp_path):
    d = tmp_path / "run"
    run_cli([*SAMPLING, "run.n_steps=20"], d)
    cfg = json.loads((d / "run_config.json").read_text())
    cfg["config"]["seed"] = 7  # edited, hash left as it was
    (d / "run_config.json").write_text(json.dumps(cfg))
    _clean_error(run_cli([*SAMPLING, "run.n_steps=20"], d, check=False), 3, "run_config.json")


def test_a_run_resumed_under_a_swapped_run_config_is_refused(tmp_path):
    """run_config.json replaced by another config's (hash and all), then that config's command:
    the checkpoint was written under the first config, so the run is refused."""
    d, other = tmp_path / "run", tmp_path / "other"
    run_cli(SAMPLING, d, env={"EBMLAB_FAULT_KILL_AT_STEP": "60"}, check=False)
    run_cli([*SAMPLING, "seed=5", "run.n_steps=20"], other)
    (d / "run_config.json").write_bytes((other / "run_config.json").read_bytes())
    p = run_cli([*SAMPLING, "seed=5", "run.n_steps=20"], d, check=False)
    _clean_error(p, 3, "does not match the run's checkpoint", "fresh=true")
    assert not (d / "results.json").exists()


def test_a_refused_command_changes_nothing_in_the_directory(tmp_path):
    d = tmp_path / "run"
    run_cli([*SAMPLING, "run.n_steps=20"], d)
    assert (d / ".hydra" / "overrides.yaml").exists() and (d / ".hydra" / "hydra.yaml").exists()

    def snapshot():
        return {
            str(p.relative_to(d)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in d.rglob("*")
            if p.is_file()
        }

    before = snapshot()
    p = run_cli([*SAMPLING, "run.n_steps=20", "sampler=gibbs"], d, check=False)
    _clean_error(p, 2, "another configuration")
    assert snapshot() == before


def test_a_refused_sweep_job_leaves_its_directory_alone(tmp_path):
    sweep = tmp_path / "sweep"
    run_cli([*SAMPLING, "run.n_steps=20", "seed=0"], sweep, multirun=True)
    (job,) = [p for p in sweep.iterdir() if p.is_dir()]
    status = (job / "status.json").read_bytes()
    cfg = json.loads((job / "run_config.json").read_text())
    cfg["config"]["run"]["n_steps"] = 40  # a directory that now belongs to another config
    from ebmlab.utils.rundir import _hash

    cfg["hash"] = _hash(cfg["config"])
    (job / "run_config.json").write_text(json.dumps(cfg))
    (job / "results.json").unlink()
    p = run_cli([*SAMPLING, "run.n_steps=20", "seed=0"], sweep, multirun=True, check=False)
    assert p.returncode == 2 and "another configuration" in p.stderr
    assert (job / "status.json").read_bytes() == status


def _report(*args):
    return subprocess.run(
        [sys.executable, "-m", "ebmlab.report", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "name",
    [
        "results.json",
        *(pytest.param(n, marks=pytest.mark.slow) for n in ("run_config.json", "status.json")),
        pytest.param("progress.json", marks=pytest.mark.slow),
    ],
)
def test_report_commands_name_a_damaged_file(tmp_path, name):
    """table, park and reproduce over a root whose runs (finished, unfinished, failed) hold a
    damaged JSON file: one line naming it, exit 3."""
    import shutil

    root = tmp_path / "outputs"
    exp = "dlp/fig3_ising_sampling"
    sweep = root / "multirun" / exp / "smoke"
    args = [*SAMPLING, "run.n_steps=40", "run.checkpoint_every=20"]
    run_cli(args, sweep / "finished")
    (sweep / "finished" / "status.json").write_text(json.dumps({"exit_code": 0, "message": "ok"}))
    run_cli(args, sweep / "unfinished", env={"EBMLAB_FAULT_KILL_AT_STEP": "20"}, check=False)
    shutil.copytree(sweep / "unfinished", sweep / "failed")
    (sweep / "failed" / "status.json").write_text(json.dumps({"exit_code": 1, "message": "x"}))
    for path in sweep.glob(f"*/{name}"):
        _damage(path)
    commands = [["reproduce", "dlp", "--scale", "smoke", "--out", str(tmp_path / "r")]]
    if name != "status.json":  # a table reads the finished runs
        commands.append(["table", exp, "--scale", "smoke"])
    if name != "results.json":  # park reads the unfinished runs
        commands.append(["park"])
    for cmd in commands:
        p = _report(*cmd, "--root", str(root))
        assert p.returncode == 3, (cmd, p.returncode, p.stdout, p.stderr[-2000:])
        assert "Traceback" not in p.stderr and name in p.stderr and "damaged" in p.stderr, cmd


def test_unpark_names_a_damaged_parked_file(tmp_path):
    root = tmp_path / "outputs"
    d = root.parent / "records" / "parked" / "runs" / "x"
    d.mkdir(parents=True)
    (d / "run_config.json").write_text("{}")
    (d / "progress.json").write_text('{"step": 1')
    (d / "checkpoints").mkdir()
    (d / "checkpoints" / "last.pt").write_bytes(b"x")
    p = _report("unpark", "--root", str(root))
    _clean_error(p, 3, "progress.json", "damaged")


def test_committed_parked_runs_in_the_older_layout_still_unpark_and_load(tmp_path):
    import shutil

    from ebmlab.runs.park import parked_root, unpark_runs
    from ebmlab.utils.workspace import Workspace

    parked = sorted((REPO / "records" / "parked").rglob("run_config.json"))
    if not parked:
        pytest.skip("no parked run committed")
    src = parked[0].parent
    rel = src.relative_to(REPO / "records" / "parked")
    root = tmp_path / "outputs"
    shutil.copytree(src, parked_root(root) / rel)
    assert unpark_runs(root) == [rel]
    ws = Workspace(root / rel)
    assert ws.current() is not None and ws.verify(ws.last) is None


@pytest.mark.parametrize(
    ("experiment", "key", "extra"),
    [
        ("dlp/fig3_ising_sampling", "task.n_chains", []),
        ("dlp/fig4_rbm_sampling", "task.n_chains", []),
        ("dlp/fig5_ising_learning", "dataset.n_side", []),
        ("dlp/fig5_ising_learning", "learner.batch_size", []),
        ("dlp/table1_ebm_learning", "learner.batch_size", []),
        ("ab/tables1to5_ess", "task.n_chains", []),
        ("acs/fig5_ebm_mixing", "task.n_chains", ["task.checkpoint=CKPT"]),
        ("acs/table1_rbm_learning", "learner.batch_size", []),
        ("acs/fig1_toy", "task.n_chains", []),
        ("rmwggis/table1_synthetic", "learner.batch_size", []),
        ("rmwggis/table2_graphs", "learner.batch_size", []),
        ("grbm/fig1_gmm", "learner.batch_size", []),
        ("grbm/table1_mnist_fid", "learner.batch_size", []),
    ],
)
def test_every_task_refuses_a_size_a_million_times_too_large(tmp_path, experiment, key, extra):
    """The memory estimate (checked before anything is built) covers each task's largest
    tensors; in-process for speed (the CLI turns its ConfigError into exit 2, tested below)."""
    import torch
    from omegaconf import OmegaConf

    from ebmlab.errors import ConfigError
    from ebmlab.utils.config import build, compose_job
    from ebmlab.utils.memory import check_memory

    ckpt = tmp_path / "ebm.pt"
    torch.save({}, ckpt)
    extra = [e.replace("CKPT", str(ckpt)) for e in extra]
    _, cfg = compose_job([f"experiment={experiment}", "scale=smoke", *extra])
    big = int(OmegaConf.select(cfg, key)) * 10**6
    _, cfg = compose_job([f"experiment={experiment}", "scale=smoke", *extra, f"{key}={big}"])
    estimate = build(cfg.task, "task").memory_estimate(cfg)
    with pytest.raises(ConfigError, match="this run needs about"):
        check_memory(estimate, torch.device("cpu"))


@pytest.mark.parametrize(
    "args",
    [
        ["experiment=dlp/fig5_ising_learning", "scale=smoke", "dataset.n_side=100000"],
        ["experiment=rmwggis/table1_synthetic", "scale=smoke", "learner.batch_size=10000000000"],
    ],
)
def test_sizes_that_overflowed_torch_exit_2_with_the_estimate(tmp_path, args):
    p = run_cli(args, tmp_path / "run", check=False)
    _clean_error(p, 2, "this run needs about")


DENSITY = [
    "experiment=rmwggis/table1_synthetic",
    "scale=smoke",
    "run.n_steps=40",
    "run.eval_every=10",
    "run.checkpoint_every=20",
    "task.mmd_samples=100",
    "task.rm_samples=100",
    "task.heatmap_every=0",
]


def test_nan_probabilities_inside_a_learner_are_the_divergence_exit(tmp_path):
    p = run_cli([*DENSITY, "learner.lr=1e30"], tmp_path / "run", check=False)
    _clean_error(p, 1, "training diverged at step", "checkpoint")
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e39"])
def test_non_finite_or_overflowing_hyperparameters_are_refused(tmp_path, value):
    p = run_cli([*DENSITY, f"learner.lr={value}"], tmp_path / "run", check=False)
    _clean_error(p, 2, "learner.lr")


def test_w_and_b_gets_each_step_once_across_a_restart(tmp_path):
    """The metric log of a killed process is cut back (to a checkpoint, or to nothing when it
    wrote none), and the steps W&B already holds from it are not sent again."""
    from ebmlab.utils.logging import MetricLogger, read_metrics

    class FakeWandb:
        def __init__(self):
            self.steps = []

        def log(self, row, step):
            self.steps.append(step)

    def process():
        logger = MetricLogger(tmp_path, None, {}, "run")
        logger._wandb = FakeWandb()
        return logger

    first = process()
    for step in (0, 10, 20):
        first.log({"a": 1.0}, step)
    # killed before a checkpoint: the restart logs step 0 while it builds, finds no checkpoint
    again = process()
    again.log({"a": 1.0}, 0)
    again.keep_only_this_process()
    for step in (10, 20, 30):
        again.log({"a": 1.0}, step)
        if step == 10:
            offset = again.offset  # a checkpoint at step 10
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0, 10, 20, 30]
    assert again._wandb.steps == [30]
    # killed again; the next process resumes from the checkpoint at step 10
    last = process()
    last.truncate_to(offset)
    for step in (20, 30, 40):
        last.log({"a": 1.0}, step)
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [0, 10, 20, 30, 40]
    assert last._wandb.steps == [40]
