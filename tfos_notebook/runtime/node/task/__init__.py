"""A node's barrier task, in Spark's Python worker on an executor: ``task`` (the body NODE_CODE
names), ``nodeproc`` and ``forked`` (the node's child process, forked from the worker where safe,
else spawned), ``nodelink`` (its link to the driver), ``logship``, ``gpusampler`` and ``memguard``;
``feed/`` for a node fed by its own task."""
