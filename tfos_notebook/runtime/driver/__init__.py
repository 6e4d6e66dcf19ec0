"""The driver's side of a run, in the notebook kernel's (or script's) process: the run and its
lifecycle, the supervisor of its Spark jobs, the coordinator of its nodes' messages, diagnosis,
the event stream, the Spark seam (``spark/``), the feeder (``feed/``) and the cluster-wide
leftover scan (``cleanup``). Imports nothing of ``node/``: what it ships to the executors is plain
data from ``wire/``, which names the node's code the executors run."""
