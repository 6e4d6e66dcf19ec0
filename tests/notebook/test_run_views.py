"""The run's views (view model, widget monitor, text monitor) fed with the runtime's own event types."""

from __future__ import annotations

import html
import re
import threading

import pytest
from events_fixture import RUN, two_node_run
from nbhelpers import table_rows

from tfos_notebook.notebook.frontend import OutputTarget
from tfos_notebook.notebook.monitor import Monitor
from tfos_notebook.notebook.pump import EventPump
from tfos_notebook.notebook.text import TextMonitor
from tfos_notebook.notebook.view import RunView, format_duration, timeline
from tfos_notebook.runtime.driver.events import (
    EventStream,
    FindingRaised,
    LaunchSubmitted,
    Log,
    MlflowRun,
    NodeMemory,
    RunFinished,
    RunStateChanged,
    Step,
)
from tfos_notebook.runtime.driver.events.finding import Finding


def test_view_folds_a_run_into_rows_reservations_and_state():
    view = RunView("digits", RUN)
    for e in two_node_run(steps=3):
        view.apply(e)
    assert (view.requested, view.registered, view.state) == (2, 2, "finished")
    chief, worker = view.rows[0], view.rows[1]
    assert (chief.name, chief.host, chief.port, chief.gpus, chief.state) == ("chief:0", "10.0.0.1", 4000, ("0",),
                                                                           "finished")
    assert (worker.executor_id, worker.step, worker.loss) == ("1", 2, pytest.approx(1 / 3))
    assert view.logs[-1] == "[worker:0] step 2 on worker"
    assert view.elapsed() == pytest.approx(3 + 3 * 0.25 + 0.1)


def test_timeline_gives_when_the_run_reached_each_milestone():
    events = two_node_run(t0=1000.0, steps=3)
    assert timeline(events) == {"started": 1000.0, "submitted": 1000.0, "registered": 1002.0, "first_step": 1003.0,
                                "last_step": 1003.5, "finished": 1003.85}
    assert timeline(events[:8]) == {"started": 1000.0, "submitted": 1000.0, "registered": 1002.0}  # no step yet
    assert timeline([]) == {}


def test_view_keeps_only_the_newest_log_lines():
    view = RunView("r", RUN, max_logs=5)
    for i in range(50):
        view.apply(Log(RUN, task=0, role="chief", index=0, stream="stdout", line=f"line {i}"))
    assert list(view.logs) == [f"[chief:0] line {i}" for i in range(45, 50)]


def test_durations_read_as_clock_time():
    assert (format_duration(5.9), format_duration(75.2), format_duration(3700)) == ("0:05", "1:15", "1:01:40")


def test_widget_shows_progress_task_rows_and_final_state():
    monitor = Monitor("digits", RUN, on_stop=lambda: None)
    events = two_node_run(steps=4)
    monitor.update(events[:4])  # launch + the worker's registration
    assert (monitor.progress.value, monitor.progress.max, monitor.progress_label.value) == (1, 2, "1/2")
    assert "reserving" in monitor.header.value
    monitor.update([NodeMemory(RUN, task=0, role="chief", index=0, host="10.0.0.1", rss_mib=1229, host_available_mib=800,
                               host_total_mib=16384, cap_mib=4096),
                    NodeMemory(RUN, task=1, role="worker", index=0, host="10.0.0.2", rss_mib=1024, host_available_mib=9000,
                               host_total_mib=16384)])
    monitor.update(events[4:])
    assert (monitor.progress.value, monitor.progress.max, monitor.progress.bar_style) == (2, 2, "success")
    assert "finished" in monitor.header.value and "digits" in monitor.header.value
    rows = table_rows(monitor.tasks.get_state()["value"])
    assert rows[0] == ["task", "host", "executor", "port", "GPUs", "memory", "state", "step", "loss", "steps/s",
                       "input wait"]
    assert rows[1] == ["chief:0", "10.0.0.1", "0", "4000", "0", "1.2/4.0 GiB · host 0.8 GiB free", "finished", "3",
                       "0.25", "-", "-"]
    assert rows[2] == ["worker:0", "10.0.0.2", "1", "4001", "1", "1.0 GiB", "finished", "3", "0.25", "-", "-"]
    assert "[chief:0] step 3 on chief" in monitor.logs.value
    assert monitor.stop_button.disabled and monitor.stop_button.description == "Finished"


