"""TensorFlowOnSpark's modules by their names, without Spark: import paths, ``hdfs_path`` on any
object with ``defaultFS`` / ``working_dir``, ``DataFeed`` over a manager in this process,
``Namespace`` and param merging of the pipeline stages, and the TensorFlow 1 calls refused."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys

import pytest

from tfos_notebook import ConfigError, TFManager, TFNode
from tfos_notebook.pipeline import (
    HasBatchSize,
    HasSteps,
    Namespace,
    TFEstimator,
    TFModel,
    TFParams,
    yield_batch,
)


def test_tensorflowonspark_import_lines_work_and_import_tfos_notebook_stays_light():
    code = ("import sys, tfos_notebook\n"
            "heavy = [m for m in ('tensorflow', 'pyspark', 'numpy', 'pyarrow') if m in sys.modules]\n"
            "from tfos_notebook import compat, dfutil, TFCluster, TFNode, TFParallel, TFManager\n"
            "from tfos_notebook.pipeline import TFEstimator, TFModel, Namespace, HasBatchSize\n"
            "import tfos_notebook.TFCluster as module\n"
            "print(heavy, 'tensorflow' in sys.modules, module is TFCluster, TFCluster.InputMode.SPARK,\n"
            "      callable(TFCluster.run), callable(compat.export_saved_model), callable(dfutil.loadTFRecords))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False", "True", "1", "True", "True", "True"]


@pytest.mark.parametrize("fs", ["file://", "hdfs://", "viewfs://"])
def test_hdfs_path_resolves_against_any_object_with_default_fs_and_working_dir(fs):
    cwd, user = os.getcwd(), getpass.getuser()
    ctx = type("Ctx", (), {"defaultFS": fs, "working_dir": cwd})
    assert TFNode.hdfs_path(ctx, "hdfs://nn/a/b") == "hdfs://nn/a/b"
    assert TFNode.hdfs_path(ctx, "viewfs://nn/a/b") == "viewfs://nn/a/b"
    assert TFNode.hdfs_path(ctx, "file://a/b") == "file://a/b"
    assert TFNode.hdfs_path(ctx, "/a/b") == f"{fs}/a/b"
    relative = f"file://{cwd}/a/b" if fs == "file://" else f"{fs}/user/{user}/a/b"
    assert TFNode.hdfs_path(ctx, "a/b") == relative


def test_hdfs_path_keeps_a_namenode_and_drops_one_trailing_slash():
    ctx = type("Ctx", (), {"defaultFS": "hdfs://nn:8020/", "working_dir": "/home/me"})
    assert TFNode.hdfs_path(ctx, "/data") == "hdfs://nn:8020/data"
    assert TFNode.hdfs_path(ctx, "data") == f"hdfs://nn:8020/user/{getpass.getuser()}/data"


def test_datafeed_reads_a_local_manager_until_the_end_marker():
    mgr = TFManager.start(b"key", ["input", "output"], "local")
    for i in range(10):
        mgr.get_queue("input").put(i)
    mgr.get_queue("input").put(None)
    feed = TFNode.DataFeed(mgr)
    assert feed.next_batch(2) == [0, 1] and not feed.should_stop()
    assert feed.next_batch(4) == [2, 3, 4, 5] and not feed.should_stop()
    assert feed.next_batch(10) == [6, 7, 8, 9]
    assert feed.should_stop()
    feed.batch_results([36, 49])
    assert [mgr.get_queue("output").get() for _ in range(2)] == [36, 49]


def test_datafeed_input_mapping_gives_one_list_per_tensor_in_sorted_column_order():
    mgr = TFManager.start(b"key", ["input"])
    for row in [([1.0, 2.0], 3), ([4.0, 5.0], 6)]:  # columns (col1, col2) as selected by sorted name
        mgr.get_queue("input").put(row)
    mgr.get_queue("input").put(None)
    batch = TFNode.DataFeed(mgr, input_mapping={"col2": "y_", "col1": "x"}).next_batch(5)
    assert batch == {"x": [[1.0, 2.0], [4.0, 5.0]], "y_": [3, 6]}


def test_a_manager_reachable_over_the_network_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="only mode='local' .* ctx.mgr is already each node's data feed"):
        TFManager.start(b"key", ["input"], "remote")
    with pytest.raises(ConfigError, match="authenticated channel; use ctx.mgr"):
        TFManager.connect(("host", 1), b"key")


def test_namespace_takes_dicts_namespaces_and_argv():
    d = {"string": "foo", "integer": 1, "array": [1, 2, 3], "map": {"a": 1}}
    n1 = Namespace(d)
    assert (n1.string, n1.integer, n1.array, n1.map) == ("foo", 1, [1, 2, 3], {"a": 1})
    assert "string" in n1 and "extra" not in n1
    n2 = Namespace(n1)
    assert n2 == n1 and n2 is not n1 and "map" in n2
    argv = ["--foo", "1", "--bar", "test"]
    assert Namespace(argv).argv == argv and list(Namespace(argv)) == argv
    assert repr(n1) == "Namespace(array=[1, 2, 3], integer=1, map={'a': 1}, string='foo')"
    with pytest.raises(ConfigError, match="Namespace takes a dict, a list .*got int"):
        Namespace(3)


def test_params_merge_into_a_copy_of_the_args():
    class Stage(TFParams, HasBatchSize, HasSteps):
        def __init__(self, args):
            super().__init__()
            self.args = args

    args = Namespace({"a": 1, "b": 2})
    merged = Stage(args).setBatchSize(10).setSteps(100).merge_args_params()
    assert merged == Namespace({"a": 1, "b": 2, "batch_size": 10, "steps": 100})
    assert args == Namespace({"a": 1, "b": 2})


def test_stages_have_tensorflowonspark_defaults_and_refuse_tensorflow_1_exports():
    est = TFEstimator(lambda args, ctx: None, {"lr": 0.1}).setInputMapping({"image": "x"}).setClusterSize(2)
    merged = est.merge_args_params()
    assert (merged.lr, merged.cluster_size, merged.epochs, merged.batch_size, merged.master_node, merged.grace_secs,
            merged.input_mapping) == (0.1, 2, 1, 100, "chief", 30, {"image": "x"})
    model = TFModel({}).setTagSet("serve").setOutputMapping({"dense": "out"})
    assert (model.getTagSet(), model.getOutputMapping(), model.getBatchSize()) == ("serve", {"dense": "out"}, 100)
    with pytest.raises(ConfigError, match="export_fn=...\\) is TensorFlow 1 API: export from train_fn with "
                                          "compat.export_saved_model"):
        TFEstimator(lambda args, ctx: None, {}, export_fn=lambda args: None)
    with pytest.raises(ConfigError, match="only InputMode.SPARK is supported"):
        est.setInputMode(0)
    with pytest.raises(TypeError, match="expected a dict"):
        est.setInputMapping(["image"])


def test_yield_batch_splits_rows_into_columns():
    rows = [(i, -i) for i in range(5)]
    assert list(yield_batch(rows, 2, 2)) == [[[0, 1], [0, -1]], [[2, 3], [-2, -3]], [[4], [-4]]]


def test_tensorflow_1_calls_and_removed_feed_functions_name_their_replacement():
    with pytest.raises(ConfigError, match="TF_CONFIG is already set on every node, so create a tf.distribute"):
        TFNode.start_cluster_server(None, num_gpus=1)
    with pytest.raises(ConfigError, match=r"compat.export_saved_model\(model, export_dir, is_chief\) or "
                                          r"ctx.export\(model, export_dir\), called on every node"):
        TFNode.export_saved_model(None, "/tmp/x", "serve", {})
    for call in (lambda: TFNode.next_batch(None, 1), lambda: TFNode.batch_results(None, []),
                 lambda: TFNode.terminate(None)):
        with pytest.raises(ConfigError, match=r"use feed = TFNode.DataFeed\(ctx.mgr\)"):
            call()
