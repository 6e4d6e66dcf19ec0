"""Progress, throughput and the straggler / input-bound findings, from hand-made ``Pace`` reports
(pure functions: no Spark, no TensorFlow), and the node's step timing that makes those reports."""

from __future__ import annotations

import time

from tfos_notebook.runtime.driver.diagnosis.insight import Insight, PaceBoard
from tfos_notebook.runtime.driver.diagnosis.pace import input_bound_findings, straggler_findings
from tfos_notebook.runtime.driver.events import EventStream, Pace
from tfos_notebook.runtime.node.child.pace import Pace as NodePace


def pace(task: int, step_secs: float, *, role: str = "worker", steps: int = 10, secs: float = 1.0,
         wait: float = 0.0, fed: bool = False, examples: int = 0, **where) -> Pace:
    return Pace("r", task=task, role=role, index=task, host=f"h{task} (10.0.0.{task})", steps=steps, secs=secs,
                window_steps=int(secs / step_secs) if step_secs else 0, step_secs=step_secs,
                window_examples=examples, examples=examples, wait_secs=wait, input_measured=fed, **where)


def board(*reports: Pace) -> PaceBoard:
    b = PaceBoard()
    for r in reports:
        b.add(r)
    return b


def test_a_node_whose_steps_take_twice_the_others_is_named_a_straggler_with_evidence_and_remedy():
    b = board(*[pace(t, 0.2 if t == 1 else 0.1) for _ in range(6) for t in range(3)])
    [f] = straggler_findings(b.windows())
    assert f.code == "straggler" and f.severity == "warning" and f.subject == "worker:1"
    assert f.cause == "worker:1 on h1 (10.0.0.1) is a straggler: its steps take 200 ms, 2.0x the other nodes' 100 ms"
    # the first report of each node (its start-up) is left out
    assert f.evidence == ("worker:0 on h0 (10.0.0.0): 100 ms a step, 50 steps in 5.0 s over its last 5 reports",
                          "worker:1 on h1 (10.0.0.1): 200 ms a step, 25 steps in 5.0 s over its last 5 reports",
                          "worker:2 on h2 (10.0.0.2): 100 ms a step, 50 steps in 5.0 s over its last 5 reports")
    assert f.remedy == ("see what else runs on h1 (10.0.0.1) (another job or run, a slower or busier CPU or GPU) "
                        "and whether worker:1 gets more data than the others; its trace shows where the time goes: "
                        "%tfos_profile RUN --nodes worker:1")


def test_an_even_run_a_short_window_or_a_lone_node_raises_no_straggler():
    assert straggler_findings(board(*[pace(t, 0.1 + 0.01 * t) for _ in range(6) for t in range(2)]).windows()) == []
    assert straggler_findings(board(*[pace(t, 0.1 + 0.5 * t) for _ in range(4) for t in range(2)]).windows()) == []
    assert straggler_findings(board(*[pace(0, 0.3) for _ in range(8)]).windows()) == []


def test_synchronous_nodes_whose_reports_split_the_same_steps_differently_raise_no_straggler():
    # Two nodes of a synchronous run take the same 100 steps in the same 5 s, but an epoch's slow
    # end falls in different reports: their reports' own step times differ by 3x (a median of them
    # named a straggler), their sums do not. Each node's first report, 10 s for 2 steps, is its start-up.
    def report(task: int, secs: float, steps: int) -> Pace:
        return Pace("r", task=task, role="worker", index=task, host=f"h{task}", steps=0, secs=secs,
                    window_steps=steps, step_secs=secs / steps)

    b = board(*[report(t, 10.0, 2) for t in range(2)],
              *[report(0, 1.0, n) for n in (30, 30, 30, 5, 5)], *[report(1, 1.0, n) for n in (10, 10, 10, 35, 35)])
    assert straggler_findings(b.windows()) == []
    b.add(report(1, 4.0, 20))  # then worker:1 slows down for real (4 s for 20 steps, worker:0 1 s for 65):
    b.add(report(0, 1.0, 65))  # 120 steps in 9 s (75 ms a step) against 165 in 6 s (36 ms)
    [f] = straggler_findings(b.windows())
    assert f.subject == "worker:1"


