"""Soak: many launches in one SparkContext leave nothing behind (``bench/soak.py`` is the long run).

The launches cycle through every way a run ends (``bench/soak.py``'s ``KINDS``: it returns, it is
stopped mid-run, the function raises, a node's training process is SIGKILLed and the run relaunched,
the reservation times out, a DataFrame is fed in-stage). Afterwards no process of any run is alive,
the driver's file descriptors, threads and listening ports are back to where they were after the
first round, only the TensorBoard the user started is running, every run's registry record is
final and owned by this process, and the driver's RSS grew by less than a bound (printed).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))

import soak  # noqa: E402

from tfos_notebook.runtime.host.timeouts import Deadline  # noqa: E402
from tfos_notebook.state import registry  # noqa: E402
from tfos_notebook.state.files import STATE_DIR_ENV  # noqa: E402
from tfos_notebook.tensorboard import process  # noqa: E402

ROUNDS = 8  # of len(soak.KINDS) launches each; two TensorBoards attached to runs on the way
RSS_GROWTH_MIB = 30


@pytest.mark.slow
def test_many_launches_of_every_ending_leave_no_process_thread_fd_port_or_record_behind(local_spark4, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))  # this test's registries only
    users_board = process.start(str(tmp_path / "logs"))  # the user's own TensorBoard: it must stay
    try:
        # the first round also brings in what a first launch of each kind imports (Arrow, TensorBoard)
        warmup, states = soak.soak(local_spark4, len(soak.KINDS), tensorboard_every=len(soak.KINDS))
        base = warmup[-1]
        samples, more = soak.soak(local_spark4, ROUNDS * len(soak.KINDS), tensorboard_every=4 * len(soak.KINDS))
        states.update(more)
        assert soak.settle(set(states)) == []  # no node child, nor anything a node started

        def back_to_base() -> bool:
            now = soak.sample(-1, "end", "", 0)
            return now.threads <= base.threads and now.fds <= base.fds + 1 and now.listening == base.listening

        assert Deadline(10).wait_until(back_to_base, interval=0.2), (base, soak.sample(-1, "end", "", 0), threading.enumerate())
        end = soak.sample(-1, "end", "", 0)
        growth = end.rss_mib - base.rss_mib
        print(f"\n{len(samples)} launches after a warm-up round of {len(warmup)}: driver fds {base.fds} -> "
              f"{end.fds}, threads {base.threads} -> {end.threads}, listening ports {base.listening} -> "
              f"{end.listening}, RSS {base.rss_mib:.1f} -> {end.rss_mib:.1f} MiB ({growth:+.1f}), "
              f"JVM RSS {base.jvm_rss_mib:.0f} -> {end.jvm_rss_mib:.0f} MiB")
        assert growth < RSS_GROWTH_MIB
        assert soak.tensorboards() == [users_board.info.pid]
        records = {r.run_id: r for r in registry.list_runs()}
        assert {run_id: records[run_id].state for run_id in states} == states
        assert all(r.owner_pid == os.getpid() and r.ended_at for r in records.values())
        assert not [name for name in os.listdir(registry.registry_dir()) if name.endswith(".stop")]
        assert sorted(s.outcome for s in samples) == sorted(soak.EXPECTED[s.kind] for s in samples)
    finally:
        assert process.stop(users_board.info)
