"""ebmlab's Hydra launchers (Hydra loads launcher plugins only from the ``hydra_plugins``
namespace): the submitit launchers of ``hydra/launcher=local|slurm|slurm_cpu``."""
