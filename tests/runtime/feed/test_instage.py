"""In-stage feeding: each node's own barrier task feeds it, so input mode spark works on clusters
with exactly as many task slots as nodes (TensorFlowOnSpark's layout, and every GPU cluster).

``local[2]`` and the session's standalone cluster (2 workers x 1 core, each task needing one of the
workers' fake GPU addresses) both have exactly two slots for two nodes: no task is left for
feeding from outside the gang. GPUs are fake here (discovery script addresses): what is checked is
that Spark assigns them and each node sees only its own.
"""

from __future__ import annotations

import collections
import time

import pytest
from sparkstate import block_executors

from tfos_notebook import InputMode, Run, TFCluster
from tfos_notebook.runtime.driver.events import FeedPlanned
from tfos_notebook.runtime.driver.feed.instage import _murmur3_int, partition_keys
from tfos_notebook.runtime.wire.feed.stage import Dealer, dealt_rows

from . import nodes

ROWS = 1000


def expected_sums(n: int = ROWS) -> list[int]:
    return [n, sum(range(n)), sum(i * i for i in range(n))]


def per_epoch_totals(results: dict) -> list[list[int]]:
    epochs = len(next(iter(results.values()))["sums"])
    return [[sum(r["sums"][e][k] for r in results.values()) for k in range(3)] for e in range(epochs)]


def test_a_dealer_deals_many_pickled_batches_whole_to_the_task_sent_the_fewest_bytes():
    import numpy as np
    from pyspark.serializers import CloudPickleSerializer

    pickler = CloudPickleSerializer()
    rows = [(np.full(784, i, np.float32), i) for i in range(5000)]
    batches = [pickler.dumps(rows[i:i + 10 * (1 + i % 3)]) for i in range(0, 5000, 20)]  # uneven sizes
    records = list(Dealer((1, 3), pickler)(2, iter(batches)))  # partition 2 of the data, tasks 1 and 3 train
    assert [batch for _, batch in records] == batches  # dealt as they were pickled, none unpickled
    sent = {task: sum(len(b) for t, b in records if t == task) for task in (1, 3)}
    assert abs(sent[1] - sent[3]) <= max(map(len, batches))  # even to within one batch
    got = [row[1] for row in dealt_rows([b for _, b in records], pickler)]
    assert sorted(got) == sorted(row[1] for b in batches for row in pickler.loads(b))  # every row, once


def test_a_dealer_deals_a_partition_of_few_batches_row_by_row():
    from pyspark.serializers import CloudPickleSerializer

    pickler = CloudPickleSerializer()
    batches = [pickler.dumps(list(range(i, i + 100))) for i in range(0, 1000, 100)]  # 10 < 8 per task x 2
    records = list(Dealer((0, 1), pickler)(1, iter(batches)))  # partition 1: its row 0 to task (1 + 0) % 2
    assert [t for t, _ in records] == [0, 1]
    got = {t: list(dealt_rows([b], pickler)) for t, b in records}
    assert got == {0: list(range(1, 1000, 2)), 1: list(range(0, 1000, 2))}


def test_rdds_not_kept_as_pickled_batches_are_dealt_too(local_spark, tmp_path):
    sc = local_spark.sparkContext
    (tmp_path / "ids.txt").write_text("".join(f"{i}\n" for i in range(ROWS)))
    text = sc.textFile(str(tmp_path / "ids.txt"), 3)  # kept as UTF-8 strings by PySpark
    zipped = sc.parallelize(range(ROWS), 3).zip(sc.parallelize(range(ROWS), 3))  # pairs of batches
    for data, first in ((text, int), (zipped, lambda pair: pair[0])):
        run = Run(local_spark, nodes.datafeed_ids, {"whole": True}, 2, input_mode="spark").start(data, epochs=1)
        run.wait(300)
        ids = [first(i) for values in run.results.values() for i in values]
        assert sorted(ids) == list(range(ROWS)) and all(run.results.values())


