"""A real Spark standalone cluster on 127.0.0.1, started from pyspark's own jars.

Used by the test suite and the benchmarks, and handy for trying multi-executor behaviour on a
laptop: ``python -m tfos_notebook.devcluster`` starts one and prints its master URL.

The pip ``pyspark`` package ships no ``sbin/start-*.sh`` scripts, so the master and workers are
started with ``bin/spark-class`` directly. Each worker advertises fake GPU addresses through a
discovery script, so GPU scheduling (task resources, addresses) is exercised for real on a machine
without GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .runtime.driver.spark.standalone import master_state
from .runtime.host.ports import free_port
from .runtime.host.procs import kill_process_group
from .runtime.host.timeouts import Deadline


def spark_home() -> str:
    """The folder of the installed pyspark package, which is a complete SPARK_HOME."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen, log: Path) -> None:
    def answers() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"Spark process exited with {proc.returncode}; log:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:  # not listening yet
            return False

    if Deadline(timeout).wait_until(answers, interval=0.2):
        return
    raise TimeoutError(f"Spark process did not open {host}:{port} in {timeout:.0f}s; log:\n{log.read_text()[-3000:]}")


def gpu_discovery_script(root: Path, gpus: int) -> Path:
    """A GPU discovery script in ``root`` that reports ``gpus`` fake addresses, 0 to ``gpus - 1``
    (for workers, and for a driver that owns GPUs: ``spark.driver.resource.gpu.discoveryScript``)."""
    script = root / f"gpus-{gpus}.sh"
    addresses = json.dumps([str(i) for i in range(gpus)])
    script.write_text(f"#!/bin/sh\necho '{{\"name\":\"gpu\",\"addresses\":{addresses}}}'\n")
    script.chmod(0o755)
    return script


def worker_properties(root: Path, gpus: int) -> Path:
    """A worker properties file in ``root`` advertising ``gpus`` fake GPU addresses (a discovery
    script that names them), or none."""
    props = root / "worker.properties"
    lines = []
    if gpus:
        script = gpu_discovery_script(root, gpus)
        lines += [f"spark.worker.resource.gpu.amount {gpus}", f"spark.worker.resource.gpu.discoveryScript {script}"]
    props.write_text("\n".join(lines) + "\n")
    return props


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers on 127.0.0.1.

    Args:
        workers: number of worker processes.
        cores: cores each worker offers.
        memory: memory each worker offers (Spark size string).
        gpus_per_worker: fake GPU addresses each worker advertises (0 for none).
        decommission: workers and applications with graceful decommission on
            (``spark.decommission.enabled``): a worker sent SIGPWR (:meth:`decommission_executor`) tells the
            master, which tells each application's driver that its executors there are leaving.
    """

    workers: int = 2
    cores: int = 1
    memory: str = "3g"
    gpus_per_worker: int = 2
    decommission: bool = False
    host: str = "127.0.0.1"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tfos-devcluster-")))
    master_port: int = 0
    ui_port: int = 0  # the master's web UI (its JSON at /json/ lists workers and applications)
    _procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SPARK_HOME"] = spark_home()
        env["SPARK_LOCAL_IP"] = self.host
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["SPARK_NO_DAEMONIZE"] = "1"
        if self.decommission:
            env["SPARK_WORKER_OPTS"] = f"{env.get('SPARK_WORKER_OPTS', '')} -Dspark.decommission.enabled=true".strip()
        return env

    def _spawn(self, name: str, args: list[str]) -> tuple[subprocess.Popen, Path]:
        log = self.root / f"{name}.log"
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
        proc = subprocess.Popen(
            cmd, env=self._env(), stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
        self._procs.append(proc)
        return proc, log

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        """Start the master and the workers; return once every worker has registered."""
        self.master_port = self.master_port or free_port(self.host)
        self.ui_port = self.ui_port or free_port(self.host)
        proc, log = self._spawn(
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", self.host, "--port", str(self.master_port),
             "--webui-port", str(self.ui_port)],
        )
        wait_for_port(self.host, self.master_port, timeout, proc, log)
        for i in range(self.workers):
            self._start_worker(i)
        self._wait_for_workers(timeout)
        return self

    def _start_worker(self, i: int) -> None:
        work = self.root / f"worker{i}"
        work.mkdir()
        self._spawn(
            f"worker{i}",
            ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", self.host,
             "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
             "--webui-port", str(free_port(self.host)),
             "--properties-file", str(worker_properties(self.root, self.gpus_per_worker))],
        )

    def add_worker(self) -> None:
        """Start one more worker (a replacement); returns at once, before it registers."""
        self.workers += 1
        self._start_worker(self.workers - 1)

    @staticmethod
    def executor_process(executor_id: str, app_id: str):
        """The JVM (a ``psutil.Process``) of executor ``executor_id`` of application ``app_id``."""
        import psutil

        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmd and app_id in cmd \
                    and cmd[cmd.index("--executor-id") + 1] == executor_id:
                return proc
        raise LookupError(f"no executor {executor_id} of {app_id} runs on this cluster")

    def decommission_executor(self, executor_id: str, app_id: str) -> int:
        """Send SIGPWR to the worker that hosts executor ``executor_id`` of application ``app_id``, as
        a cloud's notice does to a spot node's worker; returns the worker's pid."""
        worker = self.executor_process(executor_id, app_id).parent()
        worker.send_signal(signal.SIGPWR)
        return worker.pid

    def _wait_for_workers(self, timeout: float) -> None:
        alive = 0

        def registered() -> bool:
            nonlocal alive
            state = master_state(self.master_url, self.ui_port, timeout=2)
            if state is None:  # the master's UI is not up yet
                return False
            alive = sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
            return alive >= self.workers

        if Deadline(timeout).wait_until(registered, interval=0.3):
            return
        logs = "\n".join(p.read_text()[-1500:] for p in self.root.glob("worker*.log"))
        raise TimeoutError(f"only {alive}/{self.workers} workers registered in {timeout:.0f}s\n{logs}")

    def spark_conf(self, gpus_per_task: int = 1, executor_cores: int | None = None,
                   driver_gpus: int = 0) -> dict[str, str]:
        """Spark settings for an application on this cluster: one executor per worker, with
        ``executor_cores`` cores (default: all the worker's), each task taking ``gpus_per_task``
        GPUs (0: GPUs are not scheduled), and ``driver_gpus`` fake GPUs for the driver process."""
        cores = executor_cores or self.cores
        conf = {
            "spark.master": self.master_url,
            "spark.executor.cores": str(cores),
            "spark.executor.memory": "1g",
            "spark.cores.max": str(cores * self.workers),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.ui.enabled": "false",
            "spark.master.ui.port": str(self.ui_port),  # where launches ask who holds the cores
            "spark.executorEnv.SPARK_LOCAL_IP": self.host,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        }
        if self.decommission:
            conf["spark.decommission.enabled"] = "true"
        if self.gpus_per_worker and gpus_per_task:
            conf["spark.executor.resource.gpu.amount"] = str(min(self.gpus_per_worker, gpus_per_task * cores))
            conf["spark.task.resource.gpu.amount"] = str(gpus_per_task)
        if driver_gpus:
            conf["spark.driver.resource.gpu.amount"] = str(driver_gpus)
            conf["spark.driver.resource.gpu.discoveryScript"] = str(gpu_discovery_script(self.root, driver_gpus))
        return conf

    def stop(self) -> None:
        """Stop every process of the cluster (workers first) and remove its folder."""
        for proc in reversed(self._procs):
            kill_process_group(proc, grace=15)
        self._procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@dataclass
