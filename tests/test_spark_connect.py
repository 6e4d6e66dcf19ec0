"""The Spark Connect suite (tests/connect), run in a pytest process of its own against a Spark
Connect server: this process holds classic SparkContexts, the child never does (it asserts so)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(1500)
def test_everything_runs_on_a_spark_connect_session():
    env = {**os.environ, "TFOS_CONNECT_SUITE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-ra", "--durations=0", "-p", "no:cacheprovider",
                           os.path.join(HERE, "connect")], cwd=os.path.dirname(HERE), env=env,
                          capture_output=True, text=True, timeout=1450)
    print(proc.stdout[-20000:], proc.stderr[-5000:])
    assert proc.returncode == 0, proc.stdout[-6000:]
