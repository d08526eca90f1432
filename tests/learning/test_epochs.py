"""run_epoch: one pass of ``learner.step`` gives the same updates and the same epoch averages as
a host-side loop over the epoch (the GRBM tasks' numbers before they ran on the core loop)."""

import torch

from ebmlab.learning.epochs import run_epoch
from tests.helpers import from_conf


def _parts():
    m = from_conf("model/grbm", n_visible=2, n_hidden=5)
    m.reset_parameters(torch.Generator().manual_seed(0))
    s = from_conf("sampler/grbm_gibbs_langevin", step_size=0.1, n_inner=3, adjust_step=0)
    kw = {"cd_steps": 4, "batch_size": 40, "n_epochs": 3, "mh_off_epochs": 1}
    return m, s, from_conf("learner/grbm_cd", **kw), torch.Generator().manual_seed(7)


def test_run_epoch_equals_a_host_side_epoch_loop():
    x = torch.randn(130, 2, generator=torch.Generator().manual_seed(3)) * 3
    m, s, learner, g = _parts()
    learner.setup(m, x, g, s, lambda b, _: b / 2)
    ref_m, ref_s, ref, ref_g = _parts()
    for e in range(3):
        got = run_epoch(learner, m, g)
        order, sums = torch.randperm(130, generator=ref_g), {}
        for i in range(3):
            batch = x[order[40 * i : 40 * (i + 1)]] / 2
            for k, v in ref.cd_update(ref_m, batch, ref_s, ref_g, e / 3, e >= 1).items():
                sums[k] = sums.get(k, 0.0) + float(v)
        want = {k: v / 3 for k, v in sums.items()}
        assert learner.epoch == e + 1 and learner.n_updates == 3 * (e + 1)
        assert {k: float(v) for k, v in got.items()} == want  # exact: same sums, same order
        assert got["grad_norm"].dtype == torch.float64 and isinstance(got["lr"], float)
    for a, b in zip(m.parameters(), ref_m.parameters()):
        assert torch.equal(a, b)
