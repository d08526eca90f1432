"""scripts/gpu_check.py (`make gpu-check`): its CPU dry run exercises the kill/resume check, and
a machine without the packages or without CUDA gets one line, not a traceback."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.helpers import REPO

sys.path.insert(0, str(REPO / "scripts"))
import gpu_check  # noqa: E402


def test_missing_packages_name_the_offline_install(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda m, *a: None if m == "hydra" else real(m, *a)
    )
    assert gpu_check.main(["--cpu"]) == 2
    err = capsys.readouterr().err
    assert "missing packages: hydra-core" in err
    assert "make install-offline WHEELS=<dir>" in err


def test_without_cuda_it_stops_before_any_work(monkeypatch, capsys, tmp_path):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert gpu_check.main(["--report-dir", str(tmp_path)]) == 2
    assert "CUDA is not available" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_unknown_family_or_phase_is_a_clear_error(capsys):
    assert gpu_check.main(["--cpu", "--families", "nope"]) == 2
    assert "unknown families" in capsys.readouterr().err
    assert gpu_check.main(["--cpu", "--phases", "resume,nope"]) == 2
    assert "--phases takes some of" in capsys.readouterr().err


def test_every_family_names_a_real_experiment():
    for name, (args, kill_at) in gpu_check.FAMILIES.items():
        exp = next(a for a in args if a.startswith("experiment="))[len("experiment=") :]
        assert (REPO / "conf" / "experiment" / f"{exp}.yaml").is_file(), name
        assert kill_at >= 1


@pytest.mark.slow
def test_cpu_dry_run_kills_resumes_and_writes_the_report(tmp_path, monkeypatch):
    """The kill/resume phase on one family, on the CPU: a report naming the commit and torch,
    the family passing (SIGKILLed, resumed, same results and checkpoint tensors)."""
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    args = ["--cpu", "--phases", "resume", "--families", "ising_sampling"]
    assert gpu_check.main([*args, "--report-dir", str(tmp_path / "docs")]) == 0
    (report,) = (tmp_path / "docs").glob("*-cpu.md")
    text = report.read_text()
    assert "- commit:" in text and "- torch:" in text
    assert "| ising_sampling | pass | killed after step 50, resumed" in text
    assert (tmp_path / "out" / report.name).exists()
    assert (tmp_path / "out" / "gpu_check" / "resume" / "ising_sampling" / "resumed.log").exists()


def test_graphs_phase_is_part_of_the_default_check():
    assert "graphs" in gpu_check.BUDGET
    cases = gpu_check._identity_cases(cpu=True)
    assert sorted(c.split(",")[0] for c in cases) == ["AB-1st", "ACS", "DMALA", "GWG-1"]
    assert gpu_check.GRAPH_RUN in gpu_check.FAMILIES


@pytest.mark.slow
def test_cpu_dry_run_of_the_graphs_phase(tmp_path, monkeypatch):
    """Eager vs graphed on the CPU stand-in (chains through the runner) and a whole smoke run
    with compile=none and compile=graph: both identical, written into the report."""
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    args = ["--cpu", "--phases", "graphs", "--report-dir", str(tmp_path / "docs")]
    assert gpu_check.main(args) == 0
    (report,) = (tmp_path / "docs").glob("*-cpu.md")
    text = report.read_text()
    assert "## (e) eager vs CUDA-graphed, identical numbers: pass" in text
    for label in ("DMALA", "GWG-1", "ACS", "AB-1st"):
        assert f"| {label}, ising x8 | 80 | 1 | identical |" in text
    assert "compile=graph vs compile=none: identical results" in text