def test_partition_keys_send_each_key_to_its_task_as_spark_hashes(local_spark):
    from pyspark.sql import functions as F

    values = list(range(50))
    spark_hashes = [r.h for r in local_spark.createDataFrame([(v,) for v in values], "v int")
                    .select(F.hash("v").alias("h")).collect()]
    assert spark_hashes == [_murmur3_int(v) for v in values]
    keys = partition_keys(5, [1, 3, 4])
    df = local_spark.createDataFrame([(k,) for k in keys], "k int").repartition(5, "k")
    placed = df.rdd.mapPartitionsWithIndex(lambda i, rows: [(i, r.k) for r in rows]).collect()
    assert sorted(placed) == sorted(zip([1, 3, 4], keys, strict=True))


def test_dataframe_is_fed_exactly_once_per_epoch_with_as_many_slots_as_nodes(local_spark):
    df = local_spark.range(0, ROWS, numPartitions=3).selectExpr("id")
    run = Run(local_spark, nodes.epoch_checksums, {"epochs": 3}, 2, input_mode="spark").start(df, epochs=3)
    run.wait(300)
    assert per_epoch_totals(run.results) == [expected_sums()] * 3
    assert [e.path for e in run.events.events(FeedPlanned)] == ["in-stage"]
    assert run.instage.epochs_fed() == 3 and sum(run.instage.rows_per_node().values()) == 3 * ROWS


def stages_run(sc, run: Run) -> int:
    tracker = sc.statusTracker()
    return sum(len(tracker.getJobInfo(job).stageIds) for job in tracker.getJobIdsForGroup(run.job_group))


def test_data_with_one_partition_per_node_is_fed_as_it_is_without_a_shuffle(local_spark):
    sc = local_spark.sparkContext
    for data in (sc.parallelize([(i,) for i in range(ROWS)], 2), local_spark.range(0, ROWS, numPartitions=2)):
        run = Run(local_spark, nodes.datafeed_ids, {}, 2, input_mode="spark").start(data, epochs=2)
        run.wait(300)
        assert sorted(i for ids in run.results.values() for i in ids) == sorted(list(range(ROWS)) * 2)
        assert stages_run(sc, run) == 1  # the barrier stage alone: no shuffle dealt the rows out


@pytest.mark.parametrize("kind", ["rdd", "df"])
def test_the_sample_row_is_each_nodes_own_first_row_and_no_job_reads_one(local_spark, kind):
    """In-stage, the driver reads no row before the gang's job (a DataFrame's schema alone, an
    RDD's nothing); each node's task takes the sample row, from which ``ctx.dataset`` declares its
    shapes, from its own partition (an RDD's rows typed by its first). Failed before: a one-row
    job ran on the driver first."""
    from pyspark.sql import Row

    sc = local_spark.sparkContext
    if kind == "rdd":
        data = sc.parallelize([Row(id=i, x=[float(i), i + 1.0]) for i in range(ROWS)], 2)
    else:
        data = local_spark.range(0, ROWS, numPartitions=2).selectExpr(
            "id", "array(cast(id as double), cast(id as double) + 1) as x")
    store = sc._jsc.sc().statusStore()
    jobs = store.jobsList(None).size()
    run = Run(local_spark, nodes.dataset_spec, {}, 2, input_mode="spark").start(data)
    run.wait(300)
    assert [r["spec"] for r in run.results.values()] == [{"id": [None], "x": [None, 2]}] * 2
    assert sum(r["rows"] for r in run.results.values()) == ROWS
    assert store.jobsList(None).size() - jobs == 1  # the gang's alone


