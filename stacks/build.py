"""Build a virtual environment that stands in for a Databricks Runtime LTS ML stack, and install this
package into it as a user of that runtime would, changing nothing the runtime ships.

    python stacks/build.py --uv .venv/uv/bin/uv dbr-15.4-lts-ml-cpu        # -> .stacks/dbr-15.4-lts-ml-cpu/

The environment is made in four steps:

1. a venv on the runtime's own Python (its ``# python:`` line; found on the PATH or under pyenv);
2. the runtime's packages that this package, its examples and its tests touch (``RUNTIME``), each at
   the stack file's exact version (the file is the constraint of every install below, so whatever
   they pull in comes at the runtime's version too; ``SUBSTITUTES`` names the one exception and
   why); the test tools join them, under the same constraints, as a test harness on that runtime
   would have to;
3. the runtime's pyspark (its ``# spark:`` line) and py4j in a folder of their own that a ``.pth`` file
   puts on the interpreter's path, with their pip metadata removed: as on Databricks, Python imports
   pyspark but pip does not see it, so a package that required pyspark would install PyPI's over it;
4. this checkout, editable, with the ``notebook`` and ``mlflow`` features, under the constraints.

Step 4 is what a user's ``%pip install tfos_notebook[notebook,mlflow]`` does on the runtime: it fails
(and so does this script) if this package needs another version of anything the runtime ships.
``install.json`` in the environment records the distributions step 4 added (none of the runtime's,
and never pyspark or py4j), which the tests check again. The environment is rebuilt only when the
stack file, pyproject.toml or this script changes (``.built`` holds their checksum).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: The runtime's packages the package, the example notebooks and the smoke tests import; each is
#: installed only where the stack ships it (tf-keras from 15.4, tensorflow-cpu on 14.3...).
RUNTIME = ("tensorflow", "tensorflow-cpu", "tf-keras", "keras", "tensorboard", "tensorboard-plugin-profile",
           "mlflow-skinny", "ipywidgets", "ipykernel", "ipython", "jupyter-client", "nbclient", "nbformat",
           "scikit-learn", "pandas", "pyarrow", "pyarrow-hotfix", "numpy", "cloudpickle", "psutil", "msgpack",
           "cryptography", "fsspec", "protobuf", "grpcio", "grpcio-status", "googleapis-common-protos",
           "setuptools", "optuna")
#: The test harness (not part of any runtime): resolved under the stack's constraints like the rest.
TEST_TOOLS = ("pytest", "pytest-timeout", "hypothesis")
#: What the runtime has but pip must not see (see step 3).
HIDDEN = ("pyspark", "py4j")
#: Where a stand-in cannot hold the runtime's own build: ``{stack: {package: (version, why)}}``.
#: The package's own install (step 4) is still checked against the runtime's file as it is.
SUBSTITUTES = {
    "dbr-16.4-lts-ml-cpu": {
        "pandas": ("2.1.4", "16.4 ships pandas 1.5.3 on Python 3.12, which PyPI has no wheel of (Databricks builds "
                            "its own; a build from source takes over 10 minutes on two cores): the stand-in takes "
                            "the oldest pandas line with Python 3.12 wheels that Spark 3.5 supports"),
    },
}


def stack_file(name: str) -> Path:
    path = HERE / f"{name}.txt"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in HERE.glob("dbr-*.txt")))
        raise SystemExit(f"no stack named {name!r} in {HERE} (known: {known})")
    return path


def header(path: Path, key: str) -> str:
    """A ``# key: value`` line of the stack file's header (python, spark)."""
    for line in path.read_text().splitlines():
        m = re.match(rf"#\s*{key}:\s*(\S+)", line)
        if m:
            return m.group(1)
    raise SystemExit(f"{path.name} has no '# {key}:' line")


