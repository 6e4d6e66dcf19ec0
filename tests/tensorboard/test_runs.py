"""End to end: runs on Spark whose nodes write event files, read back from the driver's TensorBoard."""

import os
import time

import psutil
from tbhelpers import get_json, scalar_record, version_record, wait_for_scalars

from tfos_notebook import Run, TFCluster
from tfos_notebook.runtime.driver.events import ClusterReady, Step
from tfos_notebook.tensorboard import attach_tensorboard


def write_pieces(args, ctx):
    """Append each piece to an event file in the node's log directory, a pause between pieces."""
    path = os.path.join(ctx.log_dir, "events.out.tfevents.1.node")
    for piece in args[ctx.job_name]:
        with open(path, "ab") as f:
            f.write(piece)
        time.sleep(1.5)
    return ctx.log_dir


def _pieces(seed: float) -> list[bytes]:
    return [version_record(1e9) + scalar_record("loss", seed, 1, 1e9 + 1),
            scalar_record("loss", seed / 2, 2, 1e9 + 2), scalar_record("loss", seed / 4, 3, 1e9 + 3)]


def test_node_local_logs_are_mirrored_byte_identical_even_when_tensorboard_attaches_mid_run(local_spark):
    pieces = {"chief": _pieces(1.0), "worker": _pieces(8.0)}
    run = Run(local_spark.sparkContext, write_pieces, pieces, 2).start()
    run.events.wait_for(lambda evs: any(isinstance(e, ClusterReady) for e in evs), 120)
    time.sleep(1.5)  # the nodes have written and shipped their first piece, which nobody received
    tb = attach_tensorboard(run, keep_after_run=1.0)
    run.wait(120)
    for role in ("chief", "worker"):
        mirrored = os.path.join(tb.mirror.root, f"{role}_0", "events.out.tfevents.1.node")
        with open(mirrored, "rb") as f:
            assert f.read() == b"".join(pieces[role])
        first = {"chief": 1.0, "worker": 8.0}[role]
        steps = [p[1:] for p in wait_for_scalars(tb.port, f"{role}_0", "loss", 3)]
        assert steps == [[1, first], [2, first / 2], [3, first / 4]]
    assert all(d.endswith(("/chief_0", "/worker_0")) for d in run.results.values())

    # the TensorBoard goes away keep_after_run seconds after the run ended
    tb_process = psutil.Process(tb.pid)
    tb_process.wait(timeout=30)
    assert tb.stopped


def summary_scalars(args, ctx):
    import tensorflow as tf

    writer = ctx.summary_writer()
    with writer.as_default():
        for step in range(1, 4):
            tf.summary.scalar("loss", 1.0 / step + ctx.task_index, step=step)
            time.sleep(0.3)
    return ctx.log_dir


def test_two_worker_run_scalars_from_both_workers_are_served_by_the_driver_tensorboard(standalone):
    run = Run(standalone.sparkContext, summary_scalars, None, 2, master_node=None, reservation_timeout=120)
    tb = attach_tensorboard(run)  # before start: nothing is missed
    try:
        run.start()
        run.wait(300)
        for worker in ("worker_0", "worker_1"):
            points = wait_for_scalars(tb.port, worker, "loss", 3)
            offset = int(worker[-1])
            assert [p[1] for p in points] == [1, 2, 3]
            assert [round(p[2], 4) for p in points] == [round(1.0 / s + offset, 4) for s in (1, 2, 3)]
    finally:
        tb.stop()
    assert not psutil.pid_exists(tb.pid) or psutil.Process(tb.pid).status() == psutil.STATUS_ZOMBIE


def fit_with_callbacks(args, ctx):
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x.sum(axis=1) > 0).astype("float32")
    model = tf.keras.Sequential([tf.keras.Input(shape=(4,)), tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=ctx.callbacks())
    return sorted(os.listdir(ctx.model_dir))


def test_keras_callbacks_write_curves_and_checkpoints_into_a_file_uri_logdir_shipped_to_the_driver(
        local_spark, tmp_path):
    logdir = f"file://{tmp_path}/logs"  # each host's own disk: nodes write there and ship it to the driver
    run = Run(local_spark.sparkContext, fit_with_callbacks, None, 1, log_dir=logdir,
              model_dir=str(tmp_path / "model"))
    tb = attach_tensorboard(run)
    try:
        assert not tb.sync._sources  # nothing for the driver to read itself: the bytes come from the nodes
        run.start()
        checkpoints = run.wait(300)
        points = wait_for_scalars(tb.port, "chief_0/train", "epoch_loss", 3)
        assert [p[1] for p in points] == [0, 1, 2]
    finally:
        tb.stop()
    assert "checkpoint" in checkpoints and any(name.startswith("ckpt-0003") for name in checkpoints)
    reported = [e for e in run.events.events(Step)]
    assert [e.step for e in reported] == [1, 2, 3] and all("loss" in e.metrics for e in reported)
    source_root = tmp_path / "logs" / run.run_id  # the run's own directory: a re-run never mixes in
    assert run.log_dir == f"{logdir}/{run.run_id}" and os.listdir(tmp_path / "logs") == [run.run_id]
    for dirpath, _dirs, files in os.walk(source_root):
        for name in files:
            rel = os.path.relpath(os.path.join(dirpath, name), source_root)
            with open(os.path.join(dirpath, name), "rb") as a, open(os.path.join(tb.mirror.root, rel), "rb") as b:
                assert a.read() == b.read(), rel


def test_tfcluster_run_with_tensorboard_serves_the_nodes_curves_at_its_url(local_spark):
    pieces = {"chief": _pieces(1.0), "worker": _pieces(8.0)}
    cluster = TFCluster.run(local_spark.sparkContext, write_pieces, pieces, 2, tensorboard=True)
    board = cluster.tensorboard
    try:
        assert cluster.tensorboard_url() == board.url == f"http://127.0.0.1:{board.port}/"
        cluster.shutdown()
        for role, first in (("chief", 1.0), ("worker", 8.0)):
            steps = [p[1:] for p in wait_for_scalars(board.port, f"{role}_0", "loss", 3)]
            assert steps == [[1, first], [2, first / 2], [3, first / 4]]
        assert sorted(get_json(f"{cluster.tensorboard_url()}data/runs")) == ["chief_0", "worker_0"]
    finally:
        board.stop()
    assert not psutil.pid_exists(board.pid) or psutil.Process(board.pid).status() == psutil.STATUS_ZOMBIE
