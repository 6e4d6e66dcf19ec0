"""TensorFlowOnSpark's ``pipeline`` module, by its name: the Spark ML stages ``TFEstimator`` and
``TFModel``, their params (``Has*``, ``TFParams``), ``Namespace`` and helpers. Implemented in
``peers/pipeline.py`` and ``peers/savedmodel.py``; importing it imports pyspark.ml."""

from .peers.pipeline import *  # noqa: F403  (the module's whole public API, listed in its __all__)
from .peers.pipeline import __all__  # noqa: F401
