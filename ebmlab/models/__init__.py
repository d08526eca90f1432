"""Energy models. Every model exposes ``log_prob(x) -> Tensor[batch]`` (= -energy)."""
