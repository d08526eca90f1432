"""Energy models. Every model exposes ``log_prob(x) -> Tensor[batch]`` (= -energy)."""


def make(name: str, **overrides):
    """The model ``conf/model/<name>.yaml`` with its YAML values as the defaults and
    ``overrides`` replacing any of them; a size the YAML takes from the dataset
    (``dim: ${dataset.dim}``) must be given: ``make("ising", dim=25)``."""
    from ebmlab.configs import make as make_option

    return make_option("model", name, **overrides)
