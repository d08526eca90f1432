"""`pip install .` gives a working `ebmlab` (issue 45, items 1 and 8): the wheel ships the
configs as ebmlab/conf, Hydra composes from wherever they are, a user's own config folder joins
them (hydra.searchpath), and a mistyped key names the keys nearby."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import ebmlab.configs as configs
from ebmlab import run
from tests.helpers import run_cli

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
REPO = Path(__file__).resolve().parents[1]
MAPPED = {"ebmlab.conf": "conf"}
USER_SAMPLER = """\
# my_conf/sampler/my_dmala.yaml: DMALA with my step size
_target_: ebmlab.samplers.dlp.DMALA
step_size: 0.3
precond: null
"""


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_pyproject_lists_every_package_and_maps_the_configs():
    """`packages` is an explicit list (the mapped ones cannot be found): it must name every
    folder of ebmlab/ that is a package, or that package is missing from the wheel."""
    st = _pyproject()["tool"]["setuptools"]
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for top in ("ebmlab", "hydra_plugins")  # hydra_plugins: a namespace, ebmlab's launchers
        for p in (REPO / top).rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert sorted(st["packages"]) == sorted(found | set(MAPPED))
    assert st["package-dir"] == MAPPED
    assert st["package-data"]["ebmlab.conf"] == ["**/*.yaml"]
    scripts = _pyproject()["project"]["scripts"]
    assert scripts["ebmlab"] == "ebmlab.run:cli"
    assert scripts["ebmlab-report"] == "ebmlab.report.__main__:main"


def test_config_dir_is_the_checkout_conf_or_the_installed_copy(tmp_path, monkeypatch):
    assert configs.config_dir() == REPO / "conf" == run.CONF_DIR
    installed = tmp_path / "site-packages" / "ebmlab"
    (installed / "conf").mkdir(parents=True)
    (installed / "conf" / "config.yaml").write_text("defaults: []\n")
    monkeypatch.setattr(configs, "PACKAGE_DIR", installed)
    assert configs.config_dir() == installed / "conf"
    monkeypatch.setattr(configs, "PACKAGE_DIR", tmp_path / "nowhere" / "ebmlab")
    with pytest.raises(FileNotFoundError, match="no ebmlab configs"):
        configs.config_dir()


@pytest.mark.slow  # a few seconds of setuptools; the static test above guards the same list
def test_wheel_ships_every_config_and_the_commands(tmp_path):
    """Build the wheel from a copy of the sources (no network) and look inside."""
    src = tmp_path / "src"
    for rel in ("pyproject.toml", "README.md"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, src / rel)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for rel in ("ebmlab", "conf", "hydra_plugins"):
        if (REPO / rel).is_dir():
            shutil.copytree(REPO / rel, src / rel, ignore=ignore)
    p = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["--disable-pip-version-check", str(src), "-w", str(tmp_path / "whl")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    (wheel,) = (tmp_path / "whl").glob("ebmlab-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    yamls = {
        f"ebmlab/conf/{p.relative_to(REPO / 'conf').as_posix()}"
        for p in (REPO / "conf").rglob("*.yaml")
    }
    assert yamls and not yamls - names, sorted(yamls - names)[:5]
    assert "ebmlab/conf/config.yaml" in names and "ebmlab/testing.py" in names
    assert "hydra_plugins/ebmlab_launchers/launchers.py" in names  # hydra/launcher=local|slurm
    assert "ebmlab/conf/claims/dlp.yaml" in names  # the claims and the tables' paper values
    assert "ebmlab = ebmlab.run:cli" in entry_points
    assert "ebmlab-report = ebmlab.report.__main__:main" in entry_points


def test_user_config_folder_composes_with_the_packaged_one(tmp_path, monkeypatch):
    """What the command line composes with `hydra.searchpath=[file://my_conf]` (a relative
    folder, from the current directory): the user's sampler, validated and built."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ebmlab.utils.config import build

    (tmp_path / "my_conf" / "sampler").mkdir(parents=True)
    (tmp_path / "my_conf" / "sampler" / "my_dmala.yaml").write_text(USER_SAMPLER)
    monkeypatch.chdir(tmp_path)
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(run.CONF_DIR), version_base="1.3"):
            cfg = compose("config", ["sampler=my_dmala", "hydra.searchpath=[file://my_conf]"])
    finally:
        GlobalHydra.instance().clear()
    assert build(cfg.sampler, "sampler").step_size == 0.3