def test_widget_log_area_shows_the_newest_lines_role_prefixed():
    monitor = Monitor("r", RUN, on_stop=lambda: None, visible_logs=20)
    monitor.update([Log(RUN, task=1, role="worker", index=0, stream="stderr", line=f"<{i}>") for i in range(500)])
    text = monitor.logs.value
    assert text.count("[worker:0]") == 20 and "[worker:0] &lt;499&gt;" in text and "&lt;479&gt;" not in text
    assert "last 20 of 500 lines; the run's logs() has the rest" in text


def test_widget_shows_findings_and_the_failure():
    finding = Finding(code="slots", cause="2 tasks need 2 slots, 1 is free", evidence=("executors: 1",),
                      remedy="add an executor")
    monitor = Monitor("r", RUN, on_stop=lambda: None)
    monitor.update([LaunchSubmitted(RUN, num_tasks=2, roles=("chief:0", "worker:0")),
                    FindingRaised(RUN, finding=finding),
                    RunFinished(RUN, state="failed", error="cannot launch 2 nodes:\n- 2 tasks need 2 slots")])
    assert "2 tasks need 2 slots, 1 is free" in monitor.findings.value
    assert "fix: add an executor" in monitor.findings.value
    assert "cannot launch 2 nodes" in monitor.findings.value
    assert monitor.progress.bar_style == "danger"


def test_stop_button_calls_back_once_off_the_clicking_thread_and_shows_stopping():
    called = []
    done = threading.Event()

    def on_stop():
        called.append(threading.current_thread().name)
        done.set()

    monitor = Monitor("r", RUN, on_stop=on_stop)
    monitor.update(two_node_run(steps=1)[:10])
    monitor.stop_button.click()
    monitor.stop_button.click()
    assert done.wait(5)
    assert called == ["tfos-stop"]
    assert monitor.stop_button.disabled and "stopping" in monitor.header.value


def test_tensorboard_panel_is_hidden_until_shown_then_toggles_and_offers_a_new_tab_link_in_the_header():
    monitor = Monitor("r", RUN, on_stop=lambda: None)
    panel = monitor.tensorboard_panel
    assert panel.frame.layout.display == "none"
    assert panel.toggle.layout.display == "none" and panel.link.layout.display == "none"
    monitor.show_tensorboard("/proxy/6006/?a=1&b=2", height=400)
    frame = panel.frame.value
    assert re.search(r'<iframe class="tfos-tensorboard" data-url="/proxy/6006/\?a=1&amp;b=2"[^>]*height:400px', frame)
    # live: the frame's own document opens TensorBoard once it has runs, and reloads it every second
    doc = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    assert 'const TENSORBOARD_URL = "/proxy/6006/?a=1&b=2";' in doc
    assert "base + 'data/runs'" in doc and "app-header-reload button.reload-button" in doc
    assert "TensorBoard opens here once the run&#x27;s nodes write their first summaries." in doc
    assert panel.frame.layout.display == "" and panel.toggle.layout.display == ""
    assert panel.link.value == ('<a href="/proxy/6006/?a=1&amp;b=2" target="_blank" rel="noopener">'
                                "Open TensorBoard in a new tab</a>")
    assert panel.link in monitor.widget.children[0].children and panel.link.layout.display == ""
    panel.toggle.value = False
    assert panel.frame.layout.display == "none" and panel.link.layout.display == ""  # the link stays
    assert panel.toggle.description == "Show TensorBoard"
    panel.toggle.value = True
    assert panel.frame.layout.display == ""


def test_tensorboard_panel_says_when_tensorboard_stopped_or_failed():
    monitor = Monitor("r", RUN, on_stop=lambda: None)
    monitor.show_tensorboard("/proxy/6006/")
    monitor.tensorboard_note("TensorBoard did not start: <no port>", error=True)
    panel = monitor.tensorboard_panel
    assert "<iframe" not in panel.frame.value and "did not start: &lt;no port&gt;" in panel.frame.value
    assert panel.url is None and panel.toggle.layout.display == "none" and panel.frame.layout.display == ""
    assert panel.link.layout.display == "none"  # no link to a TensorBoard that is gone
    lines: list[str] = []
    TextMonitor("r", RUN, write=lines.append).tensorboard_note("TensorBoard stopped")
    assert lines == ["[tfos] r: TensorBoard stopped"]


