"""scripts/investigations/acs_rbm_ais_reference.py: a bad --chains is refused before any model
is loaded or AIS run (the run's 100 chains in 4 groups: multiples of 25, at least 50)."""

import pytest

from tests.investigations.script import load_script

RUN = {"config": {"task": {"ais_groups": 4, "ais_chains": 100}}, "run_dir": "unused"}


@pytest.mark.parametrize("chains", [25, 30, 110])
def test_chains_not_a_multiple_of_the_group_size_is_refused_first(chains):
    evaluate = load_script("acs_rbm_ais_reference").evaluate
    with pytest.raises(SystemExit, match="multiple of the run's 25 chains per group"):
        evaluate(RUN, None, 0, estimator="valid", chains=chains)


def test_a_valid_chain_count_gets_past_the_check():
    evaluate = load_script("acs_rbm_ais_reference").evaluate
    with pytest.raises(KeyError, match="model"):  # the next thing it needs: the run's model
        evaluate(RUN, None, 0, estimator="valid", chains=400)
