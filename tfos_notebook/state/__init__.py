"""State shared by the processes of one user on the driver machine: small JSON files in the state
directory (``files``) and the runs registry on top of them (``registry``).

Imports nothing of ``runtime``, ``notebook``, Spark or TensorFlow, so that the Jupyter server
extension can read the registry without loading them.
"""
