#!/usr/bin/env bash
# Creates (once) the venv of the anchor, tensorflowonspark 2.2.5 from PyPI, next to ours, with the
# same Spark and TensorFlow. It imports pkg_resources, hence setuptools<82; its multi-worker Keras
# path needs tf-keras with TF_USE_LEGACY_KERAS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TFOS_ANCHOR_VENV:-.venv-tfos}"
if [ ! -f "$VENV/.installed" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "tensorflowonspark==2.2.5" "setuptools<82" "pyspark==4.3.0" \
    "tensorflow-cpu==2.21.0" "tf-keras==2.21.0" "pyarrow" "numpy" "psutil" "msgpack"
  touch "$VENV/.installed"
fi
echo "$(cd "$VENV" && pwd)/bin/python"
