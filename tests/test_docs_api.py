"""docs/api.md runs: its ```python blocks are executed in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, re.M | re.S)


def test_page_has_code():
    blocks = python_blocks(API_PAGE.read_text())
    assert len(blocks) >= 5 and any("assert_exact" in b for b in blocks)


@pytest.mark.usefixtures("one_thread")
def test_api_page_code_runs(capsys):
    namespace: dict = {"__name__": "docs_api"}
    for i, block in enumerate(python_blocks(API_PAGE.read_text())):
        try:
            exec(compile(block, f"docs/api.md block {i + 1}", "exec"), namespace)
        except Exception as e:  # noqa: BLE001 - name the block that failed
            raise AssertionError(f"docs/api.md block {i + 1} failed: {e!r}\n{block}") from e
    out = capsys.readouterr().out
    assert "ising_lattice" not in out and "LatticeIsing 25 DMALA 0.4" in out
    assert "TV " in out and "iid noise floor" in out


@pytest.mark.usefixtures("one_thread")
def test_readme_code_runs():
    """The README's sampler snippet builds what it says, with the YAML's values."""
    readme = API_PAGE.parents[1] / "README.md"
    (block,) = python_blocks(readme.read_text())
    namespace: dict = {"__name__": "readme"}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["model"].dim == 25 and namespace["sampler"].step_size == 0.4
