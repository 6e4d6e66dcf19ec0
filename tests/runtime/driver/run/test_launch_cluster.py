"""Launches on the real standalone cluster (master + 2 workers, 1 core and 2 fake GPUs each)."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from procs import child_processes, eventually
from sparkstate import executor_ids

from tfos_notebook import NodeError, PreflightError, Run
from tfos_notebook.examples.digits import DigitsArgs, train
from tfos_notebook.runtime.driver.events import ClusterReady, GpuAssigned, Registered, TaskState
from tfos_notebook.runtime.wire import channel


def slow_echo(args, ctx):
    import os
    import time

    time.sleep(args)
    return {"gpus": ctx.gpus, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "executor": ctx.spark_executor_id}


def test_bad_connections_are_rejected_while_a_run_in_flight_completes(standalone):
    run = Run(standalone.sparkContext, slow_echo, 4, 2).start()
    assert run.events.wait_for(lambda evs: any(isinstance(e, ClusterReady) for e in evs), timeout=60)
    address = run.control.server.address
    # 1. a client that does not know the secret
    with pytest.raises((channel.ChannelError, OSError)):
        channel.connect(*address, channel.new_secret()).recv()
    # 2. a malformed frame instead of the handshake
    raw = socket.create_connection(address)
    raw.recv(1024)
    raw.sendall(struct.pack(">I", 3) + b"\xc1\xc1\xc1")
    # 3. a frame announcing 1 GiB
    big = socket.create_connection(address)
    big.recv(1024)
    big.sendall(struct.pack(">I", 1 << 30))
    assert eventually(lambda: run.control.server.rejected >= 3, timeout=10)
    results = run.wait(120)
    assert run.state == "finished" and results is not None
    raw.close()
    big.close()


def test_gpu_addresses_and_executor_ids_come_from_spark(standalone):
    run = Run(standalone.sparkContext, slow_echo, 0, 2, gpus_per_node=1).start()
    run.wait(120)
    registered = run.events.events(Registered)
    executors = executor_ids(standalone.sparkContext)
    assert len(executors) == 2 and {e.executor_id for e in registered} == executors
    assert all(len(e.gpus) == 1 for e in registered)
    assert len(run.events.events(GpuAssigned)) == 2
    for r in run.results.values():
        assert r["cuda"] == ",".join(r["gpus"]) and len(r["gpus"]) == 1


def test_three_nodes_on_two_slots_fail_within_seconds_naming_the_slots(standalone):
    t0 = time.monotonic()
    with pytest.raises(PreflightError) as info:
        Run(standalone.sparkContext, slow_echo, 0, 3).start()
    elapsed = time.monotonic() - t0
    assert elapsed <= 30, elapsed  # a ceiling: the point is before Spark's ten minutes of slot checks
    message = str(info.value)
    assert "needs 3 task slots at once but the cluster has 2" in message
    executors = executor_ids(standalone.sparkContext)
    assert len(executors) == 2
    assert all(f"executor {e} on 127.0.0.1: 1 core(s)" in message for e in executors), message
    assert "ask for at most 2 nodes" in message


def crash_on_chief(args, ctx):
    import time

    if ctx.job_name == "chief":
        time.sleep(1)
        raise RuntimeError("chief ran out of patience")
    time.sleep(300)


def test_node_exception_leaves_no_child_and_the_context_launches_again(standalone):
    sc = standalone.sparkContext
    run = Run(sc, crash_on_chief, None, 2).start()
    assert eventually(lambda: len(child_processes(run.run_id)) == 2, timeout=60)
    with pytest.raises(NodeError) as info:
        run.wait(120)
    assert info.value.role == "chief" and "RuntimeError: chief ran out of patience" in str(info.value)
    assert "in crash_on_chief" in info.value.traceback_text
    assert eventually(lambda: not child_processes(run.run_id))
    again = Run(sc, slow_echo, 0, 2).start()
    again.wait(120)
    assert again.state == "finished"


def test_multiworker_keras_training_lowers_the_loss_and_the_chief_writes_a_checkpoint(standalone, tmp_path):
    run = Run(standalone.sparkContext, train, DigitsArgs(epochs=4), 2, model_dir=str(tmp_path / "model")).start()
    result = run.wait(400)
    loss = result["loss"]
    assert loss[-1] < loss[0] * 0.5, loss
    assert result["accuracy"] > 0.85
    assert (tmp_path / "model" / "ckpt.index").exists()
    worker = run.results["worker:0"]
    assert worker["loss"] == pytest.approx(loss)  # synchronous training: both replicas saw the same loss
    assert {e.state for e in run.events.events(TaskState)} == {"running", "finished"}


def test_more_gpus_than_spark_assigns_fail_before_submitting(standalone):
    with pytest.raises(PreflightError, match="2 GPU\\(s\\) per node were asked for, but each task gets 1"):
        Run(standalone.sparkContext, slow_echo, 0, 2, gpus_per_node=2).start()
