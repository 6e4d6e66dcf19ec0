import pytest
from databricks_shapes import AWS, AZURE, GCP, SERVERLESS, RaisingConf, on_databricks

from tfos_notebook.runtime.driver.spark.databricks import read_context
from tfos_notebook.tensorboard.urls import ProxyPortError, bind_host, port_candidates, tensorboard_url


def test_a_databricks_cluster_serves_tensorboard_through_its_driver_proxy_in_the_documented_form(monkeypatch):
    # faked: an AWS workspace's REPL context, as Arize-ai/phoenix#953 quotes its ids; the proxy's
    # form /driver-proxy/o/<org>/<cluster>/<port>/ is the one Ray's databricks_hook.py documents
    on_databricks(monkeypatch, "15.4", AWS)
    where = read_context(RaisingConf(), connect=False)
    assert tensorboard_url(6006, where) == \
        "https://dbc-f0b05a54-473d.cloud.databricks.com/driver-proxy/o/1018391329803962/0112-220452-osc8oiar/6006/"
    assert bind_host(where) == "0.0.0.0"  # the proxy connects from beyond the loopback, and authenticates
    assert tensorboard_url(8501, where).endswith("/0112-220452-osc8oiar/8501/")  # public apps use other ports


@pytest.mark.parametrize("cloud, url", [
    (AZURE, "https://adb-1234567812345678.12.azuredatabricks.net/driver-proxy/o/1234567890123456/1234-123456-1234abcd/6006/"),
    (GCP, "https://1234567890123456.7.gcp.databricks.com/driver-proxy/o/1234567890123456/0923-164208-meows279/6006/"),
], ids=["azure", "gcp"])
def test_the_driver_proxy_link_on_azure_and_google_cloud_is_the_workspaces_own_host(monkeypatch, cloud, url):
    # faked: Azure's and GCP's workspace hosts (see databricks_shapes); the proxy path is the same on every cloud
    on_databricks(monkeypatch, "15.4", cloud)
    assert tensorboard_url(6006, read_context(RaisingConf(), connect=False)) == url


def test_databricks_ports_avoid_the_notebooks_ipywidgets_comm_channel(monkeypatch):
    on_databricks(monkeypatch, "15.4", AZURE)
    where = read_context(RaisingConf(), connect=False)
    candidates = port_candidates(where)
    assert (candidates[0], candidates[-1], len(candidates)) == (6006, 6106, 100) and 6062 not in candidates
    with pytest.raises(ProxyPortError, match=r"^port 6062 is the notebook's ipywidgets comm channel on this "
                                             r"Databricks cluster \(spark\.databricks\.driver\.ipykernel\."
                                             r"commChannelPort\): start TensorBoard on another port, such as 6006$"):
        tensorboard_url(6062, where)
    moved = read_context(RaisingConf({"spark.databricks.driver.ipykernel.commChannelPort": "6070"}), connect=False)
    assert 6070 not in port_candidates(moved) and 6062 in port_candidates(moved)


def test_serverless_and_other_places_listen_on_the_loopback_only(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))  # no running server there
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    on_databricks(monkeypatch, "client.1.1", SERVERLESS)  # faked: serverless, no driver proxy
    serverless = read_context(RaisingConf(), connect=True)
    assert bind_host(serverless) == bind_host(None) == "127.0.0.1"
    assert port_candidates(serverless) is None and tensorboard_url(6010, serverless) == "http://127.0.0.1:6010/"


def test_outside_databricks_and_jupyter_the_url_is_local(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))  # no running server there
    monkeypatch.delenv("JPY_PARENT_PID", raising=False)
    assert tensorboard_url(6010) == "http://127.0.0.1:6010/"
    assert port_candidates(None) is None