@pytest.mark.parametrize("bad, says", [
    (lambda i: (None if i % 500 == 0 else i, 1.0), "column '_1' is None in the first row, so its type is unknown"),
    (lambda i: (i, "x" if i == 700 else 1.0), "column '_2' does not match the first row's type double"),
])
def test_rows_a_nodes_task_cannot_type_fail_the_nodes_function_at_once_naming_the_column(local_spark, bad, says):
    """A node's task types its partition's rows by the first one: a None there, or a later row of
    another type, fails the node's function where it reads the feed (after the rows before), so
    the run fails within seconds with the column named and the fix, as the function's own error,
    not relaunched as a lost node; the SparkContext goes on. Failed before: the task's error was
    lost behind "the node's connection closed", and a relaunch would have met the same rows."""
    from tfos_notebook import NodeError
    from tfos_notebook.runtime.node.task.feed.fednode import NODE_ERROR_WAIT

    sc = local_spark.sparkContext
    rdd = sc.parallelize([bad(i) for i in range(ROWS)], 2)
    t0 = time.monotonic()
    run = Run(local_spark, nodes.datafeed_ids, {}, 2, input_mode="spark", retries=1).start(rdd)
    with pytest.raises(NodeError, match=f"DataError: {says}"):
        run.wait(120)
    assert time.monotonic() - t0 < 3 * NODE_ERROR_WAIT and run.attempt == 0  # a ceiling: no relaunch, no long wait
    assert sc.parallelize(range(4), 2).count() == 4


def _fails_at_row_700(i: int) -> tuple[int, float]:
    if i == 700:
        raise ZeroDivisionError(f"row {i} cannot be made")
    return i, 1.0


def test_a_nodes_task_that_fails_computing_its_data_fails_the_run_with_the_tasks_traceback(local_spark):
    """An error of the node's own Spark task (here the user's map over the data, computed in the
    task as it feeds the node) reaches the user as the node's error with the task's traceback,
    within seconds and without a relaunch, which would meet the same row. Failed before: "the node's
    connection closed before it reported a result: its executor or Python worker died", three
    attempts, and the traceback only in the executor's stderr."""
    from tfos_notebook import NodeError
    from tfos_notebook.runtime.node.task.feed.fednode import NODE_ERROR_WAIT

    sc = local_spark.sparkContext
    rdd = sc.parallelize(range(ROWS), 2).map(_fails_at_row_700)
    t0 = time.monotonic()
    run = Run(local_spark, nodes.datafeed_ids, {}, 2, input_mode="spark", retries=2).start(rdd)
    with pytest.raises(NodeError, match=r"(?s)the node's Spark task failed beside it:.*ZeroDivisionError: row 700 cannot"):
        run.wait(120)
    assert time.monotonic() - t0 < 3 * NODE_ERROR_WAIT and run.attempt == 0
    assert sc.parallelize(range(4), 2).count() == 4


def test_a_dataframes_arrow_schema_is_made_by_pyspark_35s_converter_too(local_spark, monkeypatch):
    """pyspark 3.5's ``to_arrow_schema`` takes the schema alone (4.0 added its time zone and large
    types): the schema is made with what the converter takes, with no job. Failed before (seen on a
    pyspark 3.5.9 venv): the call raised, and the fallback, ``toArrow`` of one row, is a job where
    it exists and missing in 3.5, so no DataFrame could be fed in-stage. 3.5's converter is stood
    in for here; its JVM is not in this suite."""
    import pyspark.sql.pandas.types as types

    from tfos_notebook.runtime.driver.feed.data import DataSample

    converter = types.to_arrow_schema
    monkeypatch.setattr(types, "to_arrow_schema", lambda schema: converter(schema))
    df = local_spark.range(0, 3).selectExpr("id", "array(cast(id as double)) as x")
    store = local_spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None).size()
    sample = DataSample.of(df, read_row=False)
    assert sample.schema.names == ["id", "x"] and sample.sample is None
    assert store.jobsList(None).size() == jobs


def stages_per_job(sc, run: Run) -> list[int]:
    tracker = sc.statusTracker()
    return sorted(len(tracker.getJobInfo(job).stageIds) for job in tracker.getJobIdsForGroup(run.job_group))


