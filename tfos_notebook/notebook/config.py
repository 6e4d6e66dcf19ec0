"""``%tfos_config``: the kernel's settings, each an environment variable that the magics and
``Run`` read when a run starts (so a setting made here and one exported before the kernel
started are the same thing)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import ConfigError
from ..tracking.settings import ENV_VALUES as MLFLOW_VALUES
from ..tracking.settings import MLFLOW_ENV
from .frontend import MONITOR_ENV, MONITOR_MODES


@dataclass(frozen=True)
class Setting:
    env: str
    values: tuple[str, ...]
    default: str
    meaning: str


SETTINGS = {
    "mlflow": Setting(MLFLOW_ENV, MLFLOW_VALUES, "auto",
                      "log each run as one MLflow run (auto: on Databricks, where MLflow autologging is the default)"),
    "monitor": Setting(MONITOR_ENV, MONITOR_MODES, "auto",
                       "how %%tfos_train shows a run (auto: a widget where the frontend renders one, else text)"),
}


def config_text() -> str:
    """One line per setting: name, value (and where it comes from), the values it takes, its meaning."""
    lines = []
    for name, s in SETTINGS.items():
        value = os.environ.get(s.env)
        shown = f"{value} ({s.env})" if value else f"{s.default} (default)"
        lines.append(f"{name:<8} {shown:<24} {'|'.join(s.values):<24} {s.meaning}")
    return "\n".join(lines)


def set_config(name: str, value: str) -> str:
    """Set ``name`` to ``value`` for the runs this kernel starts from now on; returns a line saying so.

    Raises:
        ConfigError: an unknown setting or value (the message lists the known ones).
    """
    setting = SETTINGS.get(name)
    if setting is None:
        raise ConfigError(f"no setting {name!r}: the settings are {', '.join(SETTINGS)}")
    value = value.strip().lower()
    if value not in setting.values:
        raise ConfigError(f"{name} takes {', '.join(setting.values)}, not {value!r}")
    os.environ[setting.env] = value
    return f"[tfos] {name} = {value} for the runs this kernel starts ({setting.env}={value})"
