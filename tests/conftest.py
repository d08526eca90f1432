import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("EBMLAB_SHARED_DATA", REPO.parent / "shared" / "data"))

# One thread: tiny per-step tensor ops are far slower when two threads contend.
torch.set_num_threads(int(os.environ.get("EBMLAB_TEST_THREADS", "1")))


@pytest.fixture
def shared_data() -> Path:
    """Real dataset copies beside the repo (../shared/data); skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} not present")
    return SHARED_DATA


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)
