"""InputMode.SPARK's shared parts: the Arrow codec (``codec``), the feed's framing and client
(``protocol``), and the Spark tasks that stream partitions to the nodes (``tasks``, which ask the
driver about a lost node through ``nodequery``): Spark runs them on executors, and the driver runs
one to learn the predictions' schema."""
