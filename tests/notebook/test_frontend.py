"""Choosing between the widget and the text monitor."""

from __future__ import annotations

import pytest

from tfos_notebook.notebook.frontend import choose_monitor
from tfos_notebook.runtime import ConfigError


def test_without_a_kernel_the_monitor_is_text(monkeypatch, ip):
    monkeypatch.delenv("TFOS_MONITOR", raising=False)
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    assert choose_monitor("auto", None) == "text"
    assert choose_monitor("auto", ip) == "text"  # terminal IPython has no kernel and no frontend


def test_databricks_gets_the_widget(monkeypatch, ip):
    # Databricks cannot run here: its runtime is recognised by this variable alone.
    monkeypatch.delenv("TFOS_MONITOR", raising=False)
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    assert choose_monitor("auto", ip) == "widget"


def test_the_environment_and_the_option_force_a_mode(monkeypatch):
    monkeypatch.setenv("TFOS_MONITOR", "text")
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    assert choose_monitor("auto", None) == "text"
    assert choose_monitor("widget", None) == "widget"
    assert choose_monitor("none", None) == "none"


def test_unknown_modes_are_refused_by_name(monkeypatch):
    with pytest.raises(ConfigError, match="monitor must be one of auto, widget, text, none, got 'fancy'"):
        choose_monitor("fancy", None)
    monkeypatch.setenv("TFOS_MONITOR", "loud")
    with pytest.raises(ConfigError, match="TFOS_MONITOR must be one of auto, widget, text, none, got 'loud'"):
        choose_monitor("auto", None)
