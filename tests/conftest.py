"""Repository-wide pytest options."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.httpfake import serving


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


@pytest.fixture
def http_server() -> Iterator[Callable[[type[BaseHTTPRequestHandler]], str]]:
    """Factory ``http_server(handler) -> base URL``: a loopback fake HTTP server for the test
    (:func:`tests.httpfake.serving`), stopped at its end."""
    with contextlib.ExitStack() as stack:
        yield lambda handler: stack.enter_context(serving(handler))
