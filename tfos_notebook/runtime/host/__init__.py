"""What one host has and does, for every process of a run (the driver, a barrier task, a node's
child) and its neighbours (``tensorboard/``, ``notebook/``, ``tracking/``, ``devcluster.py``):
process groups (``procs``, ``watchdog``), deadlines (``timeouts``), paths and Databricks' FUSE
mounts (``paths``, ``fuse``), tailing files (``filetail``), leftovers and GPU holders
(``orphans``, ``gpus``), installed versions (``versions``), a free port (``ports``). Imports
nothing else of the runtime."""
