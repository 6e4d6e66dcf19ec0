"""The Databricks context, read from faked REPL contexts, runtime versions and confs (see
``databricks_shapes.py`` for what is faked and where each value comes from). No Spark."""

from __future__ import annotations

import types

from databricks_shapes import AWS, AZURE, SERVERLESS, RaisingConf, on_databricks

from tfos_notebook.runtime.driver.diagnosis.diagnose import Snapshot, diagnose
from tfos_notebook.runtime.driver.spark import ClassicBackend, ConnectBackend
from tfos_notebook.runtime.driver.spark.databricks import AccessMode, read_context, runtime_version


def test_off_databricks_there_is_no_context_even_with_a_clusters_tags(monkeypatch, tmp_path):
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    # a Databricks Connect client on a laptop reads the cluster's tags, but runs on the laptop
    conf = RaisingConf({"spark.databricks.clusterUsageTags.clusterId": "0112-220452-osc8oiar"})
    assert read_context(conf, connect=True, version_file=str(tmp_path / "DBR_VERSION")) is None
    (tmp_path / "DBR_VERSION").write_text("15.4\n")  # a runtime without the variable (MLflow's fallback)
    assert runtime_version({}, str(tmp_path / "DBR_VERSION")) == "15.4"


def test_a_dedicated_cluster_is_read_from_the_repl_context_first(monkeypatch):
    # faked: an AWS workspace's REPL context (Arize-ai/phoenix#953), a dedicated cluster's access mode tag
    on_databricks(monkeypatch, "15.4", AWS)
    conf = RaisingConf({"spark.databricks.clusterUsageTags.dataSecurityMode": "SINGLE_USER",
                        "spark.databricks.clusterUsageTags.clusterId": "not-this-one"})
    ctx = read_context(conf, connect=False)
    assert (ctx.runtime_version, ctx.access_mode, ctx.cluster_id, ctx.workspace_id, ctx.comm_port) == (
        "15.4", AccessMode.DEDICATED, "0112-220452-osc8oiar", "1018391329803962", 6062)
    assert ctx.access_mode_source == "spark.databricks.clusterUsageTags.dataSecurityMode=SINGLE_USER"
    assert ctx.proxy_url(6006) == \
        "https://dbc-f0b05a54-473d.cloud.databricks.com/driver-proxy/o/1018391329803962/0112-220452-osc8oiar/6006/"
    assert ctx.has_driver_proxy


def test_without_a_repl_context_the_confs_tell_and_every_unreadable_conf_is_skipped(monkeypatch):
    # faked: a runtime with no REPL context; the cluster usage tags of an Azure workspace; the
    # other keys raise CONFIG_NOT_AVAILABLE
    on_databricks(monkeypatch, "13.3", None)
    conf = RaisingConf({"spark.databricks.clusterUsageTags.clusterId": AZURE["clusterId"],
                        "spark.databricks.clusterUsageTags.orgId": AZURE["workspaceId"],
                        "spark.databricks.workspaceUrl": AZURE["workspaceUrl"],
                        "spark.databricks.driver.ipykernel.commChannelPort": "6123"})
    ctx = read_context(conf, connect=False)
    assert ctx.proxy_url(6006) == ("https://adb-1234567812345678.12.azuredatabricks.net/driver-proxy/o/"
                                   "1234567890123456/1234-123456-1234abcd/6006/")
    assert ctx.comm_port == 6123
    assert ctx.access_mode is AccessMode.DEDICATED
    assert ctx.access_mode_source == "a classic Spark session on Databricks Runtime 13.3"
    assert "spark.databricks.clusterUsageTags.clusterOwnerOrgId" in conf.asked  # raised, then the next key


