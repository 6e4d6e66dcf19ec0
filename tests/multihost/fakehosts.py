"""A Spark standalone cluster of fake hosts on one machine, made with Linux namespaces (as root).

Each host has its own network namespace (an address on a bridge in 10.251.0.0/24), its own pid and
mount namespaces with a private tmpfs on ``/tmp``, its own hostname, and an ``/etc/hosts`` that names
every host. The Spark master runs in the root network namespace on the bridge's address; a driver
(``FakeHosts.driver``) runs there too, but in its own pid and mount namespace with its own ``/tmp``,
so it shares neither files under ``/tmp`` nor the process table with any host. An optional shared
directory is bind-mounted at ``/tmp/shared`` on every host and on the driver, standing in for shared
storage (NFS, HDFS); everything else under ``/tmp`` is local to one host.

Databricks' FUSE mounts stand in too, as mount points (which is how they are told apart from a
directory of that name): a part of the shared directory is mounted at ``/Volumes`` (holding the
volume ``/Volumes/main/tfos/shared``) and another at ``/dbfs``, on every host and driver. The volume
itself is a FUSE mount that refuses what a Unity Catalog volume refuses (appends, writes that do not
go on where the last one ended, writing into an existing file: ``tests/volumefs.py``); what it
refused is in ``volume_refusals``. ``set_dbfs``
unmounts or remounts ``/dbfs`` on one host, as on compute without FUSE for DBFS root. The empty
directories ``/Volumes`` and ``/dbfs`` are made on the machine's root to mount on, and removed at
``stop`` when empty and not mounted there.

Only one such cluster can exist on a machine at a time (fixed names and addresses). ``stop`` tears it
all down by pid-namespace init, then the links and namespaces; ``start`` first removes what an
interrupted earlier session left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tfos_notebook.devcluster import free_port, spark_home, wait_for_port, worker_properties
from tfos_notebook.runtime.host.procs import kill_process_group
from tfos_notebook.runtime.host.timeouts import Deadline

BRIDGE = "tfosbr0"
SUBNET = "10.251.0"
MASTER_IP = f"{SUBNET}.1"
DRIVER_NAME = "tfos-driver"
REPO = Path(__file__).resolve().parents[2]
FUSE_MOUNTS = ("/Volumes", "/dbfs")
VOLUME = "/Volumes/main/tfos/shared"  # a Unity Catalog volume's path, /Volumes/<catalog>/<schema>/<volume>


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def unavailable_reason() -> str:
    """Why fake hosts cannot be made here ("" when they can): they need root, ``ip`` and ``unshare``."""
    if os.geteuid() != 0:
        return "fake hosts need root (Linux network, pid and mount namespaces)"
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"fake hosts need the {tool!r} command"
    probe = "tfos-probe"
    made = _ip("netns", "add", probe, check=False)
    _ip("netns", "del", probe, check=False)
    if made.returncode:
        return f"network namespaces are not permitted here: {made.stderr.strip()}"
    ok = subprocess.run(["unshare", "--mount", "--pid", "--uts", "--fork", "--mount-proc", "true"],
                        capture_output=True, text=True)
    if ok.returncode:
        return f"pid/mount namespaces are not permitted here: {ok.stderr.strip()}"
    return ""


def volume_fuse_reason() -> str:
    """Why the volume cannot be a FUSE mount that refuses what a volume refuses ("" when it can):
    it needs ``/dev/fuse``, libfuse 2 and fusepy (``make test`` installs both where it is root)."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse here"
    try:
        import fuse  # noqa: F401  (fusepy, which loads libfuse 2)
    except (ImportError, OSError) as e:
        return f"fusepy over libfuse 2 cannot be loaded ({e}): apt-get install libfuse2; pip install fusepy"
    return ""


def _kept_tmp_paths() -> list[str]:
    """Top-level entries of /tmp that the code, the venv or pyspark live in: each host's private /tmp
    binds them back, so that a checkout under /tmp still runs there."""
    import pyspark

    paths = {str(REPO), sys.prefix, os.path.dirname(pyspark.__file__), *sys.path}
    tmp = Path(tempfile.gettempdir()).resolve()
    kept = set()
    for p in paths:
        try:
            rel = Path(p).resolve().relative_to(tmp)
        except ValueError:
            continue
        if rel.parts:
            kept.add(rel.parts[0])
    return sorted(kept)


