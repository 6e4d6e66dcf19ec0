"""The table of stacks x what was proven on each, from the results ``make test-stacks`` left
(``.stacks/<stack>/results.xml``, pytest's JUnit report of the stack tests in that stack's stand-in).

    python stacks/table.py dbr-14.3-lts-ml-cpu dbr-15.4-lts-ml-cpu ...   # a Markdown table on stdout

Each column is a set of tests (``COLUMNS``); a cell says ``pass`` with how many tests passed, or
which failed, or why they were skipped. Exits 1 when any test of any stack failed or left no result.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: column -> (test file, test name prefix or "" for every test of the file)
COLUMNS = {
    "install unchanged": [("tests/stacks/test_stack.py", "test_install_")],
    "demo (01)": [("tests/stacks/test_stack.py", "test_demo_")],
    "TFoS program": [("tests/stacks/test_stack.py", "test_tfos_program_")],
    "MLflow": [("tests/stacks/test_stack.py", "test_mlflow_")],
    "monitor": [("tests/notebook/test_run_views.py", "")],
    "evaluation (02)": [("tests/stacks/test_stack.py", "test_evaluation_")],
    "TensorBoard": [("tests/stacks/test_stack.py", "test_tensorboard_")],
    "Keras": [("tests/stacks/test_stack.py", "test_keras_"), ("tests/runtime/driver/diagnosis/test_keras_check.py", "")],
    "feed (Arrow)": [("tests/runtime/feed/test_codec.py", "")],
    "floors": [("tests/runtime/host/test_versions.py", "")],
    "spot (decommission)": [("tests/runtime/driver/run/test_decommission.py", "test_keras_mwms_"),
                            ("tests/runtime/node/child/test_savepoint.py", ""), ("tests/runtime/driver/run/test_resize.py", "")],
    "sweep (Optuna)": [("tests/search/test_space.py", ""), ("tests/search/test_sweep_local.py", "test_six_")],
}


def results(stack: str) -> dict[tuple[str, str], tuple[str, str]]:
    """``(file, test name) -> (outcome, detail)`` of one stack's run; outcome is pass, fail or skip."""
    path = ROOT / ".stacks" / stack / "results.xml"
    if not path.exists():
        return {}
    out = {}
    for case in ET.parse(path).iter("testcase"):
        file = case.get("classname", "").replace(".", "/") + ".py"
        outcome, detail = "pass", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, detail = "fail", (child.get("message") or "").splitlines()[0][:80] if child.get("message") else ""
            elif child.tag == "skipped":
                outcome, detail = "skip", child.get("message") or ""
        out[(file, case.get("name", "").split("[")[0])] = (outcome, detail)
    return out


def cell(found: dict, tests: list[tuple[str, str]]) -> tuple[str, bool]:
    """The cell of one column, and whether it holds a failure or no result."""
    mine = {k: v for k, v in found.items() if any(k[0].endswith(f) and k[1].startswith(p) for f, p in tests)}
    if not mine:
        return "no result", True
    failed = [name for (_, name), (outcome, _) in mine.items() if outcome == "fail"]
    passed = sum(1 for outcome, _ in mine.values() if outcome == "pass")
    skipped = {detail for outcome, detail in mine.values() if outcome == "skip"}
    if failed:
        return "FAIL: " + ", ".join(failed), True
    text = f"pass ({passed})" if passed else "skipped"
    if skipped:
        text += "; skipped: " + "; ".join(sorted(skipped))
    return text, False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", nargs="+")
    args = parser.parse_args(argv)
    print("| stack | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    bad = False
    for stack in args.stacks:
        found = results(stack)
        cells = []
        for tests in COLUMNS.values():
            text, wrong = cell(found, tests)
            cells.append(text)
            bad |= wrong
        print(f"| {stack} | " + " | ".join(cells) + " |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
