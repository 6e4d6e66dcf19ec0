"""Programs written for TensorFlowOnSpark (``tfos_programs.py``, in the shape of its Keras MNIST
examples) run with only their import changed, on MNIST-format files a helper writes from real
digits: the pipeline program (``TFEstimator`` -> ``TFModel``) and the parallel inference program
(``TFParallel``) on TensorFlowOnSpark's layout (2 executors x 1 core, in-stage feeding), the
InputMode.SPARK program on local[4] (fed over the network) and the InputMode.TENSORFLOW program
reading TFRecords on local[2]. The drivers below are the examples' ``__main__`` blocks, with
arguments instead of a command line."""

from __future__ import annotations

import argparse
import glob
import os
import tempfile

import pytest
from pyspark.sql.functions import udf
from pyspark.sql.types import IntegerType

from tfos_notebook import TFCluster, TFParallel
from tfos_notebook.examples.mnist_files import write_mnist_files
from tfos_notebook.pipeline import TFEstimator, TFModel

from . import tfos_programs

pytestmark = pytest.mark.slow


def parse(ln):
    vec = [int(x) for x in ln.split(",")]
    return (vec[1:], vec[0])


def export_leftovers() -> set[str]:
    """The temporary directories of non-chief exports (removed as soon as written)."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "tfos-export-*")))


ACCURACY = 0.5  # what a program's exported model must get right of the 297 test images


def program_args(tmp_path, **kw) -> argparse.Namespace:
    defaults = {"batch_size": 32, "cluster_size": 2, "epochs": 2, "buffer_size": 1000, "rows": 1500,
                "model_dir": str(tmp_path / "mnist_model"), "export_dir": str(tmp_path / "mnist_export"),
                "output": str(tmp_path / "predictions"), "tensorboard": False}
    return argparse.Namespace(**{**defaults, **kw})


@pytest.mark.cluster
def test_pipeline_and_parallel_inference_programs_on_the_tfos_layout(standalone, tmp_path):
    spark, sc = standalone, standalone.sparkContext
    files = write_mnist_files(spark, str(tmp_path / "data"), formats=("csv", "tfr"))
    args = program_args(tmp_path, images_labels=files["csv/train"], format="csv", mode="train")
    before = export_leftovers()

    # mnist_pipeline.py --mode train
    images_labels = sc.textFile(args.images_labels).map(parse)
    df = spark.createDataFrame(images_labels, ["image", "label"])
    estimator = TFEstimator(tfos_programs.spark_main, args) \
        .setInputMapping({"image": "image", "label": "label"}) \
        .setModelDir(args.model_dir) \
        .setExportDir(args.export_dir) \
        .setClusterSize(args.cluster_size) \
        .setTensorboard(args.tensorboard) \
        .setEpochs(args.epochs) \
        .setBatchSize(args.batch_size) \
        .setGraceSecs(60)
    estimator.fit(df)
    assert os.path.exists(os.path.join(args.export_dir, "saved_model.pb"))
    assert glob.glob(os.path.join(args.model_dir, "weights-0002*"))
    assert export_leftovers() == before  # the worker's part of the export was removed

    # mnist_pipeline.py --mode inference
    test_df = spark.createDataFrame(sc.textFile(files["csv/test"]).map(parse), ["image", "label"])
    model = TFModel(args) \
        .setInputMapping({"image": "conv2d_input"}) \
        .setOutputMapping({"dense_1": "prediction"}) \
        .setSignatureDefKey("serving_default") \
        .setExportDir(args.export_dir) \
        .setBatchSize(args.batch_size)

    def argmax_fn(values):
        return max(range(len(values)), key=lambda i: values[i])

    argmax = udf(argmax_fn, IntegerType())
    preds = model.transform(test_df).withColumn("argmax", argmax("prediction"))
    assert preds.columns == ["prediction", "argmax"]
    predicted = [r.argmax for r in preds.collect()]
    labels = [r.label for r in test_df.collect()]
    assert len(predicted) == len(labels) == 297
    # Each prediction beside its own row's label, from a model that learned: chance is 0.1, and 2
    # epochs of 1,500 rows from a random start land 0.73-0.94 on this machine (0.8 failed 2 runs of 11).
    assert sum(p == y for p, y in zip(predicted, labels, strict=True)) / len(labels) > ACCURACY

    # mnist_inference.py, on TFRecords of the test set
    parallel_args = argparse.Namespace(cluster_size=2, images_labels=files["tfr/test"], export_dir=args.export_dir,
                                       output=str(tmp_path / "parallel"))
    TFParallel.run(sc, tfos_programs.parallel_inference, parallel_args, parallel_args.cluster_size)
    lines = [ln.split() for part in sorted(glob.glob(f"{parallel_args.output}/part-*")) for ln in open(part)]
    assert len(lines) == 297 and sum(a == b for a, b in lines) / len(lines) > ACCURACY


def test_spark_fed_program_trains_and_exports_over_the_network(local_spark4, tmp_path):
    sc = local_spark4.sparkContext
    files = write_mnist_files(local_spark4, str(tmp_path / "data"), formats=("csv",))
    args = program_args(tmp_path, images_labels=files["csv/train"])
    before = export_leftovers()

    # mnist_spark.py
    images_labels = sc.textFile(args.images_labels).map(parse)
    cluster = TFCluster.run(sc, tfos_programs.spark_main, args, args.cluster_size, num_ps=0,
                            tensorboard=args.tensorboard, input_mode=TFCluster.InputMode.SPARK, master_node="chief")
    assert not cluster.in_stage  # local[4]: slots to spare, fed by ordinary Spark tasks
    cluster.train(images_labels, args.epochs)
    cluster.shutdown()
    assert os.path.exists(os.path.join(args.export_dir, "saved_model.pb"))
    assert export_leftovers() == before


def test_tensorflow_mode_program_reads_tfrecord_files_and_exports_relative_to_the_driver(local_spark, tmp_path,
                                                                                         monkeypatch):
    files = write_mnist_files(local_spark, str(tmp_path / "data"), formats=("tfr",), one_hot=True)
    args = program_args(tmp_path, images_labels=files["tfr/train"] + "/part-r-*", epochs=1, rows=1200,
                        export_dir="mnist_export")  # relative: to the driver's working directory, as there
    monkeypatch.chdir(tmp_path)
    before = export_leftovers()

    # mnist_tf_ds.py
    cluster = TFCluster.run(local_spark.sparkContext, tfos_programs.tfrecord_main, args, args.cluster_size, num_ps=0,
                            tensorboard=args.tensorboard, input_mode=TFCluster.InputMode.TENSORFLOW,
                            master_node="chief")
    cluster.shutdown()
    assert os.path.exists(tmp_path / "mnist_export" / "saved_model.pb")
    assert export_leftovers() == before
