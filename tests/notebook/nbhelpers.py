"""Cells, notebook helpers and probes shared by the notebook tests."""

from __future__ import annotations

import time
from html.parser import HTMLParser

from procs import child_processes, child_role  # noqa: F401  (the tests' process helpers, tests/procs.py)

TRAINING_HELPERS = '''
def load_digits_arrays():
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return (x / 16.0).astype("float32"), y.astype("int32")

def build_model(width=32):
    import tensorflow as tf
    model = tf.keras.Sequential([tf.keras.layers.Input((64,)),
                                 tf.keras.layers.Dense(width, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model
'''

# The digits data and a model under MultiWorkerMirroredStrategy, each worker reading its share.
DIGITS_MWMS = '''
import tensorflow as tf
x, y = load_digits_arrays()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build_model()
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
'''

# A 2-worker Keras run on the digits data (MultiWorkerMirroredStrategy): the cell of the tests.
TRAINING_CELL = DIGITS_MWMS + '''ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=1).repeat().batch(64).with_options(options)

class Report(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        ctx.report(int(self.model.optimizer.iterations.numpy()), loss=float(logs["loss"]))

hist = model.fit(ds, epochs=args.epochs, steps_per_epoch=15, callbacks=[Report()], verbose=0)
print("trained on", ctx.job_name, ctx.task_index)
return {"loss": hist.history["loss"][-1], "accuracy": hist.history["accuracy"][-1]}
'''

# Reports a step every 0.1 s for a minute: long enough to stop it, or to time other cells meanwhile.
LONG_CELL = '''
import time
for i in range(600):
    ctx.report(i, loss=1.0 / (i + 1))
    time.sleep(0.1)
'''


def wait_until(predicate, timeout: float = 120.0, every: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return False


def active_jobs_in_group(sc, group: str) -> list[int]:
    """Spark jobs of ``group`` still running."""
    tracker = sc.statusTracker()
    ids = set(tracker.getJobIdsForGroup(group))
    return [j for j in tracker.getActiveJobsIds() if j in ids]


class _Table(HTMLParser):
    """Rows of an HTML table, as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_rows(html: str) -> list[list[str]]:
    """The cell texts of each row of the table in ``html`` (the monitor's task table)."""
    parser = _Table()
    parser.feed(html)
    return parser.rows
