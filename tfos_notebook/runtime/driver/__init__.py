"""The driver's side of a run, in the notebook kernel's (or script's) process, in rooms by part:
``run/`` (the run and the parts it is made of: lifecycle, supervisor, reservation, coordinator,
heartbeat, decommission), ``diagnosis/`` (findings: pre-flight, the live watch, snapshots, what the
nodes report, insight, the leftover scan), ``events/`` (the typed events and their stream: the
contract every consumer reads), ``feed/`` (InputMode.SPARK from the driver) and ``spark/`` (the one
seam to Spark). Imports nothing of ``node/``: what it ships to the executors is plain data from
``wire/``, which names the node's code the executors run."""
