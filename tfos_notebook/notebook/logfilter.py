"""Which node log lines are TensorFlow's own start-up and shut-down noise.

TensorFlow prints a dozen lines on every node of every run (absl's pre-init warning, oneDNN and
CPU-instruction notices, the CUDA probes of a CPU build, its C++ INFO lines, which a Jupyter server
started without ``TF_CPP_MIN_LOG_LEVEL`` lets through, a coordination-service RPC complaint when
the chief exits first, its Python ``WARNING:tensorflow:`` notices, repeated per call or epoch).
They say nothing about the user's run, yet some carry ``E`` or ``ERROR``, so a good run reads like
a bad one. The monitor keeps them out of its log area unless asked ("Show TensorFlow's notices");
``run.logs()`` still has every line.

Only lines that match a known notice are noise, and a line that looks like a real error (a Python
traceback, an exception, a fatal or failed check) never is, whatever else it says.
"""

from __future__ import annotations

import re

# TensorFlow's C++ log prefix (absl): severity, date, time (TensorFlow 2.16 on writes seconds since the
# epoch where the time of day was: "I0000 00:00:1795362279.902178"), thread, file:line]
_ABSL = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ")
_ABSL_INFO = re.compile(r"^I\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ")

NOISE = tuple(re.compile(p) for p in (
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"oneDNN custom operations are on",
    r"Could not find cuda drivers on your machine",
    r"failed call to cuInit",
    r"This TensorFlow binary is optimized to use available CPU instructions",
    r"^To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler flags",
    r"Unable to register cu(DNN|FFT|BLAS) factory",
    r"computation placer already registered",
    r"TF-TRT Warning: Could not find TensorRT",
    r"Failed to send RPC to coordination service",
    # gRPC's detail of the same complaint, on lines of their own (a worker's heartbeat to a gone chief)
    r"^Additional GRPC error information from remote target /job:\w+/replica:\d+/task:\d+ while calling "
    r"/tensorflow\.CoordinationService/",
    r"^:UNKNOWN:Error received from peer .*grpc_status:14\b",
    r"Collective ops is not configured at program startup",
    r"Local rendezvous is aborting with status: OUT_OF_RANGE",
    # tf.data's notice that a cache was not read to its end (every epoch of a repeated, cached dataset)
    r"The calling iterator did not fully read the dataset being cached",
    # TensorFlow's Python notices (absl logging under the "tensorflow" logger), repeated per call or epoch:
    # retracing, AutoGraph, the input running out, deprecations
    r"^(INFO|WARNING):tensorflow:",
))

# A line like this is shown whatever notice it also matches.
REAL_ERROR = re.compile(
    r"Traceback \(most recent call last\)"
    r"|^\s*File \".*\", line \d+"
    r"|^[\w.]*(Error|Exception|Exit|Interrupt)\b(:|$)"
    r"|^F\d{4} "
    r"|Check failed"
)


def is_noise(line: str) -> bool:
    """Whether ``line`` (as a node printed it, without the ``[role:index]`` prefix) is one of
    TensorFlow's known notices rather than something the user or a real failure printed."""
    if REAL_ERROR.search(line):
        return False
    if _ABSL_INFO.match(line):
        return True
    text = _ABSL.sub("", line, count=1)
    return any(p.search(text) for p in NOISE)
