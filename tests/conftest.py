"""Repository-wide pytest options."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--e2e``: run tests/e2e against a real control plane (tests/controlplane); when requested
    and the binaries are missing or the cluster cannot start, those tests fail instead of skipping.
    ``RECONCILER_E2E=1`` in the environment does the same."""
    parser.addoption(
        "--e2e",
        action="store_true",
        default=False,
        help="run the end-to-end tests against a real Kubernetes control plane (fail if it cannot start)",
    )