def test_partitions_that_split_evenly_are_gathered_to_the_nodes_without_a_shuffle(local_spark):
    sc = local_spark.sparkContext
    cached = sc.parallelize(range(ROWS), 4).map(lambda i: (i,)).cache()
    for data in (sc.parallelize([(i,) for i in range(ROWS)], 4), cached):
        stored = {info.id() for info in sc._jsc.sc().getRDDStorageInfo()}
        run = Run(local_spark, nodes.datafeed_ids, {}, 2, input_mode="spark").start(data, epochs=2)
        run.wait(300)
        assert sorted(i for ids in run.results.values() for i in ids) == sorted(list(range(ROWS)) * 2)
        assert all(len(ids) == ROWS for ids in run.results.values())  # 2 epochs of 2 of the 4 partitions
        # a JVM job writes the gathered partitions, then the barrier stage reads them: no shuffle stage
        assert stages_per_job(sc, run) == [1, 1]
        assert "gathered" in run.events.events(FeedPlanned)[0].detail
        assert {info.id() for info in sc._jsc.sc().getRDDStorageInfo()} <= stored | {cached.id()}  # let go of
    cached.unpersist()


def test_a_cached_dataframe_is_gathered_from_its_cache_without_a_shuffle(local_spark):
    """A cached DataFrame whose cache's partitions split evenly over the nodes is fed from the
    cache's own column batches, gathered whole to each node: a job that copies them, then the
    barrier stage; no shuffle (before: its rows were dealt by one, 0.5 s of the F2 program)."""
    sc = local_spark.sparkContext
    df = local_spark.range(0, ROWS, numPartitions=4).selectExpr(
        "id", "if(id % 7 = 0, null, cast(id as double) / 2) as x", "concat('r', id) as name").cache()
    df.count()
    stored = {info.id() for info in sc._jsc.sc().getRDDStorageInfo()}
    run = Run(local_spark, nodes.datafeed_ids, {"whole": True}, 2, input_mode="spark").start(df, epochs=2)
    run.wait(300)
    expected = [(i, None if i % 7 == 0 else i / 2, f"r{i}") for i in range(ROWS)]
    assert sorted(tuple(row) for rows in run.results.values() for row in rows) == sorted(expected * 2)
    assert all(len(rows) == ROWS for rows in run.results.values())  # 2 epochs of 2 of the 4 partitions
    assert stages_per_job(sc, run) == [1, 1]  # the copy's job, then the barrier stage
    assert "gathered" in run.events.events(FeedPlanned)[0].detail
    assert {info.id() for info in sc._jsc.sc().getRDDStorageInfo()} <= stored  # the copy let go of
    df.unpersist()


class OtherSpark:
    """A DataFrame cache as a Spark whose internal API differs shows it: py4j raises on the call."""

    def __init__(self, cache):
        self.cache = cache

    def cacheBuilder(self):  # noqa: N802 (the JVM's name)
        return self.cache.cacheBuilder()

    def output(self):
        from py4j.protocol import Py4JError

        raise Py4JError("An error occurred while calling o42.output. Trace: py4j.Py4JException: Method output([]) "
                        "does not exist")


def test_a_dataframes_gathered_copy_goes_to_disk_without_free_memory_and_a_cache_not_read_is_dealt(
        local_spark, monkeypatch):
    from tfos_notebook.runtime.driver.feed.instage import Gathered
    from tfos_notebook.runtime.driver.spark import ClassicBackend, frames, gather
    from tfos_notebook.runtime.wire.feed.stage import FEED_KEY

    backend = ClassicBackend.of(local_spark)
    df = local_spark.range(0, ROWS, numPartitions=4).selectExpr("id", "array(id, -id) as pair").cache()
    df.count()
    assert backend.gatherable(df, 2) and not backend.gatherable(df, 3)  # 4 partitions over 2 nodes, not 3
    assert not backend.gatherable(local_spark.range(0, ROWS, numPartitions=4), 2)  # not cached
    monkeypatch.setattr(gather, "MEMORY_MARGIN", 1e12)  # no executor has that much free
    frame, copy = backend.gather(df, 2)
    level = copy.getStorageLevel()
    assert (level.useDisk(), level.useMemory()) == (True, False)  # the column batches, serialized to disk
    assert frame.rdd.getNumPartitions() == 2 and sorted(frame.collect()) == sorted(df.collect())
    copy.unpersist(True)
    persisted = local_spark.sparkContext._jsc.sc().getPersistentRDDs().size()
    assert frames.gathered_frame(local_spark.sparkContext, backend._as_json, df, OtherSpark(frames.frame_cache(df)), 2) is None
    assert local_spark.sparkContext._jsc.sc().getPersistentRDDs().size() == persisted  # its copy let go of
    df.unpersist(blocking=True)
    with Gathered(df, 2).attempt(backend) as data:  # the cache dropped since the run was planned
        assert data.columns == ["id", "pair", FEED_KEY] and data.count() == ROWS


