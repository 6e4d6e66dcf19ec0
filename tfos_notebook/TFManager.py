"""TensorFlowOnSpark's ``TFManager`` module, by its name: ``start`` makes a feed manager in this
process, for running a node's function off the cluster. Implemented in ``peers/tfmanager.py``."""

from .peers.tfmanager import TFManager, connect, start

__all__ = ["TFManager", "connect", "start"]
