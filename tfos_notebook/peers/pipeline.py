"""Spark ML Pipeline stages with TensorFlowOnSpark's names (``tensorflowonspark.pipeline``).

    estimator = TFEstimator(main_fun, args).setInputMapping({"image": "image", "label": "label"}) \\
        .setClusterSize(2).setEpochs(1).setExportDir("/shared/export")
    model = estimator.fit(train_df)            # a cluster of 2 nodes, fed train_df (InputMode.SPARK)
    model.setInputMapping({"image": "conv2d_input"}).setOutputMapping({"dense_1": "prediction"})
    preds = model.transform(test_df)           # every executor runs the exported SavedModel

``TFEstimator.fit`` runs ``main_fun(args, ctx)`` on a cluster through ``TFCluster`` (so with
in-stage or network feeding, authenticated, never stopping the SparkContext); the function reads
the DataFrame's mapped columns with ``TFNode.DataFeed(ctx.mgr, input_mapping=args.input_mapping)``
and exports with ``compat.export_saved_model``. ``TFModel.transform`` loads the SavedModel in each
Spark task (once per Python worker) and answers batch by batch (see ``savedmodel.py``). The
``args`` of both, merged with their Spark ML params (``params.py``), reach the function as one
``Namespace``.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyspark.ml import Estimator, Model
from pyspark.ml.param.shared import Params

from ..errors import ConfigError
from . import tfcluster
from .params import (
    HasBatchSize,
    HasClusterSize,
    HasEpochs,
    HasExportDir,
    HasGraceSecs,
    HasInputMapping,
    HasInputMode,
    HasMasterNode,
    HasModelDir,
    HasNumPS,
    HasOutputMapping,
    HasProtocol,
    HasReaders,
    HasSignatureDefKey,
    HasSteps,
    HasTagSet,
    HasTensorboard,
    HasTFRecordDir,
    TFTypeConverters,
)
from .savedmodel import SavedModelPredictor, output_schema, single_node_env

__all__ = ["HasBatchSize", "HasClusterSize", "HasEpochs", "HasExportDir", "HasGraceSecs", "HasInputMapping",
           "HasInputMode", "HasMasterNode", "HasModelDir", "HasNumPS", "HasOutputMapping", "HasProtocol",
           "HasReaders", "HasSignatureDefKey", "HasSteps", "HasTFRecordDir", "HasTagSet", "HasTensorboard",
           "Namespace", "TFEstimator", "TFModel", "TFParams", "TFTypeConverters", "get_meta_graph_def",
           "single_node_env", "yield_batch"]


class Namespace:
    """Attribute access to a dict's items, an ``argparse.Namespace``'s or another Namespace's; a
    list is kept as command-line ``argv``. Iterating gives the names (or the argv items), so
    ``"name" in ns`` tells whether it is set; two are equal when their items are."""

    argv: list[str] | None = None

    def __init__(self, d: dict | list | argparse.Namespace | Namespace) -> None:
        if isinstance(d, list):
            self.argv = d
        elif isinstance(d, dict):
            self.__dict__.update(d)
        elif isinstance(d, (argparse.Namespace, Namespace)):
            self.__dict__.update(vars(d))
        else:
            raise ConfigError(f"Namespace takes a dict, a list (argv), an argparse.Namespace or a Namespace, "
                              f"got {type(d).__name__}")

    def __iter__(self) -> Iterator:
        return iter(self.argv if self.argv else list(self.__dict__))

    def __eq__(self, other: object) -> bool:
        if self.argv:
            return self.argv == other
        return isinstance(other, (Namespace, argparse.Namespace)) and vars(self) == vars(other)

    __hash__ = None  # mutable, like argparse.Namespace

    def __repr__(self) -> str:
        if self.argv:
            return repr(self.argv)
        return f"Namespace({', '.join(f'{k}={v!r}' for k, v in sorted(self.__dict__.items()))})"


class TFParams(Params):
    """Mixed into a stage: ``args`` (a Namespace) merged with the stage's Spark ML params."""

    args: Namespace | None = None

    def merge_args_params(self) -> Namespace:
        """A copy of ``args`` with every param that has a value or a default set on it by name."""
        merged = copy.copy(self.args) if self.args is not None else Namespace({})
        for param in self.params:
            if self.isDefined(param):
                setattr(merged, param.name, self.getOrDefault(param))
        return merged


