"""The one guarded reader of the JSON files ebmlab writes (``run_config.json``, ``results.json``,
``status.json``, ``progress.json``, benchmark JSONs, ...): a truncated or hand-damaged file
is a :class:`CorruptFileError` naming the file and what to do, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

FRESH_HINT = "pass fresh=true to rerun it from scratch, or delete the file"


class CorruptFileError(RuntimeError):
    """A file ebmlab wrote cannot be read back (truncated, hand-edited, wrong shape)."""


def read_json(path: Path, what: str = "", fix: str = FRESH_HINT, kind: type | None = dict):
    """The parsed content of ``path``. ``what`` says what the file is (``"the run's results"``)
    and ``fix`` what to do about a damaged one; ``kind`` is the type the top level must have
    (None: any). Raises FileNotFoundError when the file is absent, CorruptFileError when it
    cannot be parsed."""
    path = Path(path)
    text = path.read_text(errors="replace")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise corrupt(path, what, f"it is not valid JSON ({e})", fix) from None
    if kind is not None and not isinstance(data, kind):
        raise corrupt(path, what, f"it holds a {type(data).__name__}, not a {kind.__name__}", fix)
    return data


def corrupt(path: Path, what: str, problem: str, fix: str = FRESH_HINT) -> CorruptFileError:
    """The error for a damaged file: ``<path> (<what>) is damaged: <problem>; <fix>``."""
    label = f" ({what})" if what else ""
    return CorruptFileError(f"{path}{label} is damaged: {problem}; {fix}")


def field(data: dict, key: str, path: Path, what: str = "", fix: str = FRESH_HINT):
    """``data[key]``, or a CorruptFileError naming the file when the key is missing."""
    if key not in data:
        raise corrupt(path, what, f"it has no {key!r} entry", fix)
    return data[key]
