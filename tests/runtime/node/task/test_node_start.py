"""How a node's process starts: forked from its Python worker where that is safe, else a fresh
interpreter (``runtime/node/task/forked.py``), and found by the leftover scan either way.

The fork cases run in a fresh Python process of their own (this test process runs other threads,
which make a fork unsafe and which ``fork_refusal`` refuses); everything is real: processes,
pipes, signals, the process table, local Spark's Python workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest
from procs import child_processes, eventually

from tfos_notebook import Run
from tfos_notebook.runtime.driver.events import Registered, TaskState
from tfos_notebook.runtime.host.orphans import kill_attempts_before, run_marks, scan_host

pytestmark = pytest.mark.hostwide  # its leftovers must not meet another test's cleanup --kill


def _python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_fork_is_refused_with_the_reason_where_it_is_not_safe(tmp_path):
    """Every OS thread counts, native ones too (a faulthandler watchdog, as PySpark starts for
    ``PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS``), save the pools of libraries known to survive a fork
    (numpy's OpenBLAS, pyarrow's jemalloc), counted exactly; and a native library that does not
    survive one is seen mapped in, whatever loaded it (here a file of CUDA's runtime's name, mapped)."""
    out = _python("""
        import faulthandler, json, mmap, os, sys, threading
        from tfos_notebook.runtime.node.task.forked import fork_refusal, os_threads

        seen = {"clean": fork_refusal({}), "asked": fork_refusal({"TFOS_NODE_START": "spawn"})}
        import numpy, pyarrow  # noqa: their thread pools (OpenBLAS's, jemalloc's) start here
        seen["pools"] = [len(os_threads()) > 1, fork_refusal({})]
        done = threading.Event()
        thread = threading.Thread(target=done.wait)
        thread.start()
        seen["thread"] = fork_refusal({})
        done.set()
        thread.join()
        faulthandler.dump_traceback_later(3600)  # a native thread, as PySpark's watchdog is
        seen["native"] = fork_refusal({})
        os.environ["PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS"] = "3600"
        seen["watchdog"] = fork_refusal({})
        faulthandler.cancel_dump_traceback_later()
        with open(os.path.join(sys.argv[1], "libcudart.so.12"), "wb+") as f:
            f.write(b"0" * 4096)
            f.flush()
            mapped = mmap.mmap(f.fileno(), 4096)
            seen["cuda"] = fork_refusal({})
            mapped.close()
        print(json.dumps(seen))
    """, str(tmp_path))
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["clean"] is None and seen["asked"] == "TFOS_NODE_START=spawn"
    assert seen["pools"] == [True, None]  # threads there are, and each is a known pool's
    assert seen["thread"].endswith(" OS threads, 1 of them not of a library known to survive a fork")
    assert seen["native"].endswith(" OS threads, 1 of them not of a library known to survive a fork")
    assert seen["watchdog"].endswith(", the faulthandler watchdog that PySpark starts for "
                                     "PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS=3600 among them")
    assert seen["cuda"] == "this Python worker has loaded libcudart.so.12, which does not survive a fork"


def test_a_forked_process_is_what_a_spawned_one_would_be(tmp_path):
    """Its own session, pipes, environment, import path and working directory; the signal handlers
    and mask of a fresh interpreter; none of the worker's descriptors, exit handlers or random state;
    its exit code is its function's, once its threads have ended as at an interpreter's exit (a
    thread pool left open included)."""
    out = _python("""
        import atexit, json, os, socket, sys
        import numpy as np
        from tfos_notebook.runtime.node.task.forked import fork_child

        import signal
        tmp = sys.argv[1]
        held = socket.socket()  # a descriptor of the worker's
        signal.signal(signal.SIGUSR2, lambda *_: None)  # the worker's handlers and mask
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGALRM})
        atexit.register(lambda: open(os.path.join(tmp, f"exit-{os.getpid()}"), "w").close())
        np.random.seed(7)
        result_r, result_w = os.pipe()

        def probe(argv):
            from concurrent.futures import ThreadPoolExecutor
            import psutil
            ThreadPoolExecutor(1).submit(int).result()  # its idle thread must not hold the exit
            atexit.register(lambda: os.write(result_w, b"|own exit handler ran"))
            print("to stdout")
            print("to stderr", file=sys.stderr)
            os.write(result_w, json.dumps({
                "argv": argv, "cwd": os.getcwd(), "env": os.environ.get("PROBE"), "pythonpath": os.environ.get("PYTHONPATH"),
                "path0": sys.path[0], "session": os.getsid(0) == os.getpid(), "draw": float(np.random.random()),
                "held": os.readlink(f"/proc/self/fd/{held.fileno()}"), "stdin": sys.stdin.readline().strip(),
                "usr2": signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL,
                "pipe": signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN,
                "int": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
                "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, set()))}).encode())
            return 3

        answers = []
        for i in range(2):
            command = [sys.executable, "-m", "some.module", str(i), "last"]
            child = fork_child(probe, command, {"PROBE": "yes", "PYTHONPATH": "/extra"}, tmp, (result_w,), ["/extra", *sys.path])
            child.stdin.write(b"hello\\n")
            child.stdin.close()
            streams = child.stdout.read().decode(), child.stderr.read().decode()
            answers.append({"code": child.wait(10), "streams": streams})
        os.close(result_w)
        results = os.read(result_r, 1 << 20).decode()
        print(json.dumps({"answers": answers, "results": results, "parent": os.getpid()}))
    """, str(tmp_path))
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert [a["code"] for a in seen["answers"]] == [3, 3]
    assert all(a["streams"] == ["to stdout\n", "to stderr\n"] for a in seen["answers"])
    firsts = [json.loads(part.split("|")[0]) for part in seen["results"].split("|own exit handler ran") if part]
    assert len(firsts) == 2 and seen["results"].count("|own exit handler ran") == 2
    for i, child in enumerate(firsts):
        assert child["argv"] == ["some.module", str(i), "last"]
        assert child["usr2"] and child["pipe"] and child["int"] and child["blocked"] == []  # as a fresh interpreter's
        assert child["cwd"] == str(tmp_path) and child["env"] == "yes" and child["pythonpath"] == "/extra"
        assert child["path0"] == "/extra" and child["session"] and child["stdin"] == "hello"
        assert child["held"] == "/dev/null"
    assert firsts[0]["draw"] != firsts[1]["draw"]  # numpy's global state reseeded in each
    assert sorted(os.listdir(tmp_path)) == [f"exit-{seen['parent']}"]  # the worker's exit handler ran in it alone


def test_a_forked_node_process_is_found_by_its_nodes_record_once_its_node_is_gone():
    """The system shows a forked process its worker's environment, without ``TFOS_RUN_ID``: its node
    records it (pid, start time, run), the leftover scan reads the run from that record, and a
    relaunch's kill of earlier attempts finds it too; nothing is written into the process's memory."""
    run_id = f"20260103-000000-{os.getpid():06x}"
    node = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from tfos_notebook.runtime.node.task import task
        from tfos_notebook.runtime.wire.plan import NodePlan

        plan = NodePlan(sys.argv[1], "127.0.0.1", 1, b"s", None, None, [("chief", 0)], "file:///", "/tmp")
        node = task._Node(plan, 0, [])
        print(type(node.proc).__name__, node.proc.pid, flush=True)
        time.sleep(300)
    """), run_id], stdout=subprocess.PIPE, text=True)
    child, node_proc = None, psutil.Process(node.pid)
    try:
        kind, pid = node.stdout.readline().split()
        child = psutil.Process(int(pid))
        assert kind == "ForkedChild"
        assert child.cmdline() == node_proc.cmdline()  # the worker's (here the node's own process's)
        assert "TFOS_RUN_ID" not in child.environ()
        marks = run_marks(child)
        assert (marks.run_id, marks.task, marks.attempt) == (run_id, "chief:0", 0)
        assert not [x for x in scan_host(gpu_holders=[]) if x.run_id == run_id]  # its node is alive
        os.kill(child.pid, signal.SIGSTOP)  # its watchdog would end it with its node
        node.kill()
        node.wait()
        found = [x for x in scan_host(gpu_holders=[]) if x.run_id == run_id]
        assert [(x.pid, x.task) for x in found] == [(child.pid, "chief:0")]
        assert kill_attempts_before(run_id, 1) == [child.pid]
        assert eventually(lambda: not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, timeout=10)
    finally:
        node.kill()
        if child is not None and child.is_running():
            child.kill()


