"""Evaluation of a run's checkpoints as they appear: what it reads, when it stops, what it writes,
and how it reports a failing function. Runs are entered in the real registry files (as a
training kernel's tracker writes them); checkpoints are files written the way TensorFlow does."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import psutil
import pytest
from nbhelpers import wait_until

from tfos_notebook.notebook.evaluate import EvaluationError, evaluate_run
from tfos_notebook.runtime.driver.errors import ConfigError
from tfos_notebook.state import registry
from tfos_notebook.state.files import write_json_atomic


def _enter(record: registry.RunRecord) -> registry.RunRecord:
    """Write ``record`` where the registry keeps it, as the owning kernel's tracker does."""
    write_json_atomic(os.path.join(registry.registry_dir(), f"{record.run_id}.json"), record.to_json())
    return record


def _run(tmp_path, name="digits", mirror=True, **changes) -> registry.RunRecord:
    mirror_dir = str(tmp_path / "mirror") if mirror else None
    fields = {"state": "running", "model_dir": str(tmp_path / "model"), "mirror_dir": mirror_dir,
              "eval_dir": mirror_dir and os.path.join(mirror_dir, "eval"), **changes}
    return _enter(registry.RunRecord(run_id=f"20250101-000000-{name}", name=name, owner_pid=os.getpid(),
                                     owner_create_time=psutil.Process().create_time(), **fields))


def _checkpoint(model_dir, step: int, complete: bool = True) -> None:
    """A TensorFlow checkpoint as TensorFlow writes it: data, then index, then the state file."""
    os.makedirs(model_dir, exist_ok=True)
    prefix = os.path.join(model_dir, f"ckpt-{step:04d}")
    with open(f"{prefix}.data-00000-of-00001", "wb") as f:
        f.write(b"w" * 64)
    if complete:
        with open(f"{prefix}.index", "wb") as f:
            f.write(b"i" * 16)
        with open(os.path.join(model_dir, "checkpoint.tmp"), "w") as f:
            f.write(f'model_checkpoint_path: "ckpt-{step:04d}"\nall_model_checkpoint_paths: "ckpt-{step:04d}"\n')
        os.replace(os.path.join(model_dir, "checkpoint.tmp"), os.path.join(model_dir, "checkpoint"))


def _scalars(logdir: str) -> dict[str, list[tuple[int, float]]]:
    import tensorflow as tf

    found: dict[str, list[tuple[int, float]]] = {}
    for name in sorted(os.listdir(logdir)):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(logdir, name)):
            for v in event.summary.value:
                found.setdefault(v.tag, []).append((event.step, round(float(tf.make_ndarray(v.tensor)), 5)))
    return found


def complete_checkpoint_metrics(checkpoint):
    """An evaluation that fails loudly if handed a checkpoint whose index is not written yet."""
    assert os.path.exists(checkpoint.path + ".index"), f"read before it was written: {checkpoint.path}"
    return {"accuracy": checkpoint.step / 10, "loss": 1.0 / checkpoint.step}


def test_unknown_run_is_a_config_error_naming_the_known_runs(tmp_path):
    _run(tmp_path, name="digits")
    with pytest.raises(ConfigError, match=r"no run named 'mnist' on this machine; runs: digits \(running\)"):
        evaluate_run("mnist", complete_checkpoint_metrics)


def test_run_without_model_dir_is_a_config_error_saying_how_to_get_checkpoints(tmp_path):
    _run(tmp_path, name="nomodel", model_dir=None)
    with pytest.raises(ConfigError, match=r"run nomodel has no model directory.*--model-dir DIR"):
        evaluate_run("nomodel", complete_checkpoint_metrics)


