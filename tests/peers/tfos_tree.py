"""TensorFlowOnSpark's own files, from a source tree given by ``TFOS_SOURCE_TREE``, with only
their import lines changed from ``tensorflowonspark`` to ``tfos_notebook``; and how to run them
(its examples with ``spark-submit``, its unittest files with the environment its ``tests/test.py``
asks for) against a master of ours."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

SOURCE_TREE = os.environ.get("TFOS_SOURCE_TREE", "")
SKIP_REASON = ("TFOS_SOURCE_TREE is not set: point it at a TensorFlowOnSpark source tree (its examples/ and tests/, "
               "e.g. `git archive` of yahoo/TensorFlowOnSpark) to run its own files with only the import changed")
IMPORT_LINE = re.compile(r"^(\s*(?:from|import)\s+)tensorflowonspark\b")


def import_changed(source: str) -> tuple[str, int]:
    """``source`` with ``tensorflowonspark`` replaced by ``tfos_notebook`` on its import lines only,
    and how many lines changed."""
    lines = source.splitlines(keepends=True)
    out = [IMPORT_LINE.sub(r"\1tfos_notebook", line) for line in lines]
    return "".join(out), sum(a != b for a, b in zip(lines, out, strict=True))


def copy_changed(src: Path, dst: Path) -> int:
    """Copy the Python file ``src`` to ``dst`` with its imports changed; returns the lines changed."""
    text, changed = import_changed(src.read_text())
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(text)
    return changed


def spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a program run from a test: this Python on the executors, tf-keras as
    ``tf.keras`` (TensorFlowOnSpark's Keras examples need Keras 2), loopback addresses."""
    env = dict(os.environ)
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "TF_USE_LEGACY_KERAS": "1",
                "SPARK_LOCAL_IP": "127.0.0.1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def submit(program: Path, args: list[str], master: str, conf: dict[str, str], cwd: Path,
           timeout: float) -> subprocess.CompletedProcess:
    """``spark-submit`` ``program`` with ``args`` to ``master``."""
    command = [spark_submit(), "--master", master]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return subprocess.run([*command, str(program), *args], cwd=cwd, env=child_env(), capture_output=True, text=True,
                          timeout=timeout)


def empty_jar(path: Path) -> Path:
    """A valid jar with nothing in it, for ``SPARK_CLASSPATH``: TensorFlowOnSpark's tests insist on a
    jar (its TFRecord Hadoop format, which ``dfutil`` here does without)."""
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    return path


def run_tests(test_file: Path, report: Path, env: dict[str, str], timeout: float) -> dict[str, tuple[str, str]]:
    """Run one of TensorFlowOnSpark's unittest files with pytest (in its own folder, so that its
    ``import test`` finds its ``test.py``); ``{Class.test: (passed | failed | error | skipped,
    the failure's text)}``."""
    import xml.etree.ElementTree as ET

    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    test_file.name], cwd=test_file.parent, env=child_env(**env), capture_output=True, text=True,
                   timeout=timeout)
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        found = [child for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[found[0].tag] if found else "passed"
        text = (found[0].text or found[0].get("message", "")) if found else ""
        outcomes[f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"] = (outcome, text)
    return outcomes