class TFEstimator(Estimator, TFParams, HasInputMapping, HasClusterSize, HasNumPS, HasInputMode, HasMasterNode,
                  HasProtocol, HasGraceSecs, HasTensorboard, HasModelDir, HasExportDir, HasTFRecordDir,
                  HasBatchSize, HasEpochs, HasReaders, HasSteps):
    """Trains ``train_fn(args, ctx)`` on a cluster of ``cluster_size`` nodes fed the DataFrame's
    ``input_mapping`` columns (sorted by name), and returns a :class:`TFModel` with the same args
    and params.

    Args:
        train_fn: the function every node runs; it reads the rows with
            ``TFNode.DataFeed(ctx.mgr, input_mapping=args.input_mapping)`` and exports the model
            with ``compat.export_saved_model(model, args.export_dir, ctx.job_name == "chief")``.
        tf_args: a dict, argparse Namespace or argv list; merged with the params (``args.epochs``...).
        export_fn: TensorFlow 1's export function: refused (``ConfigError``).
    """

    def __init__(self, train_fn: Callable[[Any, Any], Any], tf_args: Any, export_fn: Any = None) -> None:
        super().__init__()
        if export_fn is not None:
            raise ConfigError("TFEstimator(export_fn=...) is TensorFlow 1 API: export from train_fn with "
                              "compat.export_saved_model(model, args.export_dir, ctx.job_name == 'chief'), called on "
                              "every node")
        self.train_fn = train_fn
        self.args = Namespace(tf_args)
        self._setDefault(input_mapping={}, cluster_size=1, num_ps=0, driver_ps_nodes=False,
                         input_mode=tfcluster.InputMode.SPARK, master_node="chief", protocol="grpc",
                         tensorboard=False, model_dir=None, export_dir=None, tfrecord_dir=None, batch_size=100,
                         epochs=1, readers=1, steps=1000, grace_secs=30)

    def _fit(self, dataset: Any) -> TFModel:
        args = self.merge_args_params()
        columns = sorted(self.getInputMapping())
        if not columns:
            raise ConfigError("TFEstimator needs setInputMapping({column: tensor}) naming the columns to feed")
        cluster = tfcluster.run(dataset.sparkSession, self.train_fn, self.args.argv or args, args.cluster_size,
                                args.num_ps, args.tensorboard, tfcluster.InputMode.SPARK, master_node=args.master_node,
                                driver_ps_nodes=args.driver_ps_nodes)
        try:
            cluster.train(dataset.select(columns), args.epochs)
        except BaseException:
            cluster.run_handle.stop()
            raise
        cluster.shutdown(grace_secs=self.getGraceSecs())
        return self._copyValues(TFModel(self.args))


class TFModel(Model, TFParams, HasInputMapping, HasOutputMapping, HasBatchSize, HasModelDir, HasExportDir,
              HasSignatureDefKey, HasTagSet):
    """Predicts with the SavedModel in ``export_dir``: each Spark task feeds the ``input_mapping``
    columns (sorted by name) to the signature's inputs in batches of ``batch_size`` and returns a
    DataFrame of the ``output_mapping`` columns (sorted by tensor name), one row per input row.
    Flat arrays are reshaped to the signature's input shapes; values come back as Spark's
    double, long, boolean, string or binary (arrays of them for tensors of more dimensions).

    Args:
        tf_args: a dict, argparse Namespace or argv list, merged with the params.
    """

    def __init__(self, tf_args: Any) -> None:
        super().__init__()
        self.args = Namespace(tf_args)
        self._setDefault(input_mapping={}, output_mapping={}, batch_size=100, model_dir=None, export_dir=None,
                         signature_def_key=None, tag_set=None)

    def _transform(self, dataset: Any) -> Any:
        args = self.merge_args_params()
        if not args.export_dir:
            raise ConfigError("TFModel needs setExportDir(path) naming the SavedModel to predict with")
        if not args.input_mapping or not args.output_mapping:
            raise ConfigError("TFModel needs setInputMapping({column: input tensor}) and "
                              "setOutputMapping({output tensor: column})")
        predictor = SavedModelPredictor(args, self.args.argv or args)
        schema = output_schema(dataset.sparkSession, predictor)
        return dataset.select(sorted(args.input_mapping)).mapInArrow(predictor, schema)


def yield_batch(iterable: Iterable, batch_size: int, num_tensors: int = 1) -> Iterator[list[list]]:
    """Batches of a partition's rows as ``num_tensors`` lists (one per column), each at most
    ``batch_size`` long; a None row ends the partition."""
    columns: list[list] = [[] for _ in range(num_tensors)]
    for row in iterable:
        if row is None:
            break
        for i in range(num_tensors):
            columns[i].append(row[i])
        if len(columns[0]) >= batch_size:
            yield columns
            columns = [[] for _ in range(num_tensors)]
    if columns[0]:
        yield columns


def get_meta_graph_def(saved_model_dir: str, tag_set: str) -> Any:
    """TensorFlow 1's meta graph reader: refused, as in TensorFlowOnSpark 2.

    Raises:
        ConfigError: always; TensorFlow 2 reads signatures with ``tf.saved_model.load(dir).signatures``.
    """
    raise ConfigError("get_meta_graph_def reads TensorFlow 1 meta graphs: load the model with "
                      "tf.saved_model.load(saved_model_dir, tags) and use its .signatures")
