"""InputMode.SPARK on a node: its data feed (``server``, ``queue``), what the user's function reads
(``datafeed``: ``ctx.dataset``, ``DataFeed``), and feeding a node from its own barrier task
(``instage_task``)."""