@pytest.mark.slow  # one real run (~5 s on an idle core)
def test_user_config_folder_adds_a_sampler(tmp_path):
    """docs/install.md's example: my_conf/sampler/my_dmala.yaml, used from another directory
    with `hydra.searchpath=[file://my_conf]`, runs with its values."""
    (tmp_path / "my_conf" / "sampler").mkdir(parents=True)
    (tmp_path / "my_conf" / "sampler" / "my_dmala.yaml").write_text(USER_SAMPLER)
    args = ["sampler=my_dmala", "hydra.searchpath=[file://my_conf]", "scale=smoke"]
    args += ["run.n_steps=2"]
    p = run_cli(args, tmp_path / "out", cwd=tmp_path, timeout=300)
    assert "Warning" not in p.stderr, p.stderr  # no noise on a normal run
    ran = json.loads((tmp_path / "out" / "run_config.json").read_text())["config"]
    assert ran["sampler"] == {
        "_target_": "ebmlab.samplers.dlp.DMALA",
        "step_size": 0.3,
        "precond": None,
    }


def test_options_in_a_searchpath_folder_pass_the_precheck(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_conf" / "sampler").mkdir(parents=True)
    (tmp_path / "my_conf" / "sampler" / "my_dmala.yaml").write_text(USER_SAMPLER)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        run.precheck_overrides(["sampler=my_dmala"])
    assert e.value.code == 2 and "unknown option" in capsys.readouterr().err
    run.precheck_overrides(["sampler=my_dmala", "hydra.searchpath=[file://my_conf]"])


@pytest.mark.parametrize(
    ("argv", "key", "hint"),
    [
        (["run.n_step=5"], "run.n_step", "did you mean run.n_steps?"),
        (["sampler=dmala", "sampler.stepsize=0.3"], "sampler.stepsize", "sampler.step_size"),
        (["-m", "seed=0,1", "sedd=1"], "sedd", "did you mean seed?"),
    ],
)
def test_unknown_key_names_the_keys_nearby(argv, key, hint, capsys):
    with pytest.raises(SystemExit) as e:
        run.precheck_overrides(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.startswith(f"ebmlab: configuration error: {key}: unknown key") and hint in err
    assert len(err.strip().splitlines()) == 1


def test_known_and_added_keys_pass():
    run.precheck_overrides(["sampler=dmala", "sampler.step_size=0.3", "+sampler.extra=1"])
    run.precheck_overrides(["experiment=dlp/fig5_ising_learning", "scale=smoke", "learner.lr=0.1"])


def test_report_subcommand(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["ebmlab", "report", "--help"])
    with pytest.raises(SystemExit) as e:
        run.cli()
    assert e.value.code == 0 and "reproduce" in capsys.readouterr().out


def test_real_data_dir_is_the_run_variable(monkeypatch, tmp_path):
    from tests.conftest import real_data_dir

    monkeypatch.setenv("EBMLAB_DATA_DIR", str(tmp_path))
    assert real_data_dir() == tmp_path
    monkeypatch.delenv("EBMLAB_DATA_DIR")
    assert real_data_dir() == REPO.parent / "shared" / "data"


def test_exactness_harness_is_in_the_package():
    import tests.exactness
    from ebmlab import testing

    assert tests.exactness.assert_exact is testing.assert_exact
    assert tests.exactness.DenseIsing is testing.DenseIsing


@pytest.mark.parametrize("overrides", [[], ["scale=smoke"], ["experiment=dlp/fig5_ising_learning"]])
def test_composing_a_run_warns_nothing(overrides):
    """No warning noise on a normal run, with or without `experiment=` (a defaults list
    without `_self_`, a config validated against a schema of its name, ... would warn here)."""
    import warnings

    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with initialize_config_dir(config_dir=str(run.CONF_DIR), version_base="1.3"):
                cfg = compose("config", overrides, return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()
    assert cfg.hydra.job.chdir is False
