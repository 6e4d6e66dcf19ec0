"""Spark errors in a line a person can read."""

from __future__ import annotations

MAX_CHARS = 2000


def error_summary(e: BaseException) -> str:
    """The first line of ``e``'s text that names an exception or error (``...Exception: ...``,
    ``...Error: ...``), else the start of the text; at most 2,000 characters. A Py4JJavaError or a
    SparkException carries the Python traceback of the failed task somewhere in its text: this
    picks the line that says what went wrong."""
    text = str(e)
    for line in text.splitlines():
        line = line.strip()
        if "Exception:" in line or "Error:" in line:
            return line[:MAX_CHARS]
    return text[:MAX_CHARS]
