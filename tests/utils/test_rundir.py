"""Run identity (config hash), one writer per directory, short directory names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from omegaconf import OmegaConf

from ebmlab.errors import ConfigError
from ebmlab.utils import rundir


def test_short_name_is_safe_and_bounded():
    assert rundir.short_name("") == "default"
    assert rundir.short_name("sampler=dmala,seed=1") == "sampler=dmala,seed=1"
    assert "/" not in rundir.short_name("task.checkpoint=/a/b/c")
    long = "task.values=[" + ",".join(str(i) for i in range(100)) + "]"
    a, b = rundir.short_name(long), rundir.short_name(long + "x")
    assert len(a) <= rundir.MAX_NAME and len(b) <= rundir.MAX_NAME and a != b


def test_identity_ignores_presentation_keys_only():
    base = {"seed": 0, "task": {"n": 1}, "progress": True, "logger": {"mode": "x"}}
    a = rundir.identity(OmegaConf.create(base))
    b = rundir.identity(OmegaConf.create({**base, "progress": False, "logger": None}))
    c = rundir.identity(OmegaConf.create({**base, "task": {"n": 2}}))
    assert a["hash"] == b["hash"] != c["hash"]


def test_claim_reuses_only_the_same_config(tmp_path):
    one = rundir.identity(OmegaConf.create({"task": {"n": 1}, "seed": 0}))
    two = rundir.identity(OmegaConf.create({"task": {"n": 2}, "seed": 0}))
    assert rundir.claim(tmp_path, one) is None
    (tmp_path / "results.json").write_text(json.dumps({"metrics": {"a": 1.0}}))
    assert rundir.claim(tmp_path, one) == {"a": 1.0}
    with pytest.raises(ConfigError, match="differs at: task.n"):
        rundir.claim(tmp_path, two)
    (tmp_path / "progress.json").write_text("{}")
    rundir.clear(tmp_path)
    assert not (tmp_path / "progress.json").exists()
    assert rundir.claim(tmp_path, two) is None


def test_cache_and_data_locations_are_not_identity(tmp_path):
    """A checkout moved elsewhere (or EBMLAB_CACHE changed) keeps its runs, including runs
    recorded when the locations were still part of the identity."""
    cfg = {"seed": 0, "task": {"n": 1, "cache_dir": "/a/.cache"}, "dataset": {"data_dir": "/d"}}
    moved = {"seed": 0, "task": {"n": 1, "cache_dir": "/b/.cache"}, "dataset": {"data_dir": "/e"}}
    a, b = rundir.identity(OmegaConf.create(cfg)), rundir.identity(OmegaConf.create(moved))
    assert a == b and "cache_dir" not in a["config"]["task"]
    old_record = {"hash": rundir._hash(cfg), "config": cfg}  # the old, location-bearing form
    (tmp_path / "run_config.json").write_text(json.dumps(old_record))
    (tmp_path / "results.json").write_text(json.dumps({"metrics": {"a": 1.0}}))
    assert rundir.claim(tmp_path, b) == {"a": 1.0}
    assert json.loads((tmp_path / "run_config.json").read_text())["hash"] == b["hash"]
    other = rundir.identity(OmegaConf.create({**moved, "task": {"n": 2, "cache_dir": "/b"}}))
    with pytest.raises(ConfigError, match="differs at: task.n"):
        rundir.claim(tmp_path, other)


def test_claim_refuses_an_unrecorded_old_run(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    with pytest.raises(ConfigError, match="no recorded configuration"):
        rundir.claim(tmp_path, rundir.identity(OmegaConf.create({"seed": 0})))


def test_lock_refuses_a_live_owner_and_takes_over_a_dead_one(tmp_path, capsys):
    with rundir.lock(tmp_path):
        assert (tmp_path / ".lock").exists()
        with pytest.raises(rundir.RunDirError, match=f"in use by process {os.getpid()}"):
            with rundir.lock(tmp_path):
                pass
    assert not (tmp_path / ".lock").exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owner = {"pid": dead.pid, "host": os.uname().nodename, "since": time.time()}
    (tmp_path / ".lock").write_text(json.dumps(owner))
    with rundir.lock(tmp_path):
        assert json.loads((tmp_path / ".lock").read_text())["pid"] == os.getpid()
    assert "stale lock" in capsys.readouterr().err
