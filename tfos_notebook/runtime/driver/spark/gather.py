"""Data gathered into one partition per node in the JVM, for the in-stage feed's ``Gathered``
(``driver/feed/instage.py``): an RDD's partitions (PySpark's pickled batches), or a cached
DataFrame's cache (its column batches, see ``frames.py``).

Spark's own coalescer groups partitions by host, so executors that share a host (or a cluster
whose blocks sit on every host) read about half their share from another executor. Where the data
is cached, its blocks are grouped here by the executor that holds them (Spark's
``GroupedPartitionCoalescer``): each group is led by a block of its own executor, where Spark
then runs its gathering task (a coalesced partition goes where its first parent is) and keeps
its copy, so the barrier stage finds every node's copy on an executor with a slot for it (two
copies on an executor of one slot would hold the barrier stage for Spark's locality wait, 3 s).
Blocks that do not split evenly by executor are evened out by moving the fewest: an executor
keeps as many of its own as its groups hold, and its surplus fills the groups of executors short
of a whole group. The gathered copy is kept in its executor's memory, as the objects the blocks
hold (byte arrays, or column batches), when its free storage memory holds it ``MEMORY_MARGIN``
times over (no serialization, no file written and read back, and no cached block of the user's
evicted for it). Otherwise the copy goes to the executors' local disks: grouped by executor when
too little memory is free, else (not cached, or more groups than the executors holding blocks
have slots for) as Spark's coalescer groups the partitions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: How many times over an executor's free storage memory must hold its gathered share for the
#: share to be kept in memory (room for Spark's unrolling, and for other jobs' blocks meanwhile).
MEMORY_MARGIN = 2.0


@dataclass(frozen=True)
class CachedBlocks:
    """Where an RDD's cached partitions are: the executor holding each partition's block, its
    bytes (in memory and on disk), and each executor's free storage memory and task slots (tasks
    it runs at once; 1 where not known), as the status store has them now."""

    executors: dict[int, str]
    sizes: dict[int, int]
    free: dict[str, int]
    slots: dict[str, int] = field(default_factory=dict)


def executor_groups(blocks: CachedBlocks, partitions: int, n: int) -> list[list[int]] | None:
    """``n`` groups of as many of the ``partitions`` each, each led by a partition cached on its
    group's own executor, no executor leading more groups than it has slots, each executor's
    partitions kept in the groups it leads as far as they fill them; None when the blocks do not
    allow it: a partition not cached, partitions that do not split into ``n`` equal groups, or too
    few executors holding blocks, with too few slots, to lead ``n`` groups."""
    if n < 1 or partitions % n or set(blocks.executors) != set(range(partitions)):
        return None
    size = partitions // n
    own: dict[str, list[int]] = {}
    for part in range(partitions):
        own.setdefault(blocks.executors[part], []).append(part)
    slots = {e: blocks.slots.get(e, 1) for e in own}
    leads = {e: min(len(parts) // size, slots[e]) for e, parts in own.items()}

    def left_over(e: str) -> int:
        return len(own[e]) - leads[e] * size

    while sum(leads.values()) < n:  # a group more, led by the executor with the most blocks left over
        spare = [e for e in own if leads[e] < slots[e] and left_over(e) > 0]
        if not spare:
            return None
        leads[max(spare, key=left_over)] += 1
    groups = [own[e][i * size:(i + 1) * size] for e in own for i in range(leads[e])]
    surplus = [part for e in own for part in own[e][leads[e] * size:]]
    for group in groups:  # the groups short of a whole one take the other executors' surplus
        while len(group) < size:
            group.append(surplus.pop())
    return groups


def fits_in_memory(blocks: CachedBlocks, groups: list[list[int]]) -> bool:
    """Whether every executor's free storage memory holds the copies of the groups it leads
    ``MEMORY_MARGIN`` times over."""
    need: dict[str, int] = {}
    for group in groups:
        executor = blocks.executors[group[0]]
        need[executor] = need.get(executor, 0) + sum(blocks.sizes[part] for part in group)
    return all(blocks.free.get(executor, 0) >= MEMORY_MARGIN * size for executor, size in need.items())


def cached_blocks(sc: Any, as_json: Callable[[Any], Any], rdd_id: int, task_cpus: int = 1) -> CachedBlocks | None:
    """Where the RDD ``rdd_id``'s cached blocks are (None when it has none), from the status store
    (``as_json``: one of its objects as the JSON Spark's REST API serves, parsed), and each
    executor's free storage memory and task slots (its cores over ``task_cpus``)."""
    store = sc._jsc.sc().statusStore()
    try:
        info = as_json(store.rdd(rdd_id))
    except Exception as e:  # not in the status store: the RDD is not cached
        log.debug("RDD %d has no cached blocks: %s", rdd_id, e)
        return None
    executors, sizes = {}, {}
    for block in info.get("partitions") or ():
        part = int(block["blockName"].rsplit("_", 1)[1])
        if block.get("executors"):
            executors[part] = block["executors"][0]
            sizes[part] = int(block.get("memoryUsed", 0)) + int(block.get("diskUsed", 0))
    summaries = as_json(store.executorList(True))
    free = {e["id"]: int(e["maxMemory"]) - int(e["memoryUsed"]) for e in summaries}
    slots = {e["id"]: int(e["totalCores"]) // max(1, task_cpus) for e in summaries}
    return CachedBlocks(executors, sizes, free, slots)


def evenly_coalesced(jrdd: Any, n: int) -> bool:
    """Whether ``jrdd`` (a JavaRDD) has partitions that split evenly over ``n`` nodes and that
    Spark's coalescer gives every node as many of (planned on the driver, no job)."""
    if jrdd.getNumPartitions() % n:
        return False
    return len({len(p.parentsIndices()) for p in jrdd.coalesce(n, False).rdd().partitions()}) == 1


def gathered(sc: Any, as_json: Callable[[Any], Any], jrdd: Any, n: int, task_cpus: int = 1) -> Any:
    """``jrdd`` (a JavaRDD: PySpark's pickled batches, or a cache's column batches) coalesced into
    ``n`` partitions with no shuffle, persisted for a local checkpoint that the first job computing
    it writes: in the executors' memory (as the objects the blocks hold, serialized again nowhere)
    or on their local disks. A JavaRDD."""
    partitions = jrdd.getNumPartitions()
    blocks = cached_blocks(sc, as_json, jrdd.id(), task_cpus)
    groups = executor_groups(blocks, partitions, n) if blocks is not None else None
    coalesced = _grouped(sc, jrdd, groups) if groups is not None else None
    memory = coalesced is not None and fits_in_memory(blocks, groups)
    copy = coalesced if coalesced is not None else jrdd.coalesce(n, False)
    levels = sc._jvm.org.apache.spark.storage.StorageLevel
    copy.persist(levels.MEMORY_ONLY() if memory else levels.DISK_ONLY())
    copy.rdd().localCheckpoint()
    log.info("gathering %d partitions into %d: %s, %s", partitions, n,
             "each led by one executor's cached blocks" if coalesced is not None else "grouped by Spark's coalescer",
             "kept in memory" if memory else "on the executors' disks")
    return copy


def _grouped(sc: Any, jrdd: Any, groups: list[list[int]]) -> Any | None:
    """``jrdd`` coalesced into ``groups`` by Spark's ``GroupedPartitionCoalescer`` (None where this
    Spark has none: an internal class of its SQL module)."""
    jvm = sc._jvm
    to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
    try:
        coalescer = jvm.org.apache.spark.sql.execution.datasources.v2.GroupedPartitionCoalescer(
            to_seq([to_seq(group) for group in groups]))
    except Exception as e:
        log.debug("no GroupedPartitionCoalescer in this Spark (%s): partitions grouped by Spark's coalescer", e)
        return None
    coalesced = jrdd.rdd().coalesce(len(groups), False, jvm.scala.Option.apply(coalescer), None)
    return jvm.org.apache.spark.api.java.JavaRDD.fromRDD(coalesced, jrdd.classTag())