def test_cached_blocks_are_grouped_by_the_executor_that_holds_them():
    from tfos_notebook.runtime.driver.spark.gather import CachedBlocks, executor_groups, fits_in_memory

    placed = {0: "1", 1: "2", 2: "1", 3: "2", 4: "1", 5: "2", 6: "1", 7: "2"}
    one_slot, two_slots = {"1": 1, "2": 1}, {"1": 2, "2": 2}

    def groups(executors, n, slots=one_slot):
        return executor_groups(CachedBlocks(executors, dict.fromkeys(executors, 100), {}, slots), 8, n)

    assert groups(placed, 2) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert groups(placed, 4, two_slots) == [[0, 2], [4, 6], [1, 3], [5, 7]]  # two nodes per executor
    assert groups(placed, 4) is None  # two groups each, but one slot each: both copies would wait for it
    # 5 and 3 blocks: executor 2 leads a group of its 3 and executor 1's fifth, the one block moved
    assert groups({**placed, 7: "1"}, 2) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert groups({**placed, 5: "1", 7: "1"}, 2) == [[0, 2, 4, 5], [1, 3, 7, 6]]  # 6 and 2: two moved
    assert groups(dict.fromkeys(range(8), "1"), 2) is None  # one executor of one slot cannot lead two
    assert groups(dict.fromkeys(range(8), "1"), 2, two_slots) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups({k: v for k, v in placed.items() if k != 3}, 2) is None  # one not cached
    assert executor_groups(CachedBlocks(placed, {}, {}, one_slot), 8, 3) is None  # 8 do not split over 3
    sizes = dict.fromkeys(placed, 100)
    halves = [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert fits_in_memory(CachedBlocks(placed, sizes, {"1": 800, "2": 800}), halves)  # 400 bytes each, twice over
    assert not fits_in_memory(CachedBlocks(placed, sizes, {"1": 800, "2": 799}), halves)
    assert not fits_in_memory(CachedBlocks(placed, sizes, {"1": 800}), halves)  # an executor the store does not know
    # the copy stays with the group's leader: executor 2 holds 5 blocks' worth of a group it leads
    assert not fits_in_memory(CachedBlocks(placed, sizes, {"1": 800, "2": 999}), [[0, 2, 4], [1, 3, 5, 7, 6]])


def test_partitions_that_do_not_split_evenly_are_dealt_by_a_shuffle(local_spark):
    sc = local_spark.sparkContext
    run = Run(local_spark, nodes.datafeed_ids, {}, 2, input_mode="spark").start(
        sc.parallelize([(i,) for i in range(ROWS)], 3), epochs=1)
    run.wait(300)
    assert sorted(i for ids in run.results.values() for i in ids) == list(range(ROWS))
    assert stages_per_job(sc, run) == [2]  # the shuffle's map stage, then the barrier stage
    assert "shuffle" in run.events.events(FeedPlanned)[0].detail


def test_the_sample_row_is_the_first_row_wherever_spark_holds_the_data(local_spark, tmp_path):
    from tfos_notebook.runtime.driver.feed.data import _first_rdd_row

    sc = local_spark.sparkContext
    (tmp_path / "lines.txt").write_text("a\nb\n")
    datasets = [sc.parallelize([(i, [1.0] * 3) for i in range(100)], 4),  # pickled in the JVM
                sc.parallelize(range(100), 4).map(lambda i: (i, 2.0 * i)).cache(),  # cached: read in the JVM
                sc.parallelize(range(100), 4).map(lambda i: (i, 2.0 * i)),  # computed by Python
                sc.textFile(str(tmp_path / "lines.txt")),  # not pickled batches
                sc.parallelize([], 2)]
    for data in datasets:
        assert _first_rdd_row(data) == data.take(1)
    datasets[1].unpersist()


@pytest.mark.parametrize("kind", ["rdd", "df"])
def test_a_relaunched_run_feeds_every_epoch_exactly_once_again(local_spark, kind):
    from pyspark.sql import Row

    rdd = local_spark.sparkContext.parallelize([Row(id=i) for i in range(ROWS)], 4)
    data = rdd if kind == "rdd" else local_spark.range(0, ROWS, numPartitions=4)  # gathered, or dealt by a shuffle
    run = Run(local_spark, nodes.epoch_checksums, {"epochs": 3, "kill_worker_once": True}, 2, input_mode="spark",
              retries=1).start(data, epochs=3)
    run.wait(300)
    assert run.attempt == 1  # worker 0 was killed in the first attempt
    assert per_epoch_totals(run.results) == [expected_sums()] * 3


def test_a_fed_node_killed_with_its_python_worker_leaves_no_folder_on_the_host(local_spark):
    """A fed node whose Python worker is killed (SIGKILL: the OOM killer, a lost executor) cannot
    clean up after itself: its child, orphaned, removes the node's work folder and its partition's
    spill (the later epochs' copy on the host's disk) before it ends. Failed before: the spill stayed."""
    import glob
    import os
    import tempfile
    import time

    import psutil

    from tfos_notebook import NodeError
    from tfos_notebook.runtime.driver.events import Log, Registered

    rows = local_spark.sparkContext.parallelize([(i, bytes(10_000)) for i in range(ROWS)], 2)  # 5 MB a node
    # a feed buffer smaller than an epoch: the task is still feeding (and its spill on disk) when killed
    run = Run(local_spark, nodes.read_then_wait, None, 2, input_mode="spark", retries=0,
              feed_buffer_mb=1).start(rows, epochs=3)
    deadline = time.monotonic() + 120
    while sum(e.line == "read" for e in run.events.events(Log)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    [worker] = [e for e in run.events.events(Registered) if e.role == "worker"]
    assert glob.glob(os.path.join(tempfile.gettempdir(), f"tfos-{run.run_id}-*-spill-{worker.pid}-*"))
    psutil.Process(worker.pid).kill()
    with pytest.raises(NodeError):
        run.wait(120)
    folders = os.path.join(tempfile.gettempdir(), f"tfos-{run.run_id}-*")
    deadline = time.monotonic() + 10
    while glob.glob(folders) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert glob.glob(folders) == []


def test_tfos_program_trains_on_local_2_with_train_then_shutdown(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, nodes.datafeed_ids, {"batch": 50}, num_executors=2, input_mode=InputMode.SPARK)
    assert cluster.in_stage  # local[2]: no slot beside the two nodes
    summary = cluster.train(sc.parallelize([(i, [float(i)] * 4) for i in range(400)], 4), num_epochs=2)
    assert (summary.epochs, summary.rows) == (2, 800)
    with pytest.raises(Exception, match="feed all epochs in one train"):
        cluster.train(sc.parallelize([(1,)]), num_epochs=1)
    cluster.shutdown()
    ids = sorted(i for values in cluster.run_handle.results.values() for i in values)
    assert ids == sorted(list(range(400)) * 2)


def test_tfos_rdd_inference_gives_one_result_per_row_with_as_many_slots_as_nodes(local_spark):
    sc = local_spark.sparkContext
    cluster = TFCluster.run(sc, nodes.tfos_inference, {"batch": 30}, num_executors=2, input_mode=InputMode.SPARK)
    results = cluster.inference(sc.parallelize(range(ROWS), 5)).collect()
    assert sorted(results, key=int) == [f"{i * 2}" for i in range(ROWS)]
    cluster.shutdown()
    assert sum(cluster.run_handle.results.values()) == ROWS


@pytest.mark.parametrize("cached,how", [(False, "shuffle"), (True, "gathered")])
def test_dataframe_inference_keeps_columns_beside_each_prediction(local_spark, cached, how):
    df = local_spark.range(0, ROWS, numPartitions=4 if cached else 3).selectExpr("id", "array(id * 1d, id * 2d) as x")
    if cached:
        df.cache().count()
    run = Run(local_spark, nodes.predict_sum, {"batch": 64}, 2, input_mode="spark")
    out = run.start(df, predict=True, keep=["id"]).predictions()
    rows = out.collect()
    assert out.columns[0] == "id" and len(rows) == ROWS
    assert all(r[1] == 3.0 * r.id for r in rows)
    assert sorted(r.id for r in rows) == list(range(ROWS))
    assert how in run.events.events(FeedPlanned)[0].detail
    df.unpersist()


@pytest.mark.cluster
def test_tfos_layout_with_a_gpu_per_task_feeds_each_node_on_its_own_gpu(standalone):
    """2 workers x 1 core, spark.task.resource.gpu.amount=1: every task needs a GPU."""
    assert standalone.sparkContext.getConf().get("spark.task.resource.gpu.amount") == "1"
    df = standalone.range(0, ROWS, numPartitions=4).selectExpr("id")
    run = Run(standalone, nodes.epoch_checksums, {"epochs": 2}, 2, input_mode="spark", gpus_per_node=1,
              preflight_wait=5).start(df, epochs=2)
    run.wait(300)
    assert per_epoch_totals(run.results) == [expected_sums()] * 2
    for result in run.results.values():
        assert len(result["gpus"]) == 1 and result["visible"] == result["gpus"][0]


@pytest.mark.cluster
@pytest.mark.parametrize("kind,partitions,cached,how", [("rdd", 3, False, "shuffle"), ("rdd", 4, False, "gathered"),
                                                        ("rdd", 4, True, "gathered"), ("df", 4, True, "gathered")])
def test_tfos_program_runs_on_the_standalone_tfos_layout(standalone, kind, partitions, cached, how):
    """Each node's task on its own executor: the dealt or gathered rows cross executors (or, cached,
    each node gathers one executor's blocks, in its memory)."""
    sc = standalone.sparkContext
    data = sc.parallelize([(i,) for i in range(300)], partitions)
    if kind == "df":
        data = standalone.range(0, 300, numPartitions=partitions).cache()
        data.count()
    elif cached:
        data = evenly_cached(data.map(lambda row: row))
    cluster = TFCluster.run(sc, nodes.datafeed_ids, {"batch": 50}, num_executors=2, input_mode=InputMode.SPARK,
                            preflight_wait=5)
    assert cluster.in_stage
    stored = {info.id() for info in sc._jsc.sc().getRDDStorageInfo()}
    cluster.train(data, num_epochs=3)
    cluster.shutdown()
    ids = sorted(i for values in cluster.run_handle.results.values() for i in values)
    assert ids == sorted(list(range(300)) * 3)
    assert how in cluster.run_handle.events.events(FeedPlanned)[0].detail
    assert {info.id() for info in sc._jsc.sc().getRDDStorageInfo()} <= stored  # the copy let go of
    if cached:
        data.unpersist()


@pytest.mark.cluster
def test_a_cached_dataframe_is_gathered_from_its_own_executors_into_their_memory(standalone):
    """A cached DataFrame's column batches are gathered as an RDD's blocks are: each node's share
    led by a block of its own executor, the copies one on each executor, in its memory."""
    from tfos_notebook.runtime.driver.spark import ClassicBackend
    from tfos_notebook.runtime.driver.spark.frames import cache_batches, frame_cache

    df = standalone.range(0, 400, numPartitions=4).selectExpr("id", "cast(id as float) as x").cache()
    df.count()
    batches = cache_batches(frame_cache(df))
    placed = block_executors(standalone.sparkContext, batches)
    frame, copy = ClassicBackend.of(standalone).gather(df, 2)
    assert copy.getStorageLevel().useMemory()
    groups = [list(p.parentsIndices()) for p in copy.rdd().partitions()]
    assert sorted(sum(groups, [])) == [0, 1, 2, 3] and len({placed[g[0]] for g in groups}) == 2
    assert sorted(frame.collect()) == sorted(df.collect())  # the job that writes the copies, then reads them
    assert block_executors(standalone.sparkContext, copy) == {i: placed[g[0]] for i, g in enumerate(groups)}
    copy.unpersist(True)
    df.unpersist()


def evenly_cached(rdd):
    """``rdd`` cached with as many partitions on each of the two executors (cached again until
    Spark's scheduler placed them so)."""
    for _ in range(10):
        rdd.cache().count()
        if sorted(collections.Counter(block_executors(rdd.context, rdd).values()).values()) == [2, 2]:
            return rdd
        rdd.unpersist(blocking=True)
    pytest.fail("Spark never placed the cached partitions two on each executor")


@pytest.mark.cluster
def test_cached_partitions_are_gathered_from_their_own_executor_into_its_memory(standalone):
    from tfos_notebook.runtime.driver.feed.data import pickled_batches
    from tfos_notebook.runtime.driver.spark import ClassicBackend

    sc = standalone.sparkContext
    data = evenly_cached(sc.parallelize(range(400), 4).map(lambda i: (i,)))
    placed = block_executors(sc, data)
    batches = pickled_batches(data)[0]
    gathered, _ = ClassicBackend.of(sc).gather(batches, 2)
    level = gathered.getStorageLevel()
    assert level.useMemory and level.deserialized  # the JVM's byte arrays, kept in memory
    groups = [list(p.parentsIndices()) for p in gathered._jrdd.rdd().partitions()]
    assert sorted(sum(groups, [])) == [0, 1, 2, 3] and all(len({placed[i] for i in g}) == 1 for g in groups)
    assert gathered.count() == batches.count()  # the job that writes the copy: every pickled batch in it
    stored = {info.id(): info for info in sc._jsc.sc().getRDDStorageInfo()}
    assert stored[gathered.id()].memSize() > 0 and stored[gathered.id()].diskSize() == 0
    gathered.unpersist()
    data.unpersist()
    # no cached blocks (or, likewise, too little free storage memory): Spark's coalescer, on disk
    level = ClassicBackend.of(sc).gather(pickled_batches(sc.parallelize(range(400), 4))[0], 2)[0].getStorageLevel()
    assert (level.useDisk, level.useMemory) == (True, False)


def slow_first_partition(index, rows):
    """Rows as 1-tuples; partition 0 takes 2 s, so that the other executor computes (and caches)
    the rest meanwhile."""
    if index == 0:
        time.sleep(2)
    return ((i,) for i in rows)


@pytest.mark.cluster
def test_cached_partitions_spread_unevenly_are_gathered_one_copy_per_executor(standalone):
    """Cached partitions spread unevenly over the two executors (partition 0 holds one executor
    while the other caches the rest: 5/1 or 4/2): each node's share of 3 is led by a block of its
    own executor, the fewest blocks move, and the two copies land one on each executor, in its
    memory (two on an executor of one slot would hold the barrier stage for Spark's locality wait,
    3 s; before, such blocks went to Spark's coalescer and to disk)."""
    from tfos_notebook.runtime.driver.feed.data import pickled_batches
    from tfos_notebook.runtime.driver.spark import ClassicBackend

    sc = standalone.sparkContext
    data = sc.parallelize(range(600), 6).mapPartitionsWithIndex(slow_first_partition).cache()
    data.count()
    placed = block_executors(sc, data)
    most = collections.Counter(placed.values()).most_common(1)[0][1]
    assert most > 3  # uneven, as arranged
    gathered, _ = ClassicBackend.of(sc).gather(pickled_batches(data)[0], 2)
    groups = [list(p.parentsIndices()) for p in gathered._jrdd.rdd().partitions()]
    assert sorted(sum(groups, [])) == list(range(6)) and [len(g) for g in groups] == [3, 3]
    assert len({placed[g[0]] for g in groups}) == 2  # each led by another executor's block
    assert sum(placed[i] != placed[g[0]] for g in groups for i in g) == most - 3  # the fewest moved
    assert gathered.getStorageLevel().useMemory
    assert gathered.count() == pickled_batches(data)[0].count()  # the job that writes the copies
    assert block_executors(sc, gathered) == {i: placed[g[0]] for i, g in enumerate(groups)}  # with their leaders
    gathered.unpersist()
    data.unpersist()
