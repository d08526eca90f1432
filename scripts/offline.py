"""Installs on a machine with no internet (a cluster's GPU node), from a folder of wheels.

    # on a machine that reaches PyPI: every wheel ebmlab needs, for the target's Python/platform
    python scripts/offline.py wheelhouse --dest .whl --python-version 3.11 \
        --platform manylinux2014_x86_64 [--extras dev] [--torch pinned|none]
    # on the offline machine, with the folder copied there:
    python scripts/offline.py install --wheels .whl [--extras dev]

``install`` keeps a torch (and torchvision) already importable by the target Python when
its version satisfies pyproject's range: it never replaces a working CUDA torch with the
CPU machines' pin of constraints.txt. It installs with ``--no-index --find-links`` and a
constraints file made on the fly: constraints.txt without the kept packages' pins, plus
``torch==<the installed version>`` so that pip leaves it as it is.

Standard library only (it runs before anything is installed); ``make wheelhouse`` and
``make install-offline`` call it (mk/offline.mk).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEEPABLE = ("torch", "torchvision")  # a machine's own (CUDA) build of these is kept
# the torch stack (its CUDA libraries: nvidia-*, cuda-*) a --torch none wheelhouse leaves out
TORCH_STACK = re.compile(r"^(torch|torchvision|triton|nvidia-.*|cuda-.*)$")
# PyPI has only a source distribution of these: their wheels are built (pure Python, so one
# wheel fits every target). hydra-core 1.3 requires antlr4-python3-runtime==4.9.*.
SDIST_ONLY = {"antlr4-python3-runtime": "==4.9.*"}
EXIT_USAGE = 2


def canonical(name: str) -> str:
    """PEP 503 normalised name (``Foo_bar`` -> ``foo-bar``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---- versions and specifiers (PEP 440, the part ebmlab's requirements use) -------------------
_OPS = ("===", "==", "!=", "<=", ">=", "~=", "<", ">")


def _release(version: str) -> tuple[int, ...]:
    """The numeric release of a version: ``'2.11.0+cu128'`` -> ``(2, 11, 0)``."""
    v = version.split("+", 1)[0].strip()
    m = re.match(r"^v?(\d+(?:\.\d+)*)", v)
    if not m:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(x) for x in m.group(1).split("."))


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    n = max(len(a), len(b))
    return a + (0,) * (n - len(a)), b + (0,) * (n - len(b))


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets every clause of ``specifier`` (``'>=2.2,<3'``; ``''`` = any).
    Local labels (``+cu128``) are ignored, as PEP 440 does for every operator but ``===``;
    ``==2.2.*`` prefix matches are supported; pre-releases compare by their release."""
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        op = next((o for o in _OPS if clause.startswith(o)), None)
        if op is None:
            raise ValueError(f"unsupported version specifier {clause!r}")
        want = clause[len(op) :].strip()
        if op == "===":
            if version.strip() != want:
                return False
            continue
        if want.endswith(".*"):
            prefix = _release(want[:-2])
            match = _release(version)[: len(prefix)] == prefix
            if (op == "==" and not match) or (op == "!=" and match):
                return False
            continue
        have, need = _padded(_release(version), _release(want))
        compatible = len(_release(want)) - 1  # ~=2.2.1: >=2.2.1 and ==2.2.*
        ok = {
            "==": have == need,
            "!=": have != need,
            "<=": have <= need,
            ">=": have >= need,
            "<": have < need,
            ">": have > need,
            "~=": have >= need and have[:compatible] == need[:compatible],
        }[op]
        if not ok:
            return False
    return True


def parse_requirement(line: str) -> tuple[str, str]:
    """``'torch>=2.2'`` -> ``('torch', '>=2.2')``; markers and extras are dropped."""
    req = line.split(";", 1)[0].strip()
    m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", req)
    if not m:
        raise ValueError(f"not a requirement: {line!r}")
    return canonical(m.group(1)), m.group(3).replace(" ", "")


def project_requirements(pyproject: Path = REPO / "pyproject.toml") -> dict[str, str]:
    """pyproject's dependencies: {normalised name: specifier}."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pip vendors the same parser
        from pip._vendor import tomli as tomllib
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return dict(parse_requirement(d) for d in deps)


# ---- keep or install torch -------------------------------------------------------------------
@dataclass
class Plan:
    """What ``install`` does with the packages a machine may bring (torch, torchvision)."""

    keep: dict[str, str] = field(default_factory=dict)  # name -> installed version, kept
    notes: list[str] = field(default_factory=list)  # one line per decision, printed


def plan(installed: dict[str, str | None], required: dict[str, str]) -> Plan:
    """Keep each of :data:`KEEPABLE` that is installed in a version meeting ``required``;
    a torch that is kept and a torchvision that is not would be replaced by the wheelhouse's,
    built for another torch, so then neither is kept unless torchvision fits too."""
    p = Plan()
    for name in KEEPABLE:
        have, spec = installed.get(name), required.get(name, "")
        if have is None:
            p.notes.append(f"{name}: none installed; installing the wheelhouse's")
        elif satisfies(have, spec):
            p.keep[name] = have
            p.notes.append(f"{name} {have}: installed and meets {spec or 'any'}; kept")
        else:
            p.notes.append(f"{name} {have}: does not meet {spec}; replaced by the wheelhouse's")
    if "torch" in p.keep and "torchvision" not in p.keep:
        p.notes.append(
            f"torchvision: the wheelhouse's is built for the pinned torch, not for torch "
            f"{p.keep['torch']}; if pip finds no fit, put the torchvision wheel made for "
            f"torch {p.keep['torch']} into the wheelhouse (pip download torchvision==<its match>)"
        )
    return p


def constraints_for(base: str, keep: dict[str, str]) -> str:
    """constraints.txt's text without the pins of the kept packages, with ``name==version``
    of each kept one (so pip leaves the installed build, local label and all, alone)."""
    lines = []
    for line in base.splitlines():
        body = line.split("#", 1)[0].strip()
        if body and parse_requirement(body)[0] in keep:
            continue
        lines.append(line)
    lines += [f"{name}=={version}" for name, version in sorted(keep.items())]
    return "\n".join(lines) + "\n"


def installed_versions(names=KEEPABLE) -> dict[str, str | None]:
    """The versions of ``names`` this Python has installed (None for each it has not)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def install(wheels: Path, extras: str, dry_run: bool = False) -> int:
    if not wheels.is_dir() or not any(wheels.glob("ebmlab-*.whl")):
        print(
            f"offline install: {wheels} holds no ebmlab wheel; make it on a machine with "
            "internet access with `make wheelhouse WHEELS=<dir> PYVER=<x.y>` and copy it here",
            file=sys.stderr,
        )
        return EXIT_USAGE
    p = plan(installed_versions(), project_requirements())
    for note in p.notes:
        print(f"offline install: {note}")
    base = (REPO / "constraints.txt").read_text()
    with tempfile.NamedTemporaryFile("w", suffix="-constraints.txt", delete=False) as f:
        f.write(constraints_for(base, p.keep))
    target = f"ebmlab[{extras}]" if extras else "ebmlab"
    cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(wheels)]
    cmd += ["-c", f.name, target]
    print("offline install:", " ".join(cmd))
    if dry_run:
        return 0
    return subprocess.call(cmd)


# ---- the wheelhouse --------------------------------------------------------------------------
class PipFailed(RuntimeError):
    """A pip command failed; pip has printed why."""


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("wheelhouse:", " ".join(cmd), flush=True)
    if subprocess.run(cmd).returncode != 0:
        raise PipFailed(" ".join(cmd[3:5]))


def platform_tags(platform: str) -> list[str]:
    """pip's ``--platform`` values for a target: each given tag (space-separated) and, for a
    manylinux one, the older manylinux tags the same machine runs (pip does not add them):
    ``manylinux_2_28_x86_64`` -> ``manylinux_2_28_x86_64 ... manylinux_2_17_x86_64
    manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64``."""
    tags: list[str] = []
    for tag in platform.split():
        m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", tag) or re.fullmatch(
            r"manylinux(2014)_(\w+)", tag
        )
        if m is None:
            tags.append(tag)
            continue
        minor = 17 if m.group(1) == "2014" else int(m.group(1))
        arch = m.group(2)
        tags += [f"manylinux_2_{k}_{arch}" for k in range(minor, 16, -1)]
        tags += [f"manylinux{legacy}_{arch}" for legacy in ("2014", "2010", "1")]
    return list(dict.fromkeys(tags))


def wheelhouse(dest: Path, python_version: str, platform: str, extras: str, torch: str) -> int:
    """Every wheel ``ebmlab[extras]`` needs on ``platform`` with Python ``python_version``."""
    if not re.fullmatch(r"3\.\d+", python_version):
        print(f"wheelhouse: PYVER must look like 3.11 (got {python_version!r})", file=sys.stderr)
        return EXIT_USAGE
    if torch not in ("pinned", "none"):
        print(f"wheelhouse: TORCH must be pinned or none (got {torch!r})", file=sys.stderr)
        return EXIT_USAGE
    dest.mkdir(parents=True, exist_ok=True)
    _pip("wheel", "--no-deps", "-q", "-w", str(dest), str(REPO))  # the project itself
    for name, spec in SDIST_ONLY.items():
        _pip("wheel", "--no-deps", "-q", "-w", str(dest), f"{name}{spec}")
    target = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for tag in platform_tags(platform):
        target += ["--platform", tag]
    target += ["--find-links", str(dest)]
    (project_wheel,) = sorted(dest.glob("ebmlab-*.whl"))[-1:]
    requirement = f"ebmlab[{extras}] @ {project_wheel.resolve().as_uri()}" if extras else ""
    requirement = requirement or f"ebmlab @ {project_wheel.resolve().as_uri()}"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        _pip(
            "install", "--dry-run", "--ignore-installed", "-q", "--report", str(report),
            "--target", str(Path(tmp) / "t"), "-c", str(REPO / "constraints.txt"),
            *target, requirement,
        )  # fmt: skip
        resolved = json.loads(report.read_text())["install"]
    pins = []
    for item in resolved:
        name, version = item["metadata"]["name"], item["metadata"]["version"]
        if canonical(name) in ("ebmlab", *SDIST_ONLY):
            continue
        if torch == "none" and TORCH_STACK.match(canonical(name)):
            continue
        pins.append(f"{name}==={version}")  # exactly the resolved build (== takes +cpu too)
    _pip("download", "--no-deps", "-q", "-d", str(dest), *target, *pins)
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    print(f"wheelhouse: {len(wheels)} wheels in {dest} for Python {python_version} on {platform}")
    if torch == "none":
        print("wheelhouse: torch, torchvision and their CUDA libraries left out (TORCH=none)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("wheelhouse", help="download/build every wheel into one folder")
    w.add_argument("--dest", type=Path, required=True)
    w.add_argument("--python-version", required=True, help="the target's Python, e.g. 3.11")
    w.add_argument("--platform", required=True, help="e.g. manylinux_2_28_x86_64")
    w.add_argument("--extras", default="", help="e.g. dev (pytest, ruff, cvxpy)")
    w.add_argument("--torch", default="pinned", help="pinned (constraints.txt) | none")
    i = sub.add_parser("install", help="install from a wheelhouse, keeping a fitting torch")
    i.add_argument("--wheels", type=Path, required=True)
    i.add_argument("--extras", default="")
    i.add_argument("--dry-run", action="store_true", help="print the plan and the pip command")
    a = ap.parse_args(argv)
    if a.command == "wheelhouse":
        try:
            return wheelhouse(a.dest, a.python_version, a.platform, a.extras, a.torch)
        except PipFailed as e:
            print(
                f"wheelhouse: `pip {e}` failed (its message is above). A wheel missing for the "
                "platform: torch >= 2.6 has wheels for manylinux_2_28 (glibc 2.28) and newer "
                "only, so PLATFORM=manylinux2014_x86_64 cannot hold it (use "
                "PLATFORM=manylinux_2_28_x86_64, or TORCH=none where the machine has a torch)",
                file=sys.stderr,
            )
            return 1
    return install(a.wheels, a.extras, a.dry_run)


if __name__ == "__main__":
    sys.exit(main())