def pins(path: Path) -> dict[str, str]:
    """The stack's packages, normalised name -> exact version."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if m:
            out[normalise(m.group(1))] = m.group(2)
    return out


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def find_python(version: str) -> str:
    """The runtime's Python: pyenv's newest ``X.Y.*``, else a ``pythonX.Y`` on the PATH that really
    is X.Y (a pyenv shim there may answer with another version, or not at all)."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", Path(p).parents[1].name)])
    found.reverse()
    if shutil.which(f"python{version}"):
        found.append(shutil.which(f"python{version}"))
    for python in found:
        said = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True)
        if said.returncode == 0 and said.stdout.strip() == version:
            return python
    raise SystemExit(f"Python {version} (this runtime's) is neither under {root}/versions nor on the PATH as "
                     f"python{version}: install it (pyenv install {version}) to build this stack")


def fingerprint(path: Path) -> str:
    digest = hashlib.sha256()
    for part in (path, ROOT / "pyproject.toml", Path(__file__)):
        digest.update(part.read_bytes())
    return digest.hexdigest()[:16]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def distributions(python: str) -> dict[str, str]:
    """Every distribution the environment's pip sees, normalised name -> version."""
    code = ("import json, importlib.metadata as m; "
            "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))")
    out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
    return {normalise(k): v for k, v in json.loads(out).items()}


def build(name: str, uv: str, dest: Path, force: bool = False) -> Path:
    path = stack_file(name)
    env_dir = dest / name
    stamp = env_dir / ".built"
    mark = fingerprint(path)
    if not force and stamp.exists() and stamp.read_text().strip() == mark:
        print(f"{name}: up to date ({env_dir})")
        return env_dir
    started = time.monotonic()
    version, spark = header(path, "python"), header(path, "spark")
    shutil.rmtree(env_dir, ignore_errors=True)
    run([uv, "venv", "-q", "--python", find_python(version), "--no-python-downloads", str(env_dir)])
    python = str(env_dir / "bin" / "python")
    stack = pins(path)
    constrain = ["--python", python, "-c", str(path)]
    # 2. the runtime's packages (and the test harness), at the stack's versions (but substitutes)
    substitutes = SUBSTITUTES.get(name, {})
    stand_in = env_dir / "stand-in-constraints.txt"
    stand_in.write_text("".join(f"{k}=={substitutes[k][0] if k in substitutes else v}\n" for k, v in stack.items()))
    wanted = [p for p in RUNTIME if p in stack]
    run([uv, "pip", "install", "-q", "--python", python, "-c", str(stand_in), *wanted, *TEST_TOOLS])
    # 3. the runtime's pyspark and py4j, importable but invisible to pip
    spark_dir = env_dir / "spark"
    run([uv, "pip", "install", "-q", "--python", python, "--target", str(spark_dir),
         "--config-settings-package", "pyspark:--build-option=--compression=stored", f"pyspark=={spark}"])
    for info in spark_dir.glob("*.dist-info"):
        shutil.rmtree(info)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "databricks-runtime-spark.pth").write_text(f"{spark_dir}\n")
    # 4. this package, as a user installs it there
    before = distributions(python)
    run([uv, "pip", "install", "-q", *constrain, "-e", f"{ROOT}[notebook,mlflow]"],
        env={**os.environ, "SKIP_JUPYTER_BUILDER": "1"})
    after = distributions(python)
    added = {k: v for k, v in after.items() if before.get(k) != v}
    report = {"stack": name, "python": version, "spark": spark,
              "substitutes": {k: {"runtime": stack[k], "stand_in": v, "why": why} for k, (v, why) in substitutes.items()},
              "added": added, "changed_runtime": {k: [stack[k], v] for k, v in added.items() if k in stack and stack[k] != v},
              "hidden_visible": sorted(set(after) & set(HIDDEN)), "seconds": round(time.monotonic() - started, 1)}
    (env_dir / "install.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"{name}: built in {report['seconds']} s; the install added {sorted(added)}")
    if report["changed_runtime"] or report["hidden_visible"]:
        raise SystemExit(f"{name}: installing the package changed the runtime: {report}")
    stamp.write_text(mark + "\n")
    return env_dir


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", nargs="+", help="stack names (the files' names without .txt)")
    parser.add_argument("--uv", default="uv", help="the uv to install with")
    parser.add_argument("--dest", default=str(ROOT / ".stacks"), help="where the environments go")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    for name in args.stacks:
        build(name, args.uv, Path(args.dest), args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
