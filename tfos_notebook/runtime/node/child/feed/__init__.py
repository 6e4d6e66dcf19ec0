"""The node's data feed, in its own process: the feed server (``server``) that Spark tasks stream
record batches to, its queue (``queue``), where inference results go (``results``), and
``ctx.dataset`` / ``DataFeed`` over them (``datafeed``)."""
