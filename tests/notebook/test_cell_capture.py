"""A cell becomes a node function: line numbers, name capture, shipping errors, tracebacks."""

from __future__ import annotations

import pickle
import threading
import traceback

import numpy as np
import pytest
from pyspark import cloudpickle

from tfos_notebook.notebook.capture import CellError, capture_cell, cell_error, cell_traceback
from tfos_notebook.runtime.driver.errors import NodeError


def scale(x):
    return x * FACTOR


FACTOR = 10


def test_cell_runs_with_args_ctx_and_captured_names_and_returns_its_value():
    ns = {"scale": scale, "OFFSET": 1}
    fn = capture_cell("y = scale(args) + OFFSET\nreturn y, ctx\n", ns, 3)
    assert set(fn.names) == {"scale", "OFFSET"}
    assert fn(2, "the ctx") == (21, "the ctx")


def test_names_assigned_imported_or_builtin_in_the_cell_are_not_captured():
    body = ("import os\nvalue = len([os.sep for _ in range(3)])\n"
            "class Model:\n    width = 4\n    depth = width * 2\n"
            "def helper(n):\n    return n + value\n"
            "return helper(Model.depth)\n")
    fn = capture_cell(body, {"os": "not this one", "value": "nor this"}, 1)
    assert fn.names == {}
    assert fn(None, None) == 11


def test_captured_cell_survives_pickling_as_it_travels_to_the_nodes():
    fn = capture_cell("return scale(args)\n", {"scale": scale}, 4)
    clone = pickle.loads(cloudpickle.dumps(fn))
    assert clone(3, None) == 30


def test_syntax_error_names_the_cell_line_counting_the_magic_line():
    with pytest.raises(CellError) as info:
        capture_cell("x = 1\ny = (x +\n", {}, 5)
    assert info.value.line == 3
    assert str(info.value).startswith("syntax error in the cell at line 3: '(' was never closed")
    assert "y = (x +" in str(info.value) and "Nothing was launched" in str(info.value)


def test_compile_time_errors_are_reported_as_syntax_errors_too():
    with pytest.raises(CellError, match=r"syntax error in the cell at line 2: 'await' outside async function"):
        capture_cell("await thing()\n", {"thing": scale}, 5)


def test_undefined_names_are_refused_with_their_line():
    with pytest.raises(CellError) as info:
        capture_cell("import math\nx = math.pi\nprint(buld_model(x))\n", {}, 2)
    assert info.value.names == ("buld_model",)
    assert "names defined nowhere in the notebook: 'buld_model' (line 4)" in str(info.value)


def test_ipython_only_names_are_refused():
    with pytest.raises(CellError, match=r"uses 'get_ipython', which IPython provides only in the notebook"):
        capture_cell("get_ipython()\n", {"get_ipython": object()}, 2)


def test_a_lock_cannot_be_shipped_and_the_error_names_it():
    with pytest.raises(CellError) as info:
        capture_cell("with guard:\n    pass\n", {"guard": threading.Lock()}, 2)
    assert info.value.names == ("guard",)
    assert "the cell uses 'guard' (lock), which cannot be shipped to the nodes: cannot pickle '_thread.lock'" \
        in str(info.value)
    assert "Create it inside the cell instead" in str(info.value)


def test_a_large_variable_is_refused_without_pickling_it_whole():
    big = np.zeros(3 << 20)  # 24 MB
    with pytest.raises(CellError, match=r"the cell uses 'big', which is over 16 MB pickled: too large to ship"):
        capture_cell("return big.sum()\n", {"big": big}, 2, limit=16 << 20)
    assert capture_cell("return big.sum()\n", {"big": big}, 2, limit=32 << 20)(None, None) == 0


def test_spark_objects_are_refused_with_the_way_to_pass_data(local_spark):
    df = local_spark.range(3)
    ns = {"train_df": df, "rows": df.rdd, "spark": local_spark, "count_rows": lambda: df.count()}
    with pytest.raises(CellError, match=r"'train_df', a Spark DataFrame: it lives on the driver.*--input-mode spark "
                                        r"--data train_df"):
        capture_cell("train_df.count()\n", ns, 2)
    with pytest.raises(CellError, match=r"'rows', a Spark RDD"):
        capture_cell("rows.count()\n", ns, 2)
    with pytest.raises(CellError, match=r"'spark', a Spark SparkSession: it exists only on the driver"):
        capture_cell("spark.range(1)\n", ns, 2)
    with pytest.raises(CellError, match=r"'count_rows' \(function\), which cannot be shipped to the nodes: it refers "
                                        r"to a SparkContext, SparkSession, DataFrame or RDD"):
        capture_cell("count_rows()\n", ns, 2)


def test_traceback_starts_at_the_cell_line_that_raised():
    fn = capture_cell("a = 1\n\nb = a / 0\n", {}, 6)
    try:
        fn(None, None)
    except ZeroDivisionError:
        text = traceback.format_exc()
    trimmed = cell_traceback(text, fn.filename)
    lines = trimmed.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == '  File "<tfos_train In[6]>", line 4, in tfos_train_cell'
    assert lines[2].strip() == "b = a / 0"
    assert lines[-1] == "ZeroDivisionError: division by zero"
    assert "capture.py" not in trimmed


def test_node_errors_are_trimmed_and_other_errors_pass_unchanged():
    fn = capture_cell("raise ValueError('bad')\n", {}, 7)
    tb = ('Traceback (most recent call last):\n  File "/x/child.py", line 47, in main\n    value = f()\n'
          f'  File "{fn.filename}", line 2, in tfos_train_cell\n    raise ValueError(\'bad\')\nValueError: bad\n')
    err = cell_error(NodeError("worker", 1, "h", tb, 1), fn.filename)
    assert isinstance(err, NodeError) and (err.role, err.index) == ("worker", 1)
    assert "child.py" not in str(err) and 'line 2, in tfos_train_cell' in str(err)
    other = RuntimeError("x")
    assert cell_error(other, fn.filename) is other
