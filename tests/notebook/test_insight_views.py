"""Progress and throughput in the monitor, the text lines and the runs registry, from the runtime's
own ``Pace`` events; the Profile button; a profile refused at once (an ended run, a run without
TensorBoard, a bad request, TensorBoard without its Profile tab)."""

from __future__ import annotations

import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
from events_fixture import RUN, two_node_run
from nbhelpers import table_rows

from tfos_notebook.errors import ConfigError
from tfos_notebook.notebook.monitor import Monitor
from tfos_notebook.notebook.text import TextMonitor
from tfos_notebook.notebook.tracker import pace_record
from tfos_notebook.notebook.view import RunView
from tfos_notebook.runtime.driver.events import EventStream, LaunchSubmitted, Pace, ProfileCaptured, TaskState
from tfos_notebook.runtime.driver.run.lifecycle import RunState
from tfos_notebook.runtime.driver.run.profiles import check_request, request_profile
from tfos_notebook.tensorboard import profiles

WHERE = [(1, 4), (1, 8), (2, 4)]  # (epoch from 0, step in it) after each report: 3 epochs of 8 steps


def keras_paces(t0: float, reports: int = 3) -> list[Pace]:
    """Two nodes from the middle of epoch 2 of 3, 4 steps/s and 128 examples/s each."""
    return [Pace(RUN, task=task, role=role, index=0, host=f"10.0.0.{task + 1}", steps=4 * (i + 1), secs=1.0,
                 window_steps=4, step_secs=0.25, examples=128 * (i + 1), window_examples=128,
                 epoch=WHERE[i][0], epochs=3, epoch_step=WHERE[i][1], epoch_steps=8, t=t0 + 3 + i)
            for i in range(reports) for task, role in ((0, "chief"), (1, "worker"))]


def running(events: list) -> list:
    return [e for e in events if type(e).__name__ not in ("TaskState", "RunFinished")][:10]


def test_the_monitor_shows_a_progress_bar_throughput_eta_and_each_node_rate():
    monitor = Monitor("digits", RUN, on_stop=lambda: None, on_profile=lambda: "profiled")
    monitor.update([*running(two_node_run(steps=0)), *keras_paces(1000.0, reports=1)], now=1005.0)
    text = monitor.throughput.value
    assert 'class="tfos-progress-bar"' in text and "width:50.0%" in text
    assert ("epoch 2/3 step 4/8 (50%) · 4 steps/s · 256 examples/s · elapsed 0:05 · ETA 0:03") in text
    rows = table_rows(monitor.tasks.get_state()["value"])
    assert [r[9:] for r in rows[1:]] == [["4", "n/m"], ["4", "n/m"]]
    assert "InputMode.TENSORFLOW" in monitor.tasks.value  # why the input wait is not measured
    assert monitor.profile_button.layout.display == ""  # running: the Profile button shows


def test_an_ended_run_shows_its_totals_and_no_profile_button():
    monitor = Monitor("digits", RUN, on_stop=lambda: None, on_profile=lambda: "profiled")
    events = two_node_run(steps=0)
    monitor.update([*events[:-3], *keras_paces(1000.0), *events[-3:]])
    assert ("epoch 3/3 step 4/8 (83%) · 12 steps, 768 examples · 4 steps/s · 256 examples/s · took 0:03"
            in monitor.throughput.value)
    assert "ETA" not in monitor.throughput.value
    assert monitor.profile_button.layout.display == "none"


def test_the_profile_button_records_on_a_thread_and_shows_where_the_traces_are():
    said = []
    monitor = Monitor("digits", RUN, on_stop=lambda: None, on_profile=lambda: said.append(1) or "[tfos] profile X")
    monitor.update(running(two_node_run(steps=0)))
    monitor.profile_button.click()  # two training nodes: the first click warns and records nothing
    assert said == [] and monitor.profile_button.description == "Profile anyway"
    assert "2 training nodes" in monitor.profile_result.value and "crash a node" in monitor.profile_result.value
    monitor.profile_button.click()
    for _ in range(100):
        if "profile X" in monitor.profile_result.value:
            break
        time.sleep(0.01)
    assert said == [1] and "[tfos] profile X" in monitor.profile_result.value
    assert not monitor.profile_button.disabled


