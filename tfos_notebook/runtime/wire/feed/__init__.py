"""InputMode.SPARK's shared parts: the Arrow codec (``codec``, ``buffers``, ``pickled``,
``predictions``), the feed's messages (``messages``) and client (``protocol``), the spill file an
in-stage task writes and its node reads (``spill``), the in-stage spec (``stage``), and the Spark
tasks that stream partitions to the nodes (``tasks``, which ask the driver about a lost node through
``nodequery``): Spark runs them on executors, and the driver runs one to learn the predictions'
schema."""