def test_each_checkpoint_is_evaluated_once_written_and_evaluation_ends_after_the_last_once_the_run_ended(
        tmp_path):
    record = _run(tmp_path)
    model_dir = record.model_dir
    _checkpoint(model_dir, 1)
    lines: list[str] = []
    ev = evaluate_run("digits", complete_checkpoint_metrics, every=0.1, settle=0.5, say=lines.append)
    assert wait_until(lambda: len(ev.results) == 1, timeout=60)
    _checkpoint(model_dir, 2, complete=False)  # being written: data but no index or state yet
    time.sleep(1.0)
    assert [s for s, _ in ev.results] == [1] and ev.state == "waiting"
    _checkpoint(model_dir, 2)
    _checkpoint(model_dir, 3)
    _enter(replace(record, state="finished", ended_at=time.time()))
    assert ev.wait(timeout=30) == [(1, {"accuracy": 0.1, "loss": 1.0}), (2, {"accuracy": 0.2, "loss": 0.5}),
                                   (3, {"accuracy": 0.3, "loss": 1 / 3})]
    assert ev.state == "finished" and ev.failures == []
    assert ev.logdir == record.eval_dir
    assert _scalars(ev.logdir) == {"accuracy": [(1, 0.1), (2, 0.2), (3, 0.3)],
                                   "loss": [(1, 1.0), (2, 0.5), (3, 0.33333)]}
    assert "[tfos] eval of digits: step 2  accuracy 0.2  loss 0.5" in lines
    assert lines[-1] == "[tfos] eval of digits: finished: 3 checkpoints evaluated, 0 failed (run finished)"


def test_a_checkpoint_left_half_written_by_an_ended_run_is_skipped_with_a_note(tmp_path):
    record = _run(tmp_path, state="failed", ended_at=time.time())
    _checkpoint(record.model_dir, 1)
    _checkpoint(record.model_dir, 2, complete=False)
    lines: list[str] = []
    ev = evaluate_run("digits", complete_checkpoint_metrics, every=0.1, settle=0.2, say=lines.append)
    assert [s for s, _ in ev.wait(timeout=30)] == [1]
    assert "[tfos] eval of digits: skipped ckpt-0002: it was never completely written" in lines


def failing_on_even_steps(checkpoint):
    if checkpoint.step % 2 == 0:
        raise ValueError(f"no test data for step {checkpoint.step}")
    return {"accuracy": 0.5}


def test_a_failing_function_is_reported_per_checkpoint_and_the_evaluation_goes_on(tmp_path):
    record = _run(tmp_path, state="finished", ended_at=time.time())
    for step in (1, 2, 3):
        _checkpoint(record.model_dir, step)
    lines: list[str] = []
    ev = evaluate_run("digits", failing_on_even_steps, every=0.1, settle=0, say=lines.append)
    assert [s for s, _ in ev.wait(timeout=30)] == [1, 3]
    [failure] = ev.failures
    assert (failure.step, failure.error) == (2, "ValueError: no test data for step 2")
    assert failure.traceback.startswith("Traceback") and "in failing_on_even_steps" in failure.traceback
    assert "notebook/evaluate.py" not in failure.traceback  # starts at the user's function
    assert "[tfos] eval of digits: step 2 failed: ValueError: no test data for step 2" in lines


def no_metrics(checkpoint):
    return None


def test_evaluation_stops_after_max_failures_in_a_row_and_wait_raises_with_the_traceback(tmp_path):
    record = _run(tmp_path)
    for step in (1, 2, 3, 4):
        _checkpoint(record.model_dir, step)
    ev = evaluate_run("digits", no_metrics, every=0.1, settle=0, max_failures=3, say=lambda line: None)
    with pytest.raises(EvaluationError, match=r"(?s)failed on 3 checkpoints in a row; the last, step 3.*"
                                              r"TypeError: the evaluation returned NoneType, not a dict"):
        ev.wait(timeout=30)
    assert ev.state == "failed" and len(ev.failures) == 3


def test_a_run_without_tensorboard_gets_a_logdir_of_its_own_and_a_note_saying_how_to_see_it(tmp_path):
    record = _run(tmp_path, name="quiet", mirror=False, state="finished", ended_at=time.time())
    _checkpoint(record.model_dir, 5)
    lines: list[str] = []
    ev = evaluate_run("quiet", complete_checkpoint_metrics, every=0.1, settle=0, say=lines.append)
    assert ev.wait(timeout=30) == [(5, {"accuracy": 0.5, "loss": 0.2})]
    assert ev.logdir.endswith(os.path.join("evals", record.run_id, "eval"))
    assert any("run quiet has no TensorBoard: curves go to" in line and "%tfos_tensorboard" in line
               for line in lines)
    assert _scalars(ev.logdir)["accuracy"] == [(5, 0.5)]


def test_stop_ends_the_evaluation_while_the_run_goes_on(tmp_path):
    _run(tmp_path)
    ev = evaluate_run("digits", complete_checkpoint_metrics, every=0.1, say=lambda line: None)
    time.sleep(0.3)
    ev.stop()
    assert ev.done and ev.state == "stopped" and ev.wait(0) == []