def test_the_profile_button_of_a_single_training_node_records_at_the_first_click():
    said = []
    monitor = Monitor("digits", RUN, on_stop=lambda: None, on_profile=lambda: said.append(1) or "[tfos] profile Y")
    chief_alone = [replace(e, num_tasks=1, roles=("chief:0",)) if isinstance(e, LaunchSubmitted) else e
                   for e in running(two_node_run(steps=0)) if getattr(e, "role", "chief") == "chief"]
    monitor.update(chief_alone)
    assert [r.role for r in monitor.view.rows.values()] == ["chief"]
    monitor.profile_button.click()
    for _ in range(100):
        if "profile Y" in monitor.profile_result.value:
            break
        time.sleep(0.01)
    assert said == [1] and monitor.profile_button.description == "Profile"


def test_text_lines_say_the_progress_every_few_seconds_and_the_totals_at_the_end():
    lines: list[str] = []
    text = TextMonitor("digits", RUN, write=lines.append, step_every=5.0)
    events = two_node_run(steps=0)
    text.update([*events[:-3], *keras_paces(1000.0)])
    text.update(events[-3:])
    progress = [line for line in lines if "steps/s" in line]
    assert progress == [
        "[tfos] digits: epoch 3/3 step 4/8 (83%) · 4 steps/s · 256 examples/s · elapsed 0:05 · ETA 0:01",
        "[tfos] digits: throughput: epoch 3/3 step 4/8 (83%) · 12 steps, 768 examples · 4 steps/s · 256 examples/s "
        "· took 0:03"]


def test_plain_report_users_get_steps_per_second():
    view = RunView("r", RUN)
    view.apply(Pace(RUN, task=0, role="chief", index=0, host="h", steps=20, secs=2.0, window_steps=20,
                    step_secs=0.1, t=1.0))
    assert view.progress().steps_per_sec == 10.0 and view.progress().fraction is None


def test_the_registry_record_carries_the_pace_for_the_sidebar():
    view = RunView("r", RUN)
    for e in keras_paces(1000.0, reports=1):
        view.apply(e)
    assert pace_record(view.progress()) == {"steps_per_sec": 4.0, "examples_per_sec": 256.0, "fraction": 0.5,
                                            "epoch": 2, "epochs": 3, "eta": 3.0}


class FakeRun:
    """What a profile request reads of a run, for the refusals that need no cluster."""

    name = "digits"
    events = EventStream()
    done = False
    nodes: list = []

    def __init__(self, state: RunState, sink=lambda node, chunks: {}) -> None:
        self.state, self.file_sink = state, sink

    def tell(self, nodes, msg) -> None:
        raise AssertionError("a refused request sends nothing")


def test_a_profile_of_an_ended_or_reserving_run_or_without_tensorboard_is_refused_at_once():
    with pytest.raises(ConfigError) as ended:
        check_request(FakeRun(RunState.FINISHED), 5, None, None)
    assert str(ended.value) == ("run digits has ended (finished): only a running run can be profiled, and its nodes' "
                                "processes are gone; profile the next run while it trains")
    with pytest.raises(ConfigError, match=r"^run digits is reserving: its nodes are not training yet; profile it "
                                          r"once it runs$"):
        check_request(FakeRun(RunState.RESERVING), 5, None, None)
    with pytest.raises(ConfigError, match=r"^give either seconds or steps: how long each node records its trace$"):
        check_request(FakeRun(RunState.RUNNING), 5, 10, None)
    with pytest.raises(ConfigError) as no_board:
        check_request(FakeRun(RunState.RUNNING, sink=None), 5, None, None)
    assert str(no_board.value) == ("run digits has no TensorBoard to receive the traces: start one first "
                                   "(%tfos_tensorboard digits, or tfos_notebook.tensorboard.attach_tensorboard(run))")


