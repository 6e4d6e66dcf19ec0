"""The TensorBoard process: ``python -m tfos_notebook.tensorboard.launcher OWNER_PID [--no-tensorflow]
-- TENSORBOARD_ARGS``.

It runs TensorBoard's own command-line entry point (``tensorboard.main``, as ``python -m
tensorboard.main`` would) with a watchdog that kills it, and its data server, when OWNER_PID (the
kernel or script that started it) dies, however it dies. With ``--no-tensorflow`` TensorFlow is
hidden from it: TensorBoard then runs with its documented reduced feature set (scalars, graphs,
histograms, images, text, hparams all work) and starts in ~4 s with ~90 MB instead of ~13 s with
~900 MB.
"""

from __future__ import annotations

import runpy
import sys
import threading

from ..runtime.host.watchdog import watch_parent


def main(argv: list[str]) -> None:
    owner = int(argv[1])
    split = argv.index("--")
    options, tensorboard_args = argv[2:split], argv[split + 1:]
    threading.Thread(target=watch_parent, args=(owner,), daemon=True, name="tfos-watch-owner").start()
    if "--no-tensorflow" in options:
        sys.modules["tensorflow"] = None  # makes `import tensorflow` fail, as if not installed
    sys.argv = ["tensorboard", *tensorboard_args]
    runpy.run_module("tensorboard.main", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv)
