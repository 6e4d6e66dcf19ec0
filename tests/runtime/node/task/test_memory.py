"""A node that runs out of memory: the memory guard's rules and the driver's trend finding as pure
functions; then for real (local[2] Spark, real nodes): a node that allocates without bound is
named while it grows, stopped at its cap with the cap in the error, relaunched once and not again,
and the machine's free memory never falls low meanwhile."""

from __future__ import annotations

import threading
from collections import deque

import psutil
import pytest

from tfos_notebook import Run
from tfos_notebook.runtime.driver.diagnosis.memory import growing
from tfos_notebook.runtime.driver.errors import NodeError
from tfos_notebook.runtime.driver.events import FindingRaised, LaunchSubmitted, NodeMemory
from tfos_notebook.runtime.node.task.memguard import node_cap, over_limit
from tfos_notebook.runtime.node.task.nodelink import result_message
from tfos_notebook.runtime.wire.reports import host_floor_mib

GIB = 1024.0


def test_a_process_is_stopped_over_its_cap_or_when_it_grows_while_its_host_runs_out():
    assert over_limit(900, 1000, 8000, 16 * GIB, 500) == ""
    assert over_limit(1001, 1000, 8000, 16 * GIB, 0) == "its memory reached 1,001 MiB, over its cap of 1,000 MiB"
    floor = host_floor_mib(16 * GIB)
    assert floor == 16 * GIB / 20 and host_floor_mib(2 * GIB) == 256
    assert over_limit(3000, 0, floor - 1, 16 * GIB, 10) == ""  # the host is low, but this process is not growing
    why = over_limit(3000, 0, floor - 1, 16 * GIB, 100)
    assert why.startswith("its host was running out of memory (818 MiB of 16,384 MiB available, under the 819 MiB")
    assert why.endswith("while it grew by 100 MiB in 5 s, to 3,000 MiB")


def test_the_cap_is_the_runs_else_sparks_pyspark_memory(monkeypatch):
    monkeypatch.delenv("PYSPARK_EXECUTOR_MEMORY_MB", raising=False)
    assert node_cap(0) == (0.0, "")
    monkeypatch.setenv("PYSPARK_EXECUTOR_MEMORY_MB", "4096")  # what pyspark's worker sets from spark.executor.pyspark.memory
    assert node_cap(0) == (4096.0, "spark.executor.pyspark.memory")
    assert node_cap(1500) == (1500, "the run's memory_limit_mb")


def test_a_result_says_out_of_memory_for_the_guard_the_kernel_or_the_processs_own_memoryerror():
    stopped = result_message(None, -9, False, "its memory reached 1,001 MiB, over its cap of 1,000 MiB")
    assert stopped.cause == "memory" and not stopped.ok
    assert stopped.traceback == "MemoryError: the node's process was stopped: its memory reached 1,001 MiB, over its cap of 1,000 MiB"
    own = result_message(("error", "Traceback (most recent call last):\n  ...\nMemoryError\n"), 1, False)
    assert own.cause == "memory"
    cxx = result_message(("error", "terminate called after throwing an instance of 'std::bad_alloc'\n"), -6, False)
    assert cxx.cause == "memory"
    other = result_message(("error", "ValueError: no MemoryError here\n"), 1, False)
    assert other.cause == ""
    assert result_message(None, -9, True, "ignored: the driver stopped it").stopped


def readings(rss: list[float], available: float = 12 * GIB, cap: float = 0.0) -> deque:
    """One reading a second, of the resident memory ``rss`` in turn."""
    return deque((float(t), NodeMemory("r", task=0, role="chief", index=0, host="h1", rss_mib=m,
                                       host_available_mib=available, host_total_mib=16 * GIB, cap_mib=cap))
                 for t, m in enumerate(rss))


def steady(start: float, rate: float, secs: int = 10) -> list[float]:
    return [start + rate * t for t in range(secs + 1)]


