"""The node's own process, which runs the user's function: ``main`` (started by the task, forked
or as ``python -m``), ``ctx``, ``summaries`` and ``keras_backup`` (Keras callbacks), ``export``,
``pace``, ``profiler``, ``orders`` (the driver's, from the task's pipe), ``savepoint``, the MLflow
relay (``mlflowrelay``, ``relaystore``), ``taskcontext`` and ``afterimport``, ``statuspipe``;
``feed/`` is the node's data feed. Imports nothing of ``task/``."""
