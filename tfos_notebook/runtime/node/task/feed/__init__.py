"""A node fed by its own barrier task (InputMode.SPARK in-stage), in Spark's Python worker:
``fednode`` (the node's process first, then the feed), ``instage`` (the task's partition sent to
its node, or its rows sent for inference), ``readahead`` and ``localfeed``."""
