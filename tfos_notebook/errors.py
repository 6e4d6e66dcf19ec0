"""The root of the errors a user can meet: ``TFOSError`` and ``ConfigError``, which every layer
raises. Imports nothing, so that the state files and the Jupyter server extension can raise and
catch them without loading the runtime (``runtime/driver/errors.py`` holds the runtime's own errors)."""

from __future__ import annotations


class TFOSError(Exception):
    """Base class of every error tfos_notebook raises on purpose."""


class ConfigError(TFOSError, ValueError):
    """Something impossible was asked for (bad counts, an unknown role or run, a bad option)."""


class UnsupportedVersion(TFOSError, ImportError):
    """A package this one needs is missing or older than the oldest release it supports; the
    message names the version found, the floor and the fix."""