def test_a_node_whose_process_dies_during_a_profile_is_answered_at_once_with_the_likely_cause():
    class Dying(FakeRun):
        """Two running nodes; worker:0's process dies once the order is sent (as TensorFlow's
        profiler made it do in a multi-worker run), and chief:0's trace arrives."""

        def __init__(self) -> None:
            super().__init__(RunState.RUNNING)
            self.events = EventStream()
            live = SimpleNamespace(live=True)
            self.nodes = [SimpleNamespace(name=n, state=live, conn=object()) for n in ("chief:0", "worker:0")]

        def tell(self, nodes, msg) -> None:
            self.events.publish(TaskState(RUN, task=1, role="worker", index=0, state="failed", detail="exit -6"))
            self.events.publish(ProfileCaptured(RUN, task=0, role="chief", index=0, session=msg.session, ok=True))

    began = time.monotonic()
    result = request_profile(Dying(), seconds=60)
    assert time.monotonic() - began < 20  # far from the 60 s it would wait for a node that is gone
    assert result.traces == ["chief:0"]
    assert result.failures == {"worker:0": "its process ended (failed) before its trace arrived: TensorFlow's "
                                           "profiler can crash a node of a synchronous multi-worker run as it "
                                           "collects the trace (docs/insight.md)"}


def test_a_profile_without_the_profile_plugin_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(profiles, "has_profile_plugin", lambda: False)
    with pytest.raises(profiles.ProfilePluginMissing) as missing:
        profiles.check_profile_plugin()
    assert str(missing.value) == (
        "TensorBoard on the driver has no Profile tab: the tensorboard-plugin-profile package is not installed. "
        'Install it with pip install "tfos_notebook[profile]" (or pip install tensorboard-plugin-profile) in the '
        "kernel's Python, then start the run's TensorBoard again (%tfos_tensorboard RUN --stop, then "
        "%tfos_tensorboard RUN) and profile")
    assert profiles.profile_url("/proxy/6006/") == "/proxy/6006/#profile"


def test_the_profile_tab_opens_under_the_databricks_driver_proxy_too():
    from tfos_notebook.runtime.driver.spark.databricks import AccessMode, DatabricksContext
    from tfos_notebook.tensorboard.urls import tensorboard_url

    # faked: a dedicated cluster's context (no Databricks here); the Profile tab's pages find their
    # API under whatever path prefix the proxy serves them at
    where = DatabricksContext("15.4", AccessMode.DEDICATED, cluster_id="0101-abc", workspace_id="1234",
                              browser_host="adb-1.azuredatabricks.net")
    assert profiles.profile_url(tensorboard_url(6006, where)) == \
        "https://adb-1.azuredatabricks.net/driver-proxy/o/1234/0101-abc/6006/#profile"


def test_on_databricks_the_kernel_reloads_the_tensorboard_frame_when_runs_or_dashboards_appear():
    from tfos_notebook.notebook.pagewatch import PageWatch, cross_origin_frame
    from tfos_notebook.notebook.panel import TensorBoardPanel
    from tfos_notebook.runtime.driver.spark.databricks import AccessMode, DatabricksContext

    # faked: a Databricks cluster's context, and TensorBoard's answers as the run goes on
    where = DatabricksContext("15.4", AccessMode.DEDICATED, cluster_id="c", workspace_id="1", browser_host="h")
    assert cross_origin_frame(where) and not cross_origin_frame(None)
    answers = [((), ("timeseries",)), ((), ("timeseries",)), (("chief_0",), ("scalars", "timeseries")),
               (("chief_0",), ("scalars", "timeseries")), None, (("chief_0",), ("profile", "scalars", "timeseries"))]
    panel = TensorBoardPanel()
    panel.show("/driver-proxy/o/1/c/6006/")
    first = panel.frame.value
    watch = PageWatch(6006, panel.reload, done=lambda: not answers, interval=0.01,
                      state=lambda: answers.pop(0) if answers else None)
    watch._thread.join(5)
    assert watch.reloads == 2 and panel.frame.value != first and "load 2" in panel.frame.value
