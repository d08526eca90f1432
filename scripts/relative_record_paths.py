"""One-off (idempotent): rewrite the absolute paths of the machines that made the committed
records (``records/**/.hydra/hydra.yaml`` and ``status.json``) as paths relative to the
project, which is what the record writers store now (ebmlab/runs/records.py,
ebmlab/utils/rundir.py).

    python scripts/relative_record_paths.py [records]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# an absolute path's prefix up to the project folder, i.e. up to its outputs/ or conf/
PROJECT_PREFIX = re.compile(r"(?<![\w.\-/])/(?:[\w.\-]+/)+?(?=(?:outputs|conf)(?:/|\b))")
CWD_LINE = re.compile(r"^(\s*cwd: )/\S*$", re.M)  # hydra.runtime.cwd: the project itself


def relative(text: str) -> str:
    return PROJECT_PREFIX.sub("", CWD_LINE.sub(r"\1.", text))


def main(records: Path) -> int:
    changed = 0
    for path in sorted(records.rglob("*")):
        if path.name not in ("hydra.yaml", "status.json") or not path.is_file():
            continue
        text = path.read_text()
        new = relative(text)
        if new != text:
            path.write_text(new)
            changed += 1
            print(f"rewritten: {path}")
    print(f"{changed} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "records")))