@dataclass
class Host:
    name: str
    ip: str
    veth: str  # the bridge-side end of its link; down means the host is cut off
    proc: subprocess.Popen | None = None  # the `unshare` that holds its namespaces

    @property
    def init_pid(self) -> int:
        """The pid (in the root namespace) of the host's pid-namespace init, its worker JVM."""
        children = psutil.Process(self.proc.pid).children()
        if not children:
            raise RuntimeError(f"host {self.name} has no running init process")
        return children[0].pid

    def pids(self) -> list[psutil.Process]:
        """Every process of this host (in its pid namespace)."""
        ns = os.readlink(f"/proc/{self.init_pid}/ns/pid")
        found = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.readlink(f"/proc/{p.pid}/ns/pid") == ns:
                    found.append(p)
            except OSError:  # ended meanwhile
                continue
        return found

    def find(self, *patterns: str) -> list[psutil.Process]:
        """This host's live processes whose command line and working directory (as the host sees
        it: a node's process works in ``/tmp/tfos-RUN_ID-TASK-...``, forked or not) hold every one
        of ``patterns`` between them."""
        found = []
        for p in self.pids():
            try:
                cmd = " ".join(p.cmdline()) + " cwd=" + p.cwd()
            except psutil.Error:  # ended, or a zombie
                continue
            if all(x in cmd for x in patterns):
                found.append(p)
        return found

    def run(self, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a shell command inside the host (its pid, mount, uts and network namespaces)."""
        return subprocess.run(["nsenter", "-t", str(self.init_pid), "-p", "-m", "-u", "-n", "sh", "-c", command],
                              capture_output=True, text=True, timeout=timeout)


@dataclass
class FakeHosts:
    """``hosts`` fake hosts each running a Spark worker with ``cores`` cores (and ``gpus`` fake GPU
    addresses), a master in the root network namespace, and drivers on demand."""

    hosts: int = 2
    cores: int = 1
    gpus: int = 0
    shared: bool = True
    memory: str = "2g"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tfos-fakehosts-", dir="/var/tmp")))
    master_port: int = 0
    _hosts: list[Host] = field(default_factory=list)
    _procs: list[subprocess.Popen] = field(default_factory=list)

    # -- set-up ------------------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        return f"spark://{MASTER_IP}:{self.master_port}"

    @property
    def shared_dir(self) -> Path:
        """The shared storage as the test process sees it (``/tmp/shared`` on the hosts and drivers)."""
        return self.root / "shared"

    def host(self, name: str) -> Host:
        return next(h for h in self._hosts if h.name == name)

    @property
    def all_hosts(self) -> list[Host]:
        return list(self._hosts)

    def start(self, timeout: float = 120.0) -> FakeHosts:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        self._remove_leftovers()
        (self.root / "oldtmp").mkdir()
        self.shared_dir.mkdir()
        self.shared_dir.chmod(0o1777)
        for mount in FUSE_MOUNTS:
            Path(mount).mkdir(exist_ok=True)
            self._fuse_source(mount).mkdir(mode=0o1777)
        volume = self._fuse_source("/Volumes") / VOLUME.removeprefix("/Volumes/")
        volume.mkdir(parents=True)
        if not volume_fuse_reason():
            self._mount_volume(volume)
        self._hosts = [Host(f"tfos-h{i + 1}", f"{SUBNET}.{11 + i}", f"tfosv{i + 1}") for i in range(self.hosts)]
        names = ["127.0.0.1 localhost", f"{MASTER_IP} {DRIVER_NAME}"] + [f"{h.ip} {h.name}" for h in self._hosts]
        (self.root / "hosts").write_text("\n".join(names) + "\n")
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("addr", "add", f"{MASTER_IP}/24", "dev", BRIDGE)
        _ip("link", "set", BRIDGE, "up")
        for h in self._hosts:
            _ip("netns", "add", h.name)
            _ip("link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.name)
            _ip("link", "set", h.veth, "master", BRIDGE)
            _ip("link", "set", h.veth, "up")
            _ip("-n", h.name, "addr", "add", f"{h.ip}/24", "dev", "eth0")
            _ip("-n", h.name, "link", "set", "eth0", "up")
            _ip("-n", h.name, "link", "set", "lo", "up")
        self.master_port = free_port(MASTER_IP)
        ui = free_port(MASTER_IP)
        log = self.root / "master.log"
        master = subprocess.Popen(
            [os.path.join(spark_home(), "bin", "spark-class"), "org.apache.spark.deploy.master.Master",
             "--host", MASTER_IP, "--port", str(self.master_port), "--webui-port", str(ui)],
            env=self._env(MASTER_IP), stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self._procs.append(master)
        props = worker_properties(self.root, self.gpus)
        wait_for_port(MASTER_IP, self.master_port, timeout, master, log)
        for h in self._hosts:
            command = [os.path.join(spark_home(), "bin", "spark-class"), "org.apache.spark.deploy.worker.Worker",
                       self.master_url, "--host", h.ip, "--cores", str(self.cores), "--memory", self.memory,
                       "--work-dir", "/tmp/spark-work", "--webui-port", "0", "--properties-file", str(props)]
            h.proc = subprocess.Popen(
                ["ip", "netns", "exec", h.name, *self._isolated(h.name), *command],
                env=self._env(h.ip), stdout=open(self.root / f"{h.name}.log", "wb"), stderr=subprocess.STDOUT,
                start_new_session=True)
        self._wait_for_workers(ui, timeout)

    def _mount_volume(self, mountpoint: Path) -> None:
        """The volume as a FUSE mount refusing what a Unity Catalog volume refuses, over a backing
        directory of the shared one (the hosts and drivers see it through their ``/Volumes``)."""
        backing = self.shared_dir / "volume-store"
        backing.mkdir(mode=0o1777)
        daemon = subprocess.Popen([sys.executable, str(REPO / "tests" / "volumefs.py"), str(backing), str(mountpoint),
                                   str(self.volume_refusals)], stdout=open(self.root / "volumefs.log", "wb"),
                                  stderr=subprocess.STDOUT, start_new_session=True)
        self._procs.append(daemon)
        if not Deadline(30).wait_until(lambda: os.path.ismount(mountpoint) or daemon.poll() is not None, interval=0.05) \
                or not os.path.ismount(mountpoint):
            raise RuntimeError(f"the volume's FUSE mount did not come up: {(self.root / 'volumefs.log').read_text()[-2000:]}")
        os.chmod(mountpoint, 0o1777)

    @property
    def volume_refusals(self) -> Path:
        """What the volume refused, a line each (``append /path``, ``random-write@... /path``...)."""
        return self.root / "volume-refusals.log"

    def _isolated(self, hostname: str) -> list[str]:
        """The command prefix that runs what follows in new pid, mount and uts namespaces with a
        private /tmp (the shared directory at /tmp/shared, and its parts at /Volumes and /dbfs), the
        given hostname and our /etc/hosts."""
        old = self.root / "oldtmp"
        keep = "".join(f"mkdir -p /tmp/{p} && mount --bind {old}/{p} /tmp/{p} && " for p in _kept_tmp_paths())
        fuse = "".join(f"mount --rbind {self._fuse_source(m)} {m} && " for m in FUSE_MOUNTS)  # the volume in it too
        shared = f"mkdir /tmp/shared && mount --bind {self.shared_dir} /tmp/shared && {fuse}" if self.shared else ""
        script = (f"mount --bind /tmp {old} && mount -t tmpfs -o mode=1777 tmpfs /tmp && {keep}{shared}"
                  f"mount --bind {self.root / 'hosts'} /etc/hosts && hostname {hostname} && exec \"$@\"")
        return ["unshare", "--mount", "--pid", "--uts", "--fork", "--mount-proc", "--kill-child",
                "sh", "-c", script, hostname]

    def _env(self, ip: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP=ip, SPARK_NO_DAEMONIZE="1",
                   PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                   SPARK_WORKER_OPTS="-Dspark.decommission.enabled=true")  # a worker sent SIGPWR decommissions
        env.pop("TFOS_NOTEBOOK_STATE_DIR", None)  # each host and driver keeps its state in its own /tmp
        return env

    def _wait_for_workers(self, ui: int, timeout: float) -> None:
        import urllib.request

        def alive() -> bool:
            for h in self._hosts:
                if h.proc.poll() is not None:
                    raise RuntimeError(f"{h.name}'s worker exited:\n{(self.root / f'{h.name}.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://{MASTER_IP}:{ui}/json/", timeout=2) as r:
                    state = json.load(r)
            except OSError:  # the master's UI is not up yet
                return False
            return sum(w.get("state") == "ALIVE" for w in state.get("workers", [])) >= len(self._hosts)

        if not Deadline(timeout).wait_until(alive, interval=0.3):
            raise TimeoutError(f"the fake hosts' workers did not register in {timeout:.0f}s")

    # -- drivers -----------------------------------------------------------------------------------
    def spark_conf(self, gpus_per_task: int = 0) -> dict[str, str]:
        conf = {
            "spark.master": self.master_url,
            "spark.executor.cores": str(self.cores),
            "spark.executor.memory": "1g",
            "spark.cores.max": str(self.cores * self.hosts),
            "spark.driver.host": MASTER_IP,
            "spark.driver.bindAddress": MASTER_IP,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.decommission.enabled": "true",
        }
        if self.gpus and gpus_per_task:
            conf["spark.executor.resource.gpu.amount"] = str(min(self.gpus, gpus_per_task * self.cores))
            conf["spark.task.resource.gpu.amount"] = str(gpus_per_task)
        return conf

    def driver(self, args: list[str], env: dict[str, str] | None = None, timeout: float = 300,
               ) -> subprocess.Popen:
        """Start ``python *args`` as a driver in its own pid and mount namespace (root network
        namespace, hostname tfos-driver, its own /tmp); ``TFOS_SPARK_CONF`` holds the Spark
        settings as JSON and ``TFOS_SPARK_MASTER`` the master URL."""
        full = self._env(MASTER_IP)
        full.update(TFOS_SPARK_CONF=json.dumps(self.spark_conf()), TFOS_SPARK_MASTER=self.master_url,
                    **(env or {}))
        proc = subprocess.Popen([*self._isolated(DRIVER_NAME), sys.executable, *args], env=full,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                cwd=REPO, start_new_session=True)
        self._procs.append(proc)
        return proc

    def _fuse_source(self, mount: str) -> Path:
        """The part of the shared directory mounted at ``mount`` (``/Volumes`` or ``/dbfs``)."""
        return self.shared_dir / mount.strip("/").lower()

    def set_dbfs(self, name: str, mounted: bool) -> None:
        """Unmount (or mount again) ``/dbfs`` on host ``name``, in its own mount namespace."""
        command = f"mount --bind {self._fuse_source('/dbfs')} /dbfs" if mounted else "umount /dbfs"
        done = self.host(name).run(command)
        if done.returncode:
            raise RuntimeError(f"{command} on {name} failed: {done.stderr.strip()}")

    # -- chaos ------------------------------------------------------------------------------------
    def cut(self, name: str) -> None:
        """Cut host ``name`` off the network (its link to the bridge goes down)."""
        _ip("link", "set", self.host(name).veth, "down")

    def reconnect(self, name: str) -> None:
        _ip("link", "set", self.host(name).veth, "up")

    def processes(self, pattern: str) -> dict[str, list[str]]:
        """Per host, the command lines of its live processes that contain ``pattern``."""
        found: dict[str, list[str]] = {}
        for h in self._hosts:
            for p in h.find(pattern):
                try:
                    found.setdefault(h.name, []).append(" ".join(p.cmdline()))
                except psutil.Error:
                    continue
        return found

    # -- tear-down ---------------------------------------------------------------------------------
    def stop(self) -> None:
        volume = self._fuse_source("/Volumes") / VOLUME.removeprefix("/Volumes/")
        if os.path.ismount(volume):
            subprocess.run(["umount", "-l", str(volume)], capture_output=True)
        for proc in reversed(self._procs):
            kill_process_group(proc, grace=5)
        self._procs.clear()
        for h in self._hosts:
            if h.proc is not None:
                kill_process_group(h.proc, grace=10)  # unshare --kill-child: the host's init and all in it
        self._remove_leftovers()
        subprocess.run(["umount", "-l", str(self.root / "oldtmp")], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
        for mount in FUSE_MOUNTS:  # only ever mounted inside the hosts' and drivers' namespaces
            if not os.path.ismount(mount):
                try:
                    os.rmdir(mount)
                except OSError:  # not empty, or gone already: not ours to remove
                    pass

    def _remove_leftovers(self) -> None:
        for i in range(8):
            _ip("link", "del", f"tfosv{i + 1}", check=False)
            _ip("netns", "del", f"tfos-h{i + 1}", check=False)
        _ip("link", "del", BRIDGE, check=False)

    def __enter__(self) -> FakeHosts:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for(proc: subprocess.Popen, timeout: float) -> tuple[dict, str]:
    """Wait for a driver; returns the JSON it printed on its ``RESULT`` line, and all its output."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_process_group(proc, grace=5)
        out, _ = proc.communicate()
        raise AssertionError(f"the driver did not end within {timeout:.0f}s; its output:\n{out[-6000:]}") from None
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if not lines:
        raise AssertionError(f"the driver exited with {proc.returncode} and no result; its output:\n{out[-6000:]}")
    return json.loads(lines[-1][len("RESULT "):]), out