def _leaves_its_environment(args, ctx):
    import time

    time.sleep(60)


def test_on_spark_each_node_says_how_its_process_started_and_is_found_either_way(local_spark):
    """A node's process is forked unless its Python worker was not fit to fork (a worker this test
    session reused may have imported TensorFlow) or ``TFOS_NODE_START=spawn`` asks for a fresh
    interpreter; each node's registration says which, the system shows ``TFOS_RUN_ID`` in the
    environment of a spawned one alone, and the run's helpers and scan find both (a forked one by its
    node's record of it)."""
    seen = {}
    for asked, env in (("default", {}), ("spawn", {"TFOS_NODE_START": "spawn"})):
        run = Run(local_spark.sparkContext, _leaves_its_environment, None, 2, env=env).start()
        try:
            assert run.events.wait_for(
                lambda evs: sum(isinstance(e, TaskState) and e.state == "running" for e in evs) == 2, timeout=60)
            assert eventually(lambda: len(child_processes(run.run_id)) == 2)  # noqa: B023
            started = {f"{e.role}:{e.index}": e.started for e in run.events.events(Registered)}
            for proc in child_processes(run.run_id):
                marks = run_marks(proc)
                assert ("TFOS_RUN_ID" in proc.environ()) == (started[marks.task] != "fork"), started
            seen[asked] = sorted(started.values())
        finally:
            run.stop()
        assert eventually(lambda: not child_processes(run.run_id))  # noqa: B023
    assert all(how == "fork" or how.startswith("spawn: this Python worker") for how in seen["default"]), seen
    assert seen["spawn"] == ["spawn: TFOS_NODE_START=spawn"] * 2


