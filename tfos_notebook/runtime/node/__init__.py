"""A node's side of a run, on an executor: the barrier task (``task``), the plumbing to its child
process (``nodeproc``), its link to the driver (``nodelink``), what it ships (``logship``,
``gpusampler``), the child process itself (``child``) and the ``ctx`` the user's function gets.
Imports nothing of ``driver/``; the child imports no pyspark, numpy or pyarrow before it runs the
user's function."""
