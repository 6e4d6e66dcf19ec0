"""TensorFlowOnSpark's ``TFCluster`` module, by its name: ``run`` starts a cluster of nodes and
returns a :class:`TFCluster` (``train``, ``inference``, ``shutdown``); ``InputMode`` says how
data reaches them. Implemented in ``peers/tfcluster.py`` over the runtime."""

from .peers.tfcluster import InputMode, TFCluster, run

__all__ = ["InputMode", "TFCluster", "run"]