def test_widget_offers_a_readable_text_fallback_in_its_display_bundle():
    monitor = Monitor("digits", RUN, on_stop=lambda: None)
    monitor.update(two_node_run(steps=1)[:4])
    bundle = monitor._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == monitor.widget.model_id
    assert bundle["text/plain"].startswith("run digits: reserving, 1/2 reserved")


def test_text_monitor_prints_reservations_states_throttled_steps_and_result():
    lines: list[str] = []
    text = TextMonitor("digits", RUN, write=lines.append, result=lambda: {"accuracy": 0.93}, step_every=5.0)
    events = two_node_run(steps=80, step_secs=0.25)  # 20 s of steps, 4 per second per node
    for i in range(0, len(events), 3):
        text.update(events[i:i + 3])
    assert lines[:4] == [
        "[tfos] digits: launching 2 nodes (chief:0, worker:0)",
        "[tfos] digits: reserved 1/2",
        "[tfos] digits: reserved 2/2",
        "[tfos] digits: cluster ready: chief:0 10.0.0.1:4000, worker:0 10.0.0.2:4001",
    ]
    steps = [line for line in lines if ": step " in line]
    assert 4 <= len(steps) <= 5, steps  # one line per 5 s, not 160
    assert all(line.endswith("(chief:0)") for line in steps)
    assert "[tfos] digits: chief:0, worker:0 finished" in lines
    assert lines[-1] == "[tfos] digits: finished in 0:23 (step 79  loss 0.0125); result: {'accuracy': 0.93}"
    assert not any("step 3 on chief" in line for line in lines)  # node output is not echoed


def test_text_monitor_summarises_a_failure_with_its_last_line():
    lines: list[str] = []
    text = TextMonitor("r", RUN, write=lines.append)
    error = "the function failed on worker:0 on h:\nTraceback...\nZeroDivisionError: division by zero"
    text.update(two_node_run(steps=1, end="failed", error=error))
    assert lines[-1] == ("[tfos] r: failed after 0:03 (step 0  loss 1): the function failed on worker:0 on h: ... "
                         "ZeroDivisionError: division by zero")


def test_pump_batches_events_and_stops_after_the_end():
    stream = EventStream()
    batches: list[list] = []
    for e in two_node_run(steps=2)[:6]:
        stream.publish(e)
    pump = EventPump(stream, batches.append, OutputTarget(), interval=0.2, tick=0.1)
    for i in range(100):
        stream.publish(Step(RUN, task=0, role="chief", index=0, step=i, metrics={}))
    stream.publish(RunFinished(RUN, state="finished"))
    assert pump.join(5)
    delivered = [e for b in batches for e in b]
    assert len(delivered) == 6 + 100 + 1
    assert len([b for b in batches if b]) <= 5  # a few renders, not one per event


def test_a_relaunch_shows_its_attempt_and_starts_the_rows_afresh():
    from tfos_notebook.notebook.monitor import header_html

    view = RunView("digits", RUN)
    for e in two_node_run(steps=3)[:-1]:  # all but the end
        view.apply(e)
    view.apply(RunStateChanged(RUN, state="relaunching"))
    assert view.state == "relaunching"
    view.apply(RunStateChanged(RUN, state="reserving", attempt=1))
    view.apply(LaunchSubmitted(RUN, num_tasks=2, roles=("chief:0", "worker:0"), attempt=1))
    assert view.attempt == 1 and view.registered == 0 and view.state == "reserving"
    assert {r.state for r in view.rows.values()} == {"scheduled"}
    assert "attempt 2" in header_html(view)
    lines = []
    text = TextMonitor("digits", RUN, write=lines.append)
    text.update([LaunchSubmitted(RUN, num_tasks=2, roles=("chief:0", "worker:0"), attempt=1)])
    assert any("launching 2 nodes again (attempt 2)" in line for line in lines)


def test_widget_draws_each_nodes_metrics_as_curves_from_the_steps():
    monitor = Monitor("digits", RUN, on_stop=lambda: None)
    assert monitor.curves.value == ""
    monitor.update(two_node_run(steps=30))
    svg = monitor.curves.value
    assert svg.count("<svg") == 1 and 'data-metric="loss"' in svg
    points = re.findall(r'data-node="(\w+:\d)" points="([^"]+)"', svg)
    assert [node for node, _ in points] == ["chief:0", "worker:0"]
    assert all(len(coords.split()) == 30 for _, coords in points)
    assert "loss 0.0333" in svg and "max 1" in svg and "step 29" in svg


