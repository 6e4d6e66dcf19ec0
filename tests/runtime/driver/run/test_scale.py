"""The driver at scale, by simulation: many protocol-speaking nodes against one real run (see
``bench/scale.py`` for the figures at up to 1,000 nodes)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from fuzzing import settles

from tfos_notebook.runtime.wire import channel

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))

from scale import simulated_run  # noqa: E402
from simnodes import Workload  # noqa: E402


def test_200_simulated_nodes_register_within_10s_and_stream_everything_within_30s(tmp_path):
    figures = simulated_run(200, procs=2, work=Workload(log_batches=5, lines_per_batch=10, file_chunks=2,
                                                       chunk_bytes=4096), mirror_dir=str(tmp_path), timeout=60)
    # simulated_run checks the chief's result, every log line and every mirrored byte itself
    assert figures["register_s"] < 10
    assert figures["total_s"] < 30


def test_a_burst_of_connections_past_the_default_listen_backlog_all_reach_the_server():
    server = channel.ControlServer("127.0.0.1", channel.new_secret(), lambda conn, msg: None)
    burst = []
    try:
        with server._lock:  # holds the accept loop after its first accept: the kernel queues the rest
            for _ in range(300):  # Python's default backlog (128) made these time out
                burst.append(socket.create_connection(server.address, timeout=3))
        for sock in burst:
            sock.close()
        assert settles(lambda: server.rejected == 300, timeout=20)
    finally:
        for sock in burst:
            sock.close()
        server.close()
