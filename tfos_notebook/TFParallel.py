"""TensorFlowOnSpark's ``TFParallel`` module, by its name: ``run`` runs independent single-node
copies of a function on the executors. Implemented in ``peers/tfparallel.py`` over the runtime."""

from .peers.tfparallel import run

__all__ = ["run"]