def test_a_fed_node_that_waits_most_of_its_time_is_input_bound_with_the_share():
    b = board(*[pace(0, 0.1, wait=0.8, fed=True) for _ in range(6)], *[pace(1, 0.1, wait=0.1, fed=True)] * 6)
    [f] = input_bound_findings(b.windows())
    assert f.code == "input_bound" and f.subject == "worker:0"
    assert f.cause == ("worker:0 on h0 (10.0.0.0) is input-bound: it spends 80% of its time waiting for the next "
                       "batch from Spark")
    assert f.evidence == ("worker:0: waited 4.0 s of the last 5.0 s for fed data, 10.0 steps/s",)
    assert f.remedy.startswith("feed it faster: cache or persist the DataFrame (df.cache(), then an action such as "
                               "df.count())")
    assert "more partitions (df.repartition(n))" in f.remedy and "prefetch=8" in f.remedy
    assert "bigger batches" in f.remedy


def test_a_node_that_reads_its_own_data_is_never_called_input_bound():
    assert input_bound_findings(board(*[pace(0, 0.1, wait=0.0)] * 8).windows()) == []


def test_progress_and_eta_come_from_the_epochs_and_steps_keras_reports():
    # epoch 2 of 3 (from 0: epoch=1), step 4 of 8: 12 of 24 steps done at 4 steps/s -> 3 s left
    b = board(*[pace(t, 0.25, epoch=1, epochs=3, epoch_step=4, epoch_steps=8, examples=256) for t in range(2)])
    p = b.progress()
    assert p.fraction == 0.5 and p.eta == 3.0
    assert p.steps_per_sec == 4.0 and p.examples_per_sec == 512.0  # the run's steps: the slowest node's
    assert [(n.name, n.steps_per_sec, n.step_secs, n.wait_share) for n in p.nodes] == [
        ("worker:0", 4.0, 0.25, None), ("worker:1", 4.0, 0.25, None)]
    ended = b.progress(ended=True)  # totals over the time the nodes were busy: 10 steps in 1 s each
    assert ended.eta is None and ended.steps_per_sec == 10.0


def test_ctx_report_users_get_steps_per_second_and_with_a_total_the_progress():
    p = board(pace(0, 0.5, step=30, total_steps=120)).progress()
    assert p.steps_per_sec == 2.0 and p.fraction == 0.25 and p.eta == 45.0
    bare = board(pace(0, 0.5)).progress()
    assert bare.steps_per_sec == 2.0 and bare.fraction is None and bare.eta is None


def test_insight_publishes_each_node_finding_once_though_its_figures_move():
    events, published = EventStream(), []
    Insight(events, published.extend)
    for i in range(12):
        for t in range(2):
            events.publish(pace(t, 0.1 * (2 + i / 10) if t else 0.1))
    assert [f.code for f in published] == ["straggler"]


def test_the_node_counts_steps_with_the_training_counter_read_off_the_training_thread():
    sent, counter = [], [100]  # the optimizer's step counter, as StepTimer hands it over
    p = NodePace(sent.append, interval=0.05)
    p.count(lambda: counter[0], batch_size=32)
    p.epoch(0, 2, 4)
    for _ in range(4):
        time.sleep(0.01)
        counter[0] += 1  # a step: nothing else happens on the training thread
    p.taking()
    time.sleep(0.03)
    p.fed(128)
    time.sleep(0.2)
    p.count(None)
    p.close()
    assert sum(m.window_steps for m in sent) == 4 and sent[-1].steps == 4
    last = [m for m in sent if m.window_steps][-1]
    assert (last.epochs, last.epoch_steps, last.epoch_step) == (2, 4, 4)
    assert sent[-1].examples == 128 and sent[-1].input_measured  # the fed rows are the examples
    assert 0.03 <= sum(m.wait_secs for m in sent) < 0.06  # the wait, in whichever windows it spans
    assert all(0.005 < m.step_secs < 0.1 for m in sent if m.window_steps)
    assert len(sent) <= 5  # idle: nothing more


def test_ctx_report_steps_count_when_no_step_counter_is_read():
    sent = []
    p = NodePace(sent.append, interval=10)
    p.reported(0, total=100)
    time.sleep(0.02)
    p.reported(10, total=100, examples=640)
    msg = p.report()
    assert (msg.steps, msg.window_steps, msg.step, msg.total_steps, msg.examples) == (10, 10, 10, 100, 640)
    assert 0.001 < msg.step_secs < 0.01


def test_a_wait_for_fed_data_still_under_way_counts_in_each_window_it_spans():
    p = NodePace(lambda msg: None, interval=10)
    p.taking()
    time.sleep(0.05)
    first = p.report()
    time.sleep(0.05)
    p.fed(16)
    second = p.report()
    assert first.input_measured and 0.05 <= first.wait_secs < 0.09 and first.window_examples == 0
    assert 0.05 <= second.wait_secs < 0.09 and second.window_examples == 16
