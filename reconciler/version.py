"""The version of the installed node-reconciler distribution, read from its package metadata
(``importlib.metadata``), so the CLI, the image label and the chart's ``appVersion`` check all
see the one number written in ``pyproject.toml``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "node-reconciler"
UNKNOWN = "0+unknown"


def package_version() -> str:
    """The installed distribution's version (PEP 440 text, e.g. ``"0.1.0"``); :data:`UNKNOWN`
    when the code runs from a source tree that was never installed (no metadata to read)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN


__version__ = package_version()
