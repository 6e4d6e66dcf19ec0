"""Why a launch cannot proceed, or what needs the user's attention, as findings with evidence and
a remedy, on the driver: ``preflight``, the live ``watch``, cluster snapshots and their rules
(``snapshot``, ``diagnose``), what the nodes report (``nodes``), Databricks compute
(``databricks``), a Keras 3 object sent to tf-keras nodes (``kerascheck``), progress and memory
insight (``insight``, ``pace``, ``memory``) and the cluster-wide leftover scan (``cleanup``)."""
