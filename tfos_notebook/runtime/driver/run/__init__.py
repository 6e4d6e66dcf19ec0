"""A run on the driver and the parts it is made of: ``launch`` (``Run``), ``outcome``, ``lifecycle``,
``supervisor`` (one thread per run owning each attempt's Spark job), ``reservation``,
``coordinator`` and ``noderecord`` (an attempt's node table and the nodes' messages), ``heartbeat``,
``decommission``, ``control`` (the run's secret and control server), ``roles``, ``storage``,
``preimport`` and ``profiles``. The other rooms of the driver never import it."""