def test_standard_access_mode_by_its_tag_or_as_mlflow_decides_by_spark_connect(monkeypatch):
    on_databricks(monkeypatch, "15.4", AZURE)
    tagged = read_context(RaisingConf({"spark.databricks.clusterUsageTags.dataSecurityMode": "USER_ISOLATION"}),
                          connect=True)
    assert tagged.access_mode is AccessMode.STANDARD
    untagged = read_context(RaisingConf(), connect=True)
    assert untagged.access_mode is AccessMode.STANDARD
    assert untagged.access_mode_source == "a Spark Connect session on Databricks Runtime 15.4"
    assert read_context(RaisingConf({"spark.databricks.clusterUsageTags.dataSecurityMode": "NONE"}),
                        connect=False).access_mode is AccessMode.NO_ISOLATION


def test_serverless_is_told_by_its_runtime_version_and_has_no_driver_proxy(monkeypatch):
    # faked: a serverless notebook, whose every conf read raises CONFIG_NOT_AVAILABLE
    on_databricks(monkeypatch, "client.1.1", SERVERLESS)
    ctx = read_context(RaisingConf(), connect=True)
    assert ctx.access_mode is AccessMode.SERVERLESS and ctx.access_mode_source == "Databricks Runtime client.1.1"
    assert ctx.cluster_id is None and not ctx.has_driver_proxy


def test_a_repl_context_whose_attributes_raise_falls_back_to_the_confs(monkeypatch):
    class Broken:
        @property
        def clusterId(self):
            raise RuntimeError("context not ready")

    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    ctx = read_context(RaisingConf({"spark.databricks.clusterUsageTags.clusterId": "c1"}), connect=False,
                       repl=Broken())
    assert ctx.cluster_id == "c1" and ctx.workspace_id is None and not ctx.has_driver_proxy


class _Session:
    """A Spark Connect session's shape: ``conf.get`` raises CONFIG_NOT_AVAILABLE for every key."""

    def __init__(self) -> None:
        self.conf = types.SimpleNamespace(get=lambda key, default=None: RaisingConf()(key))


class _Context:
    """A SparkContext whose ``getConf().get`` raises, delegating nothing else."""

    def getConf(self):
        return types.SimpleNamespace(get=lambda key, default=None: RaisingConf()(key))


def test_backends_answer_the_default_when_a_conf_read_raises_and_find_the_driver_by_its_host(monkeypatch):
    # faked: every conf read raises CONFIG_NOT_AVAILABLE, spark.driver.host included; this host's
    # name resolves to a cluster address
    on_databricks(monkeypatch, "client.1.1", SERVERLESS)
    monkeypatch.setattr("socket.gethostname", lambda: "0112-220452-osc8oiar-10-139-64-4")
    monkeypatch.setattr("socket.gethostbyname", lambda name: "10.139.64.4")
    for backend in (ConnectBackend(_Session()), ClassicBackend(_Context())):
        assert backend.conf("spark.task.cpus", "1") == "1"
        assert backend.databricks().access_mode is AccessMode.SERVERLESS
        assert backend.driver_host() == "10.139.64.4"  # executors on other machines never reach 127.0.0.1
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION")
    assert ConnectBackend(_Session()).driver_host() == "127.0.0.1"  # off Databricks: this machine's loopback


def test_standard_access_mode_is_warned_of_before_launch_with_what_fails_there_and_why(monkeypatch):
    # faked: an Azure standard cluster's REPL context and access mode tag
    on_databricks(monkeypatch, "15.4", AZURE)
    where = read_context(RaisingConf({"spark.databricks.clusterUsageTags.dataSecurityMode": "USER_ISOLATION"}),
                         connect=True)
    [finding] = diagnose(Snapshot(2, total_slots=2, databricks=where))
    assert finding.severity == "warning" and finding.code == "databricks_standard_access"
    assert finding.describe() == (
        "this notebook runs on a Databricks cluster in standard access mode, where training is not expected to work"
        "\n    evidence: standard access mode: spark.databricks.clusterUsageTags.dataSecurityMode=USER_ISOLATION"
        "\n    evidence: on standard compute user code and UDFs run in isolated sandboxes (Lakeguard), and no public "
        "source shows a task there opening a TCP connection to the notebook, which every node needs for its "
        "control channel"
        "\n    evidence: standard compute offers no GPUs, no Databricks Runtime for ML and no FUSE for DBFS root or "
        "mounts (/dbfs) (https://docs.databricks.com/compute/access-mode-limitations.html)"
        "\n    fix: use a cluster in dedicated (single user) access mode with a Databricks Runtime for ML; keep files "
        "in a Unity Catalog volume (/Volumes/<catalog>/<schema>/<volume>/...)")
    warning, gpus = diagnose(Snapshot(2, total_slots=2, gpus_per_node=1, task_gpus=1, databricks=where))
    assert gpus.severity == "blocker" and gpus.cause == (
        "1 GPU(s) per node were asked for, but Databricks standard access mode offers no GPUs")