def test_an_ended_run_leaves_a_static_copy_that_the_live_widget_hides():
    shown: list[dict] = []
    monitor = Monitor("digits", RUN, on_stop=lambda: None, show=shown.append)
    events = two_node_run(steps=3)
    monitor.update(events[:-1])
    assert shown == [] and "tfos-snapshot" not in monitor.header.value
    monitor.update(events[-1:])
    monitor.update([])
    assert len(shown) == 1  # once
    static = shown[0]["text/html"]
    assert static.startswith(f'<div class="tfos-snapshot" data-run-id="{RUN}">')
    assert "finished" in static and table_rows(static)[1][0] == "chief:0"
    assert len(re.findall(r'<polyline data-node="(?:chief|worker):0" points="[^"]+"', static)) == 2
    assert shown[0]["text/plain"].startswith("run digits: finished")
    assert f'<style>.tfos-snapshot[data-run-id="{RUN}"]{{display:none}}</style>' in monitor.header.value


def test_curves_keep_a_bounded_number_of_points_spanning_the_whole_run():
    from tfos_notebook.notebook.view import MAX_CURVE_POINTS

    view = RunView("r", RUN)
    for i in range(5000):
        view.apply(Step(RUN, task=0, role="chief", index=0, step=i, metrics={"loss": 1.0, "accuracy": 0.5}))
    points = view.rows[0].curves["loss"]
    assert len(points) <= MAX_CURVE_POINTS and points[0][0] == 0 and points[-1][0] == 4999


def test_the_monitor_and_the_text_lines_link_the_runs_mlflow_run():
    created = MlflowRun(RUN, mlflow_run_id="4f2a", experiment_id="3", tracking_uri="http://127.0.0.1:5000",
                        url="http://127.0.0.1:5000/#/experiments/3/runs/4f2a")
    failed = MlflowRun(RUN, mlflow_run_id="4f2a", experiment_id="3", tracking_uri="http://127.0.0.1:5000",
                       url=created.url, error="12 metric points, 0 params and 0 tags were not logged: "
                                              "MlflowException: API request failed", complete=True)
    monitor = Monitor("digits", RUN, on_stop=lambda: None)
    lines: list[str] = []
    text = TextMonitor("digits", RUN, write=lines.append)
    for view in (monitor, text):
        view.update([*two_node_run(steps=1)[:2], created])
    assert ('<a class="tfos-mlflow" href="http://127.0.0.1:5000/#/experiments/3/runs/4f2a" target="_blank" '
            'rel="noopener" title="The MLflow run of this run">MLflow run</a>') in monitor.header.value
    text.update([failed])
    assert lines[-2:] == ["[tfos] digits: MLflow run at http://127.0.0.1:5000/#/experiments/3/runs/4f2a",
                          "[tfos] digits: MLflow: 12 metric points, 0 params and 0 tags were not logged: "
                          "MlflowException: API request failed"]
    local = MlflowRun(RUN, mlflow_run_id="4f2a", experiment_id="0", tracking_uri="sqlite:////tmp/mlflow.db")
    monitor.update([local])
    assert ('<span class="tfos-mlflow" title="sqlite:////tmp/mlflow.db">MLflow run 4f2a</span>'
            in monitor.header.value)
    TextMonitor("r", RUN, write=lines.append).update([local])
    assert lines[-1] == "[tfos] r: MLflow run 4f2a in sqlite:////tmp/mlflow.db"


def test_both_monitors_say_which_keras_tf_keras_is_on_the_nodes():
    """Each node registers with the Keras its ``tf.keras`` is (tf-keras where installed, else the
    ``keras`` package: Keras 3 from Databricks 15.4 on, Keras 2 on 14.3); the views say it once."""
    from dataclasses import replace

    from tfos_notebook.runtime.driver.events import Registered

    events = [replace(e, keras="tf-keras 2.16.0") if isinstance(e, Registered) else e for e in two_node_run(steps=2)]
    lines: list[str] = []
    TextMonitor("digits", RUN, write=lines.append).update(events)
    assert ("[tfos] digits: cluster ready: chief:0 10.0.0.1:4000, worker:0 10.0.0.2:4001 (tf.keras: tf-keras 2.16.0)"
            in lines)
    monitor = Monitor("digits", RUN, on_stop=lambda: None)
    monitor.update(events)
    assert "tf.keras on the nodes: tf-keras 2.16.0" in monitor.tasks.value
