"""Facades with the names of TensorFlowOnSpark and spark-tensorflow-distributor, over the one runtime."""
