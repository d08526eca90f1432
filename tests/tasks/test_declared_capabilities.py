"""Tasks read what samplers and learners declare, never their classes (issue 44): no task calls
isinstance/issubclass with a class imported from ebmlab.samplers or ebmlab.learning."""

from __future__ import annotations

import ast
from pathlib import Path

from ebmlab.samplers.grbm import GRBMGibbs, GRBMGibbsLangevin, GRBMLangevin

TASKS = Path(__file__).resolve().parents[2] / "ebmlab" / "tasks"


def _sniffs(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    part_classes = set()  # names imported from the sampler and learner layers
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("ebmlab.samplers", "ebmlab.learning")
        ):
            part_classes |= {a.asname or a.name for a in node.names}
    for node in tree.body:  # module constants made of them (_ANNEALABLE = (A, B))
        if isinstance(node, ast.Assign):
            if {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & part_classes:
                part_classes |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
            "isinstance",
            "issubclass",
        ):
            named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if named & part_classes:
                found.append(f"{path.name}:{node.lineno} {sorted(named & part_classes)}")
    return found


def test_no_task_sniffs_the_class_of_a_sampler_or_learner():
    found = [s for f in sorted(TASKS.glob("*.py")) for s in _sniffs(f)]
    assert found == []


def test_the_scan_sees_a_class_sniff(tmp_path):
    f = tmp_path / "t.py"
    f.write_text(
        "from ebmlab.samplers.acs import ACS\n\ndef f(s):\n    return isinstance(s, ACS)\n"
    )
    assert _sniffs(f) == ["t.py:4 ['ACS']"]


def test_grbm_samplers_declare_whether_their_step_size_anneals():
    assert GRBMLangevin.anneals_step_size and GRBMGibbsLangevin.anneals_step_size
    assert not GRBMGibbs.anneals_step_size