class ConnectServer:
    """A Spark Connect server on 127.0.0.1 (``local[cores]``), started from pyspark's own jars as
    a separate process: clients reach it with ``SparkSession.builder.remote(server.url)``.

    Args:
        cores: the server's local task slots.
        conf: extra Spark settings for the server's application.
        pythonpath: ``PYTHONPATH`` of the server and its Python workers (default: this process's
            ``sys.path``, so executors import the same code as the caller).
    """

    cores: int = 3
    conf: dict[str, str] = field(default_factory=dict)
    pythonpath: str | None = None
    host: str = "127.0.0.1"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tfos-connect-")))
    port: int = 0
    _proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def start(self, timeout: float = 120.0) -> ConnectServer:
        """Start the server; return once it accepts connections."""
        self.port = self.port or free_port(self.host)
        env = dict(os.environ)
        env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP=self.host, SPARK_NO_DAEMONIZE="1")
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["PYTHONPATH"] = self.pythonpath if self.pythonpath is not None else os.pathsep.join(p for p in sys.path if p)
        conf = {"spark.connect.grpc.binding.address": self.host, "spark.connect.grpc.binding.port": str(self.port),
                "spark.driver.host": self.host, "spark.driver.bindAddress": self.host, "spark.ui.enabled": "false",
                **self.conf}
        cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--class",
               "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", f"local[{self.cores}]"]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        log = self.root / "server.log"
        self._proc = subprocess.Popen(cmd, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT,
                                      start_new_session=True, cwd=self.root)
        try:
            wait_for_port(self.host, self.port, timeout, self._proc, log)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (and its Python workers) and remove its folder."""
        if self._proc is not None:
            kill_process_group(self._proc, grace=15)
            self._proc = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    cluster = StandaloneCluster().start()
    print(f"master: {cluster.master_url}  (Ctrl-C or SIGTERM stops it)", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # so that the JVMs are stopped on SIGTERM too
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
