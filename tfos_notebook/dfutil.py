"""TensorFlowOnSpark's ``dfutil`` module, by its name: DataFrames to and from TFRecord files
(``saveAsTFRecords``, ``loadTFRecords``, ``isLoadedDF``...). Implemented in ``peers/dfutil.py``."""

from .peers.dfutil import *  # noqa: F403  (the module's whole public API, listed in its __all__)
from .peers.dfutil import __all__  # noqa: F401
