"""The dependency rule of the README holds (issue 44, item 3): every import of every module under
ebmlab/ (function-local ones included) points down `tasks -> learning -> samplers -> models ->
leaves`, where the leaves are core, metrics, data, utils and plotting (plus the top-level
errors.py and configs.py, which import only each other); nothing below the report imports
`ebmlab.report` or `ebmlab.runs` (run directories, records, sweeps), `ebmlab.runs` never imports
`ebmlab.report` (the report reads what it finds), and nothing but run.py imports `ebmlab.tasks`.

The scan reads the source (ast), so it sees imports that a run would reach only on some path."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ebmlab"

# Height of each layer: a module may import its own layer's package and any lower layer.
LEVELS = {
    "tasks": 4,
    "learning": 3,
    "samplers": 2,
    "models": 1,
    "core": 0,
    "metrics": 0,
    "data": 0,
    "utils": 0,
    "plotting": 0,
    "errors": 0,  # ebmlab/errors.py: ConfigError and the checks, imported everywhere
    "configs": 0,  # ebmlab/configs.py: where the shipped configs are; imports only errors
}
# Above the layers: the entry point, the reporting wing (report: tables, claims, verdicts; runs:
# run directories, records, parking, sweeps) and the test helpers may import any layer (but only
# run.py imports tasks). "__init__" is ebmlab/__init__.py (only __version__): anyone may import it.
TOP = {"run", "report", "runs", "testing", "__init__"}
# Within the top: (importer, imported) groups that must not meet. The report reads the runs that
# ebmlab.runs finds, records and launches; the runs package never reaches back into the report.
APART = {("runs", "report")}

# Known violations left in place, each with its reason: (importer, imported module).
ALLOWED: set[tuple[str, str]] = set()


def _group(module: str) -> str | None:
    """`ebmlab.samplers.ab.adapt` -> "samplers"; None for a module outside ebmlab."""
    parts = module.split(".")
    if parts[0] != "ebmlab":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every ebmlab import in the file, at any depth."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                # `from ebmlab import tasks` / `from ebmlab.report import figures` name modules
                sub = f"{base}.{a.name}"
                is_module = (PACKAGE.parent / Path(*sub.split("."))).is_dir() or (
                    PACKAGE.parent / Path(*sub.split("."))
                ).with_suffix(".py").is_file()
                found.append((node.lineno, sub if is_module else base))
    return sorted({(line, m) for line, m in found if _group(m) is not None})


def violations() -> list[str]:
    """Every import against the rule, as 'path:line: importer -> imported (why)'."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        importer = _module_name(path)
        own = _group(importer)
        for line, imported in _imports(path):
            target = _group(imported)
            height = LEVELS.get(target, 0)
            if (importer, imported) in ALLOWED or target == own:
                continue
            where = f"{path.relative_to(PACKAGE.parent)}:{line}: {importer} -> {imported}"
            if target == "tasks" and importer != "ebmlab.run":
                out.append(f"{where} (only run.py imports tasks)")
            elif (own, target) in APART:
                out.append(f"{where} ({own} never imports {target})")
            elif own in LEVELS and target in TOP - {"__init__"}:
                out.append(f"{where} ({own} is below {target})")
            elif own in LEVELS and height >= LEVELS[own] > 0:
                out.append(f"{where} ({target} is not below {own})")
            elif own in LEVELS and LEVELS[own] == 0 and height > 0:
                out.append(f"{where} (a leaf imports the {target} layer)")
    return out


def test_every_module_is_placed_in_a_layer():
    groups = {
        _group(_module_name(p)) for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts
    }
    assert groups <= set(LEVELS) | TOP, sorted(groups - set(LEVELS) - TOP)


def test_imports_point_down_the_layers():
    found = violations()
    assert not found, "imports against the dependency rule:\n" + "\n".join(found)


def test_the_scan_sees_function_local_and_relative_imports(tmp_path, monkeypatch):
    """The checker itself: an upward import inside a function, and a relative one, are found."""
    pkg = tmp_path / "ebmlab"
    (pkg / "models").mkdir(parents=True)
    (pkg / "report").mkdir()
    (pkg / "runs").mkdir()
    (pkg / "samplers").mkdir()
    for d in (pkg, pkg / "models", pkg / "report", pkg / "runs", pkg / "samplers"):
        (d / "__init__.py").write_text("")
    (pkg / "report" / "runs.py").write_text("")
    (pkg / "samplers" / "gibbs.py").write_text("")
    (pkg / "models" / "rbm.py").write_text(
        "def f():\n    from ebmlab.report.runs import x\n\nfrom ..samplers import gibbs\n"
    )
    (pkg / "runs" / "records.py").write_text("from ebmlab.report.runs import x\n")
    (pkg / "report" / "build.py").write_text("from ebmlab.runs.records import y\n")
    monkeypatch.setitem(globals(), "PACKAGE", pkg)
    found = sorted(violations())
    assert found == [
        "ebmlab/models/rbm.py:2: ebmlab.models.rbm -> ebmlab.report.runs (models is below report)",
        "ebmlab/models/rbm.py:4: ebmlab.models.rbm -> ebmlab.samplers.gibbs"
        " (samplers is not below models)",
        "ebmlab/runs/records.py:1: ebmlab.runs.records -> ebmlab.report.runs"
        " (runs never imports report)",
    ]
