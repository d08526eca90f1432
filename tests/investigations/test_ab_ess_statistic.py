"""scripts/investigations/ab_ess_statistic.py drives the sampler_ess task's own build and step:
its Hamming-distance ESS_n is the task's ``ess_n`` for the same config and seed, so its other
statistics are measured on the very chains the tables measure."""

import pytest

from tests.helpers import run_cli
from tests.investigations.script import load_script

pytestmark = pytest.mark.usefixtures("one_thread")


def test_hamming_ess_matches_the_task(tmp_path):
    script = load_script("ab_ess_statistic")
    rec = script.run_one("rotated_medium", "dmala", chains=4, burn_in=100, steps=200, seed=0)
    args = [
        "experiment=ab/tables1to5_ess",
        "scale=paper",
        "ab_target=rotated_medium",
        "sampler=dmala",
        "seed=0",
        "task.n_chains=4",
        "task.burn_in=100",
        "run.n_steps=300",
        "device=cpu",  # the script drives the task on the CPU: the same chains only there
    ]
    task = run_cli(args, tmp_path / "run").results
    assert rec["ess_n"]["hamming"] == pytest.approx(task["ess_n"], rel=1e-9)
    assert rec["hamming_mean"] == pytest.approx(task["hamming_mean"], rel=1e-6)
    assert rec["queries"] == 200
    assert all(v > 0 for v in rec["ess_n"].values())