def test_a_fork_that_fails_falls_back_to_a_fresh_interpreter():
    """A worker too big to copy under the host's memory limits (``fork`` fails with ENOMEM) still
    starts its node: the process is spawned, and its registration says why."""
    out = _python("""
        import errno, os, sys
        import psutil
        from tfos_notebook.runtime.node.task import task
        from tfos_notebook.runtime.wire.plan import NodePlan

        def no_memory():
            raise OSError(errno.ENOMEM, "Cannot allocate memory")

        os.fork = no_memory
        plan = NodePlan(sys.argv[1], "127.0.0.1", 1, b"s", None, None, [("chief", 0)], "file:///", "/tmp")
        node = task._Node(plan, 0, [])
        try:
            print(type(node.proc).__name__, "|", node.how_started, "|", psutil.Process(node.proc.pid).environ()["TFOS_RUN_ID"])
        finally:
            node.close()
    """, f"20260104-000000-{os.getpid():06x}")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"Popen | spawn: fork failed: [Errno 12] Cannot allocate memory | 20260104-000000-{os.getpid():06x}"


def _quick(args, ctx):
    return ctx.job_name


@pytest.mark.parametrize("watchdog", [False, True], ids=["fresh-workers", "faulthandler-watchdog"])
def test_on_a_standalone_cluster_nodes_fork_inside_fresh_pyspark_workers_and_spawn_beside_a_watchdog(
        standalone_cluster, spark_slot, watchdog):
    """In a new application's Python workers, on a real standalone cluster, each node's process is
    forked; where PySpark runs its faulthandler watchdog (``PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS``,
    a native thread Python does not list), each is spawned, and its registration says why."""
    env = {"spark.executorEnv.PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS": "3600"} if watchdog else {}
    spark = spark_slot.get(f"fork-{watchdog}", {**standalone_cluster.spark_conf(gpus_per_task=0, executor_cores=1),
                                                 **env})
    run = Run(spark.sparkContext, _quick, None, 2).start()
    assert run.wait(120) == "chief"
    started = sorted(e.started for e in run.events.events(Registered))
    if watchdog:
        assert all(s.startswith("spawn: this Python worker runs ") and s.endswith(
            "the faulthandler watchdog that PySpark starts for PYTHON_TRACEBACK_DUMP_INTERVAL_SECONDS=3600 among them")
                   for s in started), started
    else:
        assert started == ["fork", "fork"], started