def test_serverless_compute_is_warned_of_before_launch(monkeypatch):
    # faked: a serverless notebook; every conf read raises CONFIG_NOT_AVAILABLE
    on_databricks(monkeypatch, "client.1.1", SERVERLESS)
    [finding] = diagnose(Snapshot(2, total_slots=2, databricks=read_context(RaisingConf(), connect=True)))
    assert (finding.code, finding.severity) == ("databricks_serverless", "warning")
    assert finding.describe(evidence=False) == (
        "this notebook runs on Databricks serverless compute, where training is not expected to work"
        "\n    fix: attach the notebook to a classic cluster in dedicated (single user) access mode, with a "
        "Databricks Runtime for ML for TensorFlow and GPUs")
    assert finding.evidence[0] == "serverless compute: Databricks Runtime client.1.1"


def test_dedicated_clusters_get_no_compute_warning(monkeypatch):
    on_databricks(monkeypatch, "15.4", AWS)
    dedicated = read_context(RaisingConf({"spark.databricks.clusterUsageTags.dataSecurityMode": "SINGLE_USER"}),
                             connect=False)
    assert diagnose(Snapshot(2, total_slots=2, databricks=dedicated)) == []


def test_gpus_asked_of_a_single_node_cluster_are_refused_since_databricks_schedules_none_there(monkeypatch):
    """Databricks turns GPU scheduling off on single-node compute (its tasks get no GPU addresses):
    asking for GPUs per node there is refused before launch with the two ways out. Faked: a
    single-node cluster's profile conf and worker count tag."""
    on_databricks(monkeypatch, "15.4", AWS)
    for confs in ({"spark.databricks.cluster.profile": "singleNode"}, {"spark.databricks.clusterUsageTags.clusterWorkers": "0"}):
        single = read_context(RaisingConf(confs), connect=False)
        assert single.single_node and single.access_mode is AccessMode.DEDICATED
        [finding] = diagnose(Snapshot(1, total_slots=4, gpus_per_node=1, task_gpus=1, databricks=single))
        assert (finding.code, finding.severity) == ("databricks_single_node_gpus", "blocker")
        assert finding.cause == ("1 GPU(s) per node were asked of Spark, but Databricks does not schedule GPUs on "
                                 "single-node compute: its tasks get no GPU addresses")
        assert finding.remedy.startswith("use a multi-node GPU cluster")
        assert diagnose(Snapshot(1, total_slots=4, databricks=single)) == []  # without GPUs: nothing to say
    multi = read_context(RaisingConf({"spark.databricks.clusterUsageTags.clusterWorkers": "2"}), connect=False)
    assert not multi.single_node


def test_mlflow_logs_by_default_on_a_cluster_but_not_on_serverless_where_autologging_is_off(monkeypatch):
    from tfos_notebook.tracking.settings import resolve

    monkeypatch.delenv("TFOS_MLFLOW", raising=False)
    on_databricks(monkeypatch, "15.4", AWS)
    cluster = read_context(RaisingConf(), connect=False)
    on_databricks(monkeypatch, "client.1.1", SERVERLESS)
    serverless = read_context(RaisingConf(), connect=True)
    assert cluster.autologs_by_default and not serverless.autologs_by_default
    assert resolve(None, cluster.autologs_by_default, RaisingConf()) is not None
    assert resolve(None, serverless.autologs_by_default, RaisingConf()) is None
