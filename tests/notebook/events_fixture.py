"""A realistic event sequence of a 2-node run (chief:0, worker:0), as the runtime publishes it."""

from __future__ import annotations

from tfos_notebook.runtime.driver.events import (
    ClusterReady,
    GpuAssigned,
    LaunchSubmitted,
    Log,
    Registered,
    RunFinished,
    RunStateChanged,
    Step,
    TaskState,
)

RUN = "20250101-000000-abcdef"


def two_node_run(t0: float = 1000.0, steps: int = 40, step_secs: float = 0.25, end: str = "finished",
                 error: str = "") -> list:
    """Reserving and the launch, reservations, GPUs, running, ``steps`` steps on each node (with a log line each),
    then the end."""
    events = [
        RunStateChanged(RUN, state="reserving", t=t0),
        LaunchSubmitted(RUN, num_tasks=2, roles=("chief:0", "worker:0"), t=t0),
        Registered(RUN, task=1, role="worker", index=0, host="10.0.0.2", executor_id="1", port=4001, pid=11,
                   gpus=("1",), t=t0 + 1),
        GpuAssigned(RUN, task=1, role="worker", index=0, host="10.0.0.2", addresses=("1",), t=t0 + 1),
        Registered(RUN, task=0, role="chief", index=0, host="10.0.0.1", executor_id="0", port=4000, pid=10,
                   gpus=("0",), t=t0 + 2),
        GpuAssigned(RUN, task=0, role="chief", index=0, host="10.0.0.1", addresses=("0",), t=t0 + 2),
        RunStateChanged(RUN, state="running", t=t0 + 2),
        ClusterReady(RUN, cluster_spec={"chief": ["10.0.0.1:4000"], "worker": ["10.0.0.2:4001"]}, t=t0 + 2),
        TaskState(RUN, task=0, role="chief", index=0, state="running", t=t0 + 2.1),
        TaskState(RUN, task=1, role="worker", index=0, state="running", t=t0 + 2.1),
    ]
    t = t0 + 3
    for i in range(steps):
        for task, role in ((0, "chief"), (1, "worker")):
            events.append(Log(RUN, task=task, role=role, index=0, stream="stdout", line=f"step {i} on {role}", t=t))
            events.append(Step(RUN, task=task, role=role, index=0, step=i, metrics={"loss": 1.0 / (i + 1)}, t=t))
        t += step_secs
    final = "finished" if end == "finished" else "failed" if end == "failed" else "stopped"
    events += [
        TaskState(RUN, task=0, role="chief", index=0, state=final, t=t),
        TaskState(RUN, task=1, role="worker", index=0, state=final, t=t),
        RunFinished(RUN, state=end, error=error, t=t + 0.1),
    ]
    return events