def test_name_must_be_a_plain_directory_name(tmp_path):
    _run(tmp_path)
    with pytest.raises(ConfigError, match=r"name '../x' must be a plain directory name"):
        evaluate_run("digits", complete_checkpoint_metrics, name="../x")


def test_evaluate_magic_runs_the_cell_per_checkpoint_with_checkpoint_and_step_in_scope(ip, tmp_path):
    record = _run(tmp_path, name="magicrun", state="finished", ended_at=time.time())
    _checkpoint(record.model_dir, 2)
    ip.user_ns["scale"] = 10
    result = ip.run_cell("%%tfos_evaluate magicrun --every 0.1 --settle 0\n"
                         "assert checkpoint.step == step\n"
                         "return {'scaled': step * scale}")
    assert result.success, result.error_in_exec
    assert result.result.wait(30) == [(2, {"scaled": 20.0})]


def test_evaluate_magic_reports_a_cell_error_at_its_line_and_an_unknown_run_concisely(ip, tmp_path):
    record = _run(tmp_path, name="magicrun2", state="finished", ended_at=time.time())
    _checkpoint(record.model_dir, 1)
    result = ip.run_cell("%%tfos_evaluate magicrun2 --every 0.1 --settle 0 --max-failures 1\n"
                         "x = 1\n"
                         "raise RuntimeError(f'bad weights {x}')")
    with pytest.raises(EvaluationError) as raised:
        result.result.wait(30)
    assert 'File "<tfos_evaluate' in str(raised.value) and "line 3, in tfos_evaluate_cell" in str(raised.value)
    assert "RuntimeError: bad weights 1" in str(raised.value)
    bad = ip.run_cell("%%tfos_evaluate nosuchrun\nreturn {}")
    assert isinstance(bad.error_in_exec, ConfigError)
    assert bad.error_in_exec._render_traceback_()[0].startswith("ConfigError: no run named 'nosuchrun'")
    syntax = ip.run_cell("%%tfos_evaluate magicrun2\nreturn {'a': 1\n")
    assert "syntax error in the cell at line 2" in str(syntax.error_in_exec)


def test_an_evaluation_has_a_registry_record_beside_its_run_with_its_state_and_latest_metrics(tmp_path):
    record = _run(tmp_path, state="finished", ended_at=time.time())
    for step in (1, 2):
        _checkpoint(record.model_dir, step)
    ev = evaluate_run("digits", complete_checkpoint_metrics, every=0.1, settle=0.2, say=lambda line: None)
    ev.wait(timeout=30)
    entry = registry.get_run(f"{record.run_id}-eval")
    assert (entry.kind, entry.parent, entry.name, entry.state) == ("evaluation", record.run_id, "eval of digits",
                                                                   "finished")
    assert entry.step == 2 and entry.metrics == {"accuracy": 0.2, "loss": 0.5} and entry.loss == 0.5
    assert entry.curve == ((1, 1.0), (2, 0.5)) and entry.ended and entry.ended_at is not None
    assert registry.get_run("digits").kind == "training"  # the run itself is still found by its name


def test_the_evaluation_monitor_shows_state_curves_and_lines(tmp_path):
    from tfos_notebook.notebook.evalmonitor import EvaluationMonitor

    record = _run(tmp_path, state="finished", ended_at=time.time())
    for step in (1, 2, 3):
        _checkpoint(record.model_dir, step)
    monitor = EvaluationMonitor()
    ev = evaluate_run("digits", complete_checkpoint_metrics, every=0.1, settle=0.2, say=monitor.say)
    ev.monitor, monitor.evaluation = monitor, ev
    ev.wait(timeout=30)
    monitor.refresh()
    assert "eval</b> of run <b>digits</b>" in monitor.header.value and ">finished<" in monitor.header.value
    assert "3 checkpoints evaluated" in monitor.header.value
    assert 'data-metric="loss"' in monitor.curves.value and 'data-metric="accuracy"' in monitor.curves.value
    assert "finished: 3 checkpoints evaluated, 0 failed" in monitor.lines.value
    bundle = ev._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == monitor.widget.model_id
    assert bundle["text/plain"].startswith("evaluation eval of run digits: finished, 3 checkpoints")
