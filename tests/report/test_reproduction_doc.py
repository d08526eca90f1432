"""docs/reproduction.md and its pages (docs/reproduction/<paper>.md) are exactly what the
committed run records give on a clean checkout: every verdict there is recomputable."""

import io
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from ebmlab.report.claims import papers
from ebmlab.report.reproduce import reproduce

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
STAMP = re.compile(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d")
ABSOLUTE = re.compile(r"(?<![\w.:/])/(?:home|root|tmp|work|Users|scratch|mnt|var)/")


def _committed_records(dest: Path) -> None:
    """Extract records/ as committed at HEAD (not the working tree's later archives)."""
    try:
        tar = subprocess.run(
            ["git", "archive", "HEAD", "records"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs a git checkout to read the committed records")
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(dest, filter="data")


def _same(text: str) -> str:
    return STAMP.sub("Generated <time>", text)


def test_the_reproduction_docs_regenerate_from_the_committed_records(tmp_path, capsys):
    _committed_records(tmp_path)
    into = tmp_path / "docs" / "reproduction.md"
    code = reproduce(
        "all",
        "paper",
        tmp_path / "outputs",
        tmp_path / "out",
        False,
        [],
        [],
        into=into,
        records_only=True,
    )
    assert code == 0
    pages = [Path("reproduction.md")] + [Path("reproduction") / f"{p}.md" for p in papers()]
    for page in pages:
        made, kept = (tmp_path / "docs" / page).read_text(), (DOCS / page).read_text()
        assert _same(made) == _same(kept), (
            f"docs/{page} is not what the committed records give: regenerate it with "
            "`python -m ebmlab.report reproduce all --scale paper --into docs/reproduction.md` "
            "(after committing the records it reads)"
        )
        assert not ABSOLUTE.search(kept), f"docs/{page} names a machine path"
    index = (DOCS / "reproduction.md").read_text()
    for p in papers():  # one headline table per paper, linking to its page
        assert f"](reproduction/{p}.md)" in index
    assert index.count("| headline claim | source | verdict |") == len(papers())
    assert "| paper | reproduced | not reproduced | inconclusive | not run |" in index
