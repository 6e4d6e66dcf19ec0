"""TensorFlow's start-up notices stay out of the monitor's log area; a real error never does."""

from __future__ import annotations

import pytest
from events_fixture import RUN

from tfos_notebook.notebook.logfilter import is_noise
from tfos_notebook.notebook.monitor import Monitor
from tfos_notebook.runtime.driver.events import Log

# Printed by tensorflow-cpu 2.21 on this machine (TF_CPP_MIN_LOG_LEVEL=0) and by a 2-node run.
TENSORFLOW_NOTICES = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795362279.902178   26861 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders. "
    "To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795362279.904768   26861 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU "
    "will not be used.",
    "I0000 00:00:1795362280.230965   26861 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795362288.849405   26861 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
    "Failed call to cuInit: UNKNOWN ERROR (303)",
    "E0000 00:00:1795362301.118230   27001 coordination_service_agent.cc:479] Failed to send RPC to coordination "
    "service. Either the leader task died or the leader is gone.",
    "Additional GRPC error information from remote target /job:chief/replica:0/task:0 while calling "
    "/tensorflow.CoordinationService/Heartbeat:",
    ':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"failed to connect to all addresses; last '
    'error: UNKNOWN: ipv4:127.0.0.1:46545: Failed to connect to remote host: Connection refused"}',
    "WARNING:tensorflow:Collective ops is not configured at program startup. Some performance features may not "
    "be enabled.",
    "INFO:tensorflow:Enabled multi-worker collective ops with available devices: ['/job:worker/replica:0']",
    # a 2-node MultiWorkerMirroredStrategy fit of a repeated, cached dataset under a Jupyter server started
    # without TF_CPP_MIN_LOG_LEVEL (TensorFlow 2.21)
    "I0000 00:00:1795362290.120034   27001 coordination_service.cc:624] /job:worker/replica:0/task:0 has "
    "connected to coordination service. Incarnation: 12345",
    "W0000 00:00:1795362295.402219   27123 dataset.cc:1011] The calling iterator did not fully read the dataset "
    "being cached. In order to avoid unexpected truncation of the dataset, the partially cached contents of the "
    "dataset will be discarded.",
    "WARNING:tensorflow:5 out of the last 5 calls to <function TensorFlowTrainer.make_train_function.<locals>."
    "one_step_on_iterator at 0x7f> triggered tf.function retracing.",
    "WARNING:tensorflow:Your input ran out of data; interrupting training.",
]

REAL_LINES = [
    "epoch 3 loss 0.21",
    "Traceback (most recent call last):",
    '  File "/tmp/cell.py", line 4, in main_fun',
    "ZeroDivisionError: division by zero",
    "tensorflow.python.framework.errors_impl.InvalidArgumentError: Failed to send RPC to coordination service",
    "F0000 00:00:1795362301.1 27001 check.cc:12] Check failed: cuInit ok",
    "E0000 00:00:1795362301.1 27001 kernel.cc:12] OOM when allocating tensor with shape [4096,4096]",
    "W0000 00:00:1795362301.1 27001 ops.cc:12] data loader stalled: 0 elements in 30 s",
    "RuntimeError: Could not find cuda drivers on your machine",
    ':UNKNOWN:Error received from peer  {grpc_status:13, grpc_message:"Internal error in a collective"}',
]


@pytest.mark.parametrize("line", TENSORFLOW_NOTICES)
def test_tensorflow_notices_are_noise(line):
    assert is_noise(line)


@pytest.mark.parametrize("line", REAL_LINES)
def test_a_real_error_or_the_users_own_line_is_never_noise(line):
    assert not is_noise(line)


def _logs(lines):
    return [Log(RUN, task=0, role="chief", index=0, stream="stderr", line=line) for line in lines]


def test_monitor_hides_tensorflows_notices_until_asked_and_shows_every_real_line():
    monitor = Monitor("r", RUN, on_stop=lambda: None, visible_logs=50)
    monitor.update(_logs(TENSORFLOW_NOTICES + REAL_LINES))
    shown = monitor.logs.value
    assert "oneDNN" not in shown and "UNKNOWN ERROR" not in shown and "absl::InitializeLog" not in shown
    assert "ZeroDivisionError: division by zero" in shown and "[chief:0] epoch 3 loss 0.21" in shown
    assert "OOM when allocating" in shown and "Check failed" in shown
    assert monitor.noise_toggle.layout.display == ""
    assert monitor.noise_toggle.description == f"Show TensorFlow's notices ({len(TENSORFLOW_NOTICES)})"
    monitor.noise_toggle.value = True
    assert "oneDNN custom operations are on" in monitor.logs.value
    assert monitor.noise_toggle.description.startswith("Hide")
    assert len(monitor.view.logs) == len(TENSORFLOW_NOTICES) + len(REAL_LINES)


def test_a_run_with_only_notices_shows_an_empty_log_area():
    monitor = Monitor("r", RUN, on_stop=lambda: None)
    monitor.update(_logs(TENSORFLOW_NOTICES))
    assert monitor.logs.value == ""
