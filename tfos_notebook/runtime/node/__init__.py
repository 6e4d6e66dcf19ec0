"""A node's side of a run, on an executor, in two processes: ``task/`` runs in Spark's Python
worker (the barrier task, its link to the driver, what it ships, the start of its child) and
``child/`` in the node's own process (the user's function, its ``ctx``, the node's data feed).
Imports nothing of ``driver/``; ``child/`` imports nothing of ``task/``, and no pyspark, numpy or
pyarrow before it runs the user's function."""
