"""Fixtures of the report tests."""

import pytest


@pytest.fixture
def root(tmp_path):
    """A project's ``outputs/`` folder (run directories); the committed records of its runs
    sit beside it, in ``tmp_path/records``."""
    return tmp_path / "outputs"
