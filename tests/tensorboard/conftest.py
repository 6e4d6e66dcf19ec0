import pytest


@pytest.fixture(autouse=True)
def isolated_state_dir(tmp_path, monkeypatch):
    """Each test gets its own registry of TensorBoard processes and mirror directories."""
    state = tmp_path / "state"
    monkeypatch.setenv("TFOS_NOTEBOOK_STATE_DIR", str(state))
    return state


@pytest.fixture
def stop_tensorboards():
    """Stops every TensorBoard this test started, even when it fails."""
    yield
    from tfos_notebook.tensorboard import process

    process.stop_owned()
