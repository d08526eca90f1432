"""The exactness harness lives in the package as :mod:`ebmlab.testing` (so users can test their
own samplers); the tests that import it from here keep working."""

from ebmlab.testing import *  # noqa: F401,F403
from ebmlab.testing import _n_values  # noqa: F401
