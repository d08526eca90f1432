"""scripts/offline.py: the offline install keeps a machine's own torch when it meets
pyproject's range (never replaces a working CUDA torch with the CPU pin), and the version
logic it decides with."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import subprocess
import sys

import pytest

from tests.helpers import REPO

_spec = importlib.util.spec_from_file_location("offline", REPO / "scripts" / "offline.py")
offline = importlib.util.module_from_spec(_spec)
sys.modules["offline"] = offline
_spec.loader.exec_module(offline)


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("2.11.0+cu128", ">=2.2", True),  # a CUDA build: the local label does not count
        ("2.1.2+cu121", ">=2.2", False),
        ("2.2", ">=2.2.0", True),
        ("0.26.0+cu128", ">=0.17", True),
        ("1.3.8", ">=1.3.4,<1.4", True),
        ("1.4.0", ">=1.3.4,<1.4", False),
        ("4.9.3", "==4.9.*", True),
        ("4.10.0", "==4.9.*", False),
        ("2.13.0", "===2.13.0", True),
        ("2.13.0+cpu", "===2.13.0", False),
        ("2.2.3", "~=2.2.1", True),
        ("2.3.0", "~=2.2.1", False),
        ("3.0", "!=3.0", False),
        ("5.0", "", True),
    ],
)
def test_satisfies(version, spec, ok):
    assert offline.satisfies(version, spec) is ok


def test_project_requirements_read_pyproject():
    req = offline.project_requirements()
    assert req["torch"].startswith(">=") and "hydra-core" in req and "submitit" not in req
    assert "hydra-submitit-launcher" in req


REQUIRED = {"torch": ">=2.2", "torchvision": ">=0.17"}


def test_plan_keeps_a_cuda_torch_that_meets_the_range():
    p = offline.plan({"torch": "2.11.0+cu128", "torchvision": "0.26.0+cu128"}, REQUIRED)
    assert p.keep == {"torch": "2.11.0+cu128", "torchvision": "0.26.0+cu128"}
    assert all("kept" in n for n in p.notes)


def test_plan_replaces_a_torch_below_the_range_and_installs_a_missing_one():
    p = offline.plan({"torch": "2.1.2+cu121", "torchvision": None}, REQUIRED)
    assert p.keep == {}
    assert any("does not meet >=2.2" in n for n in p.notes)
    assert offline.plan({"torch": None, "torchvision": None}, REQUIRED).keep == {}


def test_plan_warns_when_torch_is_kept_but_torchvision_must_come_from_the_wheelhouse():
    p = offline.plan({"torch": "2.11.0+cu128", "torchvision": None}, REQUIRED)
    assert p.keep == {"torch": "2.11.0+cu128"}
    assert any("torchvision" in n and "2.11.0+cu128" in n for n in p.notes)


def test_constraints_drop_the_cpu_pin_of_a_kept_torch_and_pin_the_installed_build():
    base = (REPO / "constraints.txt").read_text()
    assert "torch===" in base  # the CPU machines' pin that must not replace a CUDA torch
    out = offline.constraints_for(base, {"torch": "2.11.0+cu128", "torchvision": "0.26.0"})
    pins = [ln for ln in out.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert pins == ["torch==2.11.0+cu128", "torchvision==0.26.0"]
    assert offline.constraints_for(base, {}).strip() == base.strip()  # nothing kept: unchanged


def test_install_without_a_wheelhouse_is_one_clear_message(tmp_path):
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts/offline.py"), "install", "--wheels", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert "holds no ebmlab wheel" in p.stderr and "make wheelhouse" in p.stderr
    assert "Traceback" not in p.stderr


def test_install_dry_run_keeps_this_machines_torch(tmp_path):
    """On this machine torch meets the range: the pip command carries a constraints file
    that pins the installed torch, not constraints.txt's."""
    (tmp_path / "ebmlab-0.1.0-py3-none-any.whl").write_bytes(b"")
    p = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "offline.py"), "install"]
        + ["--wheels", str(tmp_path), "--extras", "dev", "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    torch = importlib.metadata.version("torch")  # what pip sees (may lack torch's +cu label)
    assert f"torch {torch}: installed and meets" in p.stdout
    cmd = p.stdout.splitlines()[-1]
    assert "--no-index --find-links" in cmd and cmd.endswith("ebmlab[dev]")
    constraints = cmd.split(" -c ")[1].split()[0]
    text = open(constraints).read()
    assert f"torch=={torch}" in text.splitlines() and "torch===" not in text


def test_platform_tags_add_the_older_manylinux_tags_pip_leaves_out():
    tags = offline.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_17_x86_64" in tags
    assert "manylinux2014_x86_64" in tags and "manylinux_2_29_x86_64" not in tags
    assert offline.platform_tags("manylinux2014_x86_64")[:2] == [
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
    ]
    other = ["macosx_11_0_arm64", "win_amd64"]
    assert offline.platform_tags(" ".join(other)) == other
