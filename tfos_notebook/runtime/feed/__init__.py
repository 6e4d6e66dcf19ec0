"""InputMode.SPARK: Spark data fed to the nodes' TensorFlow processes as Arrow batches.

Driver side: ``feeder`` (``Run.train`` / ``Run.inference``) and ``tasks`` (the Spark tasks that
stream partitions). Node side: ``server`` (the node's data feed), ``queue``, ``datafeed``
(``ctx.dataset``, ``DataFeed``). Both: ``codec`` (Arrow), ``protocol`` (framing).
"""
