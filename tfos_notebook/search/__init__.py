"""The search of a sweep: a hyperparameter search whose trials are distributed runs, several at once on one
cluster, pruned early (Optuna underneath). ``runner.Sweep`` is the search; the notebook's
``%%tfos_sweep`` and ``tfos_notebook.sweep(...)`` (``notebook/sweeps.py``) add its monitor, its
TensorBoard and its runs-registry record."""
