"""One clear error for a data file that exists but cannot be read (corrupt or truncated)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ebmlab.errors import ConfigError


class DataFileError(ConfigError):
    """A dataset file is present but unreadable; names the file, the problem and the cure."""

    def __init__(self, paths: Sequence[Path], problem: str, how: str):
        names = " / ".join(str(p) for p in paths)
        super().__init__(
            "dataset",
            f"cannot read {names}: {problem}. The file is corrupt or truncated; replace it "
            f"with a good copy ({how}), e.g. delete it and download it again",
        )


@contextmanager
def reading(paths: Sequence[Path], how: str) -> Iterator[None]:
    """Turn any failure while parsing ``paths`` into a :class:`DataFileError`.

    Configuration errors and missing files keep their own messages."""
    try:
        yield
    except (ConfigError, FileNotFoundError):
        raise
    except Exception as e:  # noqa: BLE001 - every parser failure means a bad file
        text = str(e).splitlines()[0] if str(e) else ""
        raise DataFileError(list(paths), f"{type(e).__name__}: {text[:200]}", how) from None