def test_a_node_growing_steadily_toward_its_cap_or_its_hosts_floor_is_named_with_its_rate_and_time_left():
    assert growing(readings(steady(500, 100, secs=5))) is None  # not 10 s of readings yet
    assert growing(readings(steady(500, 10))) is None  # 10 MiB/s: not news
    assert growing(readings(steady(500, 30))) is None  # 30 MiB/s: six minutes of host left
    f = growing(readings(steady(500, 100), cap=4000))
    assert f.code == "memory_growing" and f.subject == "chief:0" and f.severity == "warning"
    assert f.cause == ("chief:0's memory grows by 100 MiB/s: it reaches its cap of 4,000 MiB in about 25 s, "
                       "and then its process is stopped")
    assert f.evidence == ("chief:0 on h1: 500 MiB -> 1,500 MiB resident in 10 s",)
    assert "mlflow.autolog(log_datasets=False)" in f.remedy and "--memory-limit" in f.remedy
    host = growing(readings(steady(500, 100), available=4000))
    assert "its host's available memory (4,000 MiB of 16,384 MiB) falls to the 819 MiB kept free in about 32 s" \
        in host.cause
    flat_then_leak = [500.0] * 6 + steady(500, 100, secs=6)[1:]
    assert growing(readings(flat_then_leak, cap=4000)) is not None  # a leak that starts late is named too


def test_a_node_starting_up_fast_then_slower_is_not_named():
    # a TensorFlow node's start-up as read on this machine: fast, then slower (MiB, a second apart)
    start_up = [178, 376, 431, 502, 611, 655, 705, 726, 780, 796, 818, 822, 827]
    assert growing(readings(start_up, available=2500, cap=1000)) is None
    assert growing(readings(start_up[:11], available=2500)) is None


def grow_without_bound(args, ctx):
    import time

    kept = []
    while True:  # about 40 MiB/s, each page written
        kept.append(b"\x01" * (4 << 20))
        time.sleep(0.1)


@pytest.mark.slow
def test_a_node_allocating_without_bound_is_named_stopped_at_its_cap_and_relaunched_once(local_spark):
    lowest = [psutil.virtual_memory().available]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            lowest[0] = min(lowest[0], psutil.virtual_memory().available)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = Run(local_spark, grow_without_bound, {}, 1, memory_limit_mb=900, retries=2).start()
        with pytest.raises(NodeError) as failed:
            run.wait(240)
    finally:
        done.set()
        watcher.join()
    error = failed.value
    assert error.cause == "memory" and error.role == "chief"
    text = str(error)
    assert "MemoryError: the node's process was stopped: its memory reached " in text
    assert "over its cap of 900 MiB (the run's memory_limit_mb)" in text
    assert "out of memory in each attempt:\n  attempt 1: chief:0 on " in text and "\n  attempt 2: chief:0 on " in text
    assert [e.attempt for e in run.events.events(LaunchSubmitted)] == [0, 1]  # retries=2, yet only one relaunch
    found = [e.finding for e in run.events.events(FindingRaised)]
    trend = [f for f in found if f.code == "memory_growing"]
    assert trend and trend[0].cause.startswith("chief:0's memory grows by ")
    assert "it reaches its cap of 900 MiB in about" in trend[0].cause
    oom = [f for f in found if f.code == "node_out_of_memory"]
    assert [f.severity for f in oom] == ["warning", "blocker"]
    assert oom[0].cause == "chief:0 ran out of memory; relaunching the run once"
    assert oom[1].cause == "chief:0 ran out of memory, again: not relaunched, it would run out the same way"
    assert len(oom[1].evidence) == 2
    readings = run.events.events(NodeMemory)
    assert readings and max(r.rss_mib for r in readings) < 900 + 200  # stopped within a reading or two
    assert lowest[0] > 1 << 30  # the machine kept more than a GiB free throughout
    assert run.backend.sc.parallelize(range(4), 2).count() == 4  # the session survives


def fail_for_memory(args, ctx):
    raise MemoryError("no room for the batch")  # what Python raises when an allocation fails


def test_a_node_that_dies_of_its_own_memoryerror_is_out_of_memory_and_relaunched_once(local_spark):
    run = Run(local_spark, fail_for_memory, {}, 1, retries=3).start()
    with pytest.raises(NodeError) as failed:
        run.wait(180)
    assert failed.value.cause == "memory"
    assert [e.attempt for e in run.events.events(LaunchSubmitted)] == [0, 1]
    [first, last] = [e.finding for e in run.events.events(FindingRaised) if e.finding.code == "node_out_of_memory"]
    assert first.severity == "warning" and last.severity == "blocker"
    assert last.evidence[0].startswith("attempt 1: chief:0 on ") and last.evidence[0].endswith(
        ": MemoryError: no room for the batch")
