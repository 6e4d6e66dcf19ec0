"""The Spark ML params of TensorFlowOnSpark's pipeline stages (``pipeline.py``), one mix-in class
per param with its TensorFlowOnSpark setter and getter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.ml.param.shared import Param, Params, TypeConverters

from ..errors import ConfigError
from . import tfcluster


class TFTypeConverters:
    """Spark ML type converters Spark lacks: dictionaries (the input and output mappings)."""

    @staticmethod
    def toDict(value: Any) -> dict:  # noqa: N802  (TensorFlowOnSpark's name)
        if isinstance(value, dict):
            return value
        raise TypeError(f"expected a dict such as {{'column': 'tensor'}}, got {type(value).__name__} {value!r}")


def _accessors(name: str) -> tuple[Callable, Callable]:
    """The ``setX(value)`` (returns the stage, for chaining) and ``getX()`` of the param ``name``."""

    def setter(self, value):
        return self._set(**{name: value})

    def getter(self):
        return self.getOrDefault(name)

    setter.__doc__, getter.__doc__ = f"Set ``{name}``; returns this stage.", f"The value of ``{name}``."
    return setter, getter


def _param(name: str, doc: str, converter: Callable) -> Param:
    return Param(Params._dummy(), name, doc, typeConverter=converter)


class HasBatchSize(Params):
    batch_size = _param("batch_size", "rows per batch", TypeConverters.toInt)
    setBatchSize, getBatchSize = _accessors("batch_size")


class HasClusterSize(Params):
    cluster_size = _param("cluster_size", "nodes in the cluster (ps and evaluator included)", TypeConverters.toInt)
    setClusterSize, getClusterSize = _accessors("cluster_size")


class HasEpochs(Params):
    epochs = _param("epochs", "passes over the training data", TypeConverters.toInt)
    setEpochs, getEpochs = _accessors("epochs")


class HasGraceSecs(Params):
    grace_secs = _param("grace_secs", "seconds ps/evaluator nodes get after the workers finished",
                        TypeConverters.toInt)
    setGraceSecs, getGraceSecs = _accessors("grace_secs")


class HasInputMapping(Params):
    input_mapping = _param("input_mapping", "DataFrame column -> input tensor", TFTypeConverters.toDict)
    setInputMapping, getInputMapping = _accessors("input_mapping")


class HasInputMode(Params):
    input_mode = _param("input_mode", "how data reaches the nodes (only InputMode.SPARK)", TypeConverters.toInt)
    _, getInputMode = _accessors("input_mode")

    def setInputMode(self, value: int):  # noqa: N802
        """Only ``InputMode.SPARK``: a pipeline stage feeds its DataFrame to the nodes."""
        if value != tfcluster.InputMode.SPARK:
            raise ConfigError("a pipeline stage feeds its DataFrame to the nodes: only InputMode.SPARK is supported "
                              "(InputMode.TENSORFLOW was deprecated by TensorFlowOnSpark's pipeline too)")
        return self._set(input_mode=value)


class HasMasterNode(Params):
    master_node = _param("master_node", "job name of the chief ('chief', or None for workers only)",
                         TypeConverters.toString)
    setMasterNode, getMasterNode = _accessors("master_node")


class HasModelDir(Params):
    model_dir = _param("model_dir", "where checkpoints are saved", TypeConverters.toString)
    setModelDir, getModelDir = _accessors("model_dir")


class HasNumPS(Params):
    num_ps = _param("num_ps", "parameter-server nodes", TypeConverters.toInt)
    driver_ps_nodes = _param("driver_ps_nodes", "run the ps nodes on the driver (refused)", TypeConverters.toBoolean)
    setNumPS, getNumPS = _accessors("num_ps")
    setDriverPSNodes, getDriverPSNodes = _accessors("driver_ps_nodes")


class HasOutputMapping(Params):
    output_mapping = _param("output_mapping", "output tensor -> DataFrame column", TFTypeConverters.toDict)
    setOutputMapping, getOutputMapping = _accessors("output_mapping")


class HasProtocol(Params):
    protocol = _param("protocol", "TensorFlow's network protocol (grpc)", TypeConverters.toString)
    setProtocol, getProtocol = _accessors("protocol")


class HasReaders(Params):
    readers = _param("readers", "reader threads (for the function's own use)", TypeConverters.toInt)
    setReaders, getReaders = _accessors("readers")


class HasSteps(Params):
    steps = _param("steps", "most training steps (for the function's own use)", TypeConverters.toInt)
    setSteps, getSteps = _accessors("steps")


class HasTensorboard(Params):
    tensorboard = _param("tensorboard", "start a TensorBoard on the driver", TypeConverters.toBoolean)
    setTensorboard, getTensorboard = _accessors("tensorboard")


class HasTFRecordDir(Params):
    tfrecord_dir = _param("tfrecord_dir", "where a DataFrame is saved as TFRecords (for the function's own use)",
                          TypeConverters.toString)
    setTFRecordDir, getTFRecordDir = _accessors("tfrecord_dir")


class HasExportDir(Params):
    export_dir = _param("export_dir", "where the SavedModel is exported", TypeConverters.toString)
    setExportDir, getExportDir = _accessors("export_dir")


class HasSignatureDefKey(Params):
    signature_def_key = _param("signature_def_key", "the SavedModel signature to call (default serving_default)",
                               TypeConverters.toString)
    setSignatureDefKey, getSignatureDefKey = _accessors("signature_def_key")


class HasTagSet(Params):
    tag_set = _param("tag_set", "comma-separated tags of the SavedModel's meta graph (serve)",
                     TypeConverters.toString)
    setTagSet, getTagSet = _accessors("tag_set")
