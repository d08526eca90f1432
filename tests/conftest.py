import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def real_data_dir() -> Path:
    """The real datasets: where runs read them (``EBMLAB_DATA_DIR``), else ../shared/data."""
    return Path(os.environ.get("EBMLAB_DATA_DIR") or REPO.parent / "shared" / "data")


SHARED_DATA = real_data_dir()

# One thread: tiny per-step tensor ops are far slower when two threads contend.
torch.set_num_threads(int(os.environ.get("EBMLAB_TEST_THREADS", "1")))


@pytest.fixture
def shared_data() -> Path:
    """The real datasets: ``$EBMLAB_DATA_DIR`` (the variable runs read), else ../shared/data
    beside the repo; skip when neither is there."""
    data = real_data_dir()
    if not data.is_dir():
        pytest.skip(f"real data folder {data} not present (set EBMLAB_DATA_DIR)")
    return data


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


@pytest.fixture
def fashion_mnist_root(tmp_path) -> Path:
    """A data folder holding a tiny FashionMNIST in the official IDX layout (30 train, 20 test
    random images with labels), as ``dataset=fashion_mnist`` reads it."""
    import numpy as np

    from ebmlab.data.idx import write_idx

    d = tmp_path / "FashionMNIST" / "raw"
    d.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for p, n in (("train", 30), ("t10k", 20)):
        write_idx(d / f"{p}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), np.uint8))
        write_idx(d / f"{p}-labels-idx1-ubyte.gz", rng.integers(0, 10, n).astype(np.uint8))
    return tmp_path


@pytest.fixture
def random_rbm():
    """Factory ``random_rbm(v, h, seed)``: conf/model/rbm.yaml at that size with N(0, 1) weights
    and biases drawn from ``seed`` (a target with structure, unlike the near-zero init)."""
    from tests.helpers import from_conf

    def make(v: int = 12, h: int = 5, seed: int = 0):
        m = from_conf("model/rbm", n_visible=v, n_hidden=h)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in (m.W, m.b, m.c):
                p.copy_(torch.randn(p.shape, generator=g))
        return m

    return make


@pytest.fixture
def one_thread():
    """Tests of thousands of tiny tensor ops (AIS, AR(1) recursions, small GRBMs): with 2
    intra-op threads on a loaded 2-core machine each op pays thread hand-off costs (measured
    up to 25x slower). Use with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
