import pytest

from tfos_notebook.tensorboard.urls import (
    CLUSTER_ID_KEY,
    ORG_ID_KEY,
    WORKSPACE_URL_KEY,
    ProxyPortError,
    port_candidates,
    tensorboard_url,
)

DATABRICKS = {ORG_ID_KEY: "1234567890", CLUSTER_ID_KEY: "0101-abcdef-xyz"}


def test_databricks_url_goes_through_the_driver_proxy_of_the_workspace():
    conf = {**DATABRICKS, WORKSPACE_URL_KEY: "adb-1.2.azuredatabricks.net"}
    assert tensorboard_url(6006, conf) == \
        "https://adb-1.2.azuredatabricks.net/driver-proxy/o/1234567890/0101-abcdef-xyz/6006/"
    assert tensorboard_url(6106, DATABRICKS) == "/driver-proxy/o/1234567890/0101-abcdef-xyz/6106/"


def test_databricks_ports_outside_6006_6106_are_refused_with_the_fix():
    with pytest.raises(ProxyPortError, match="forwards ports 6006-6106 only: start TensorBoard on one of those"):
        tensorboard_url(6107, DATABRICKS)
    assert port_candidates(DATABRICKS) == range(6006, 6107)


def test_outside_databricks_and_jupyter_the_url_is_local(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))  # no running server there
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    assert tensorboard_url(6010) == "http://127.0.0.1:6010/"
    assert port_candidates({}) is None and port_candidates(None) is None


def test_a_spark_conf_is_read_like_a_mapping(local_spark):
    conf = local_spark.sparkContext.getConf()  # a copy: setting keys changes nothing in the session
    assert port_candidates(conf) is None
    conf.set(ORG_ID_KEY, "1").set(CLUSTER_ID_KEY, "c")
    assert tensorboard_url(6006, conf) == "/driver-proxy/o/1/c/6006/"
