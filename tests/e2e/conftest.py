"""Fixtures for the end-to-end tests: one real control plane per session (tests/controlplane).

Requested with ``pytest --e2e`` or ``RECONCILER_E2E=1``. When requested, missing binaries or a
control plane that does not start make every e2e test fail with the reason; when not requested,
they are skipped with a reason naming the option and whether the binaries are present.

Fixtures:

* ``controlplane`` (session): a started :class:`tests.controlplane.cluster.ControlPlane` with 12 kwok
  nodes ``e2e-node-00``..``e2e-node-11`` (label ``e2e.test/pool: shared``) and a running
  :class:`RebootEmulator` (``controlplane_reboots``). Stopped at the end of the session, also when
  tests fail.
* ``api`` (session): an admin ``kubernetes.client.ApiClient``.
* ``test_id`` (function): a short unique DNS-safe id for the test (namespace and node names).
* ``namespace`` (function): a fresh namespace ``<test_id>``, deleted afterwards.
* ``make_nodes`` (function): ``make_nodes(n) -> [names]`` creates Ready kwok nodes
  ``<test_id>-n<i>`` labelled ``e2e.test/group=<test_id>``; deleted afterwards.
* ``kube`` (function): a :class:`reconciler.adapters.kube.cluster.KubeCluster` on the admin kubeconfig
  whose stage namespace is ``<test_id>-stages`` (so stage pods of different tests never mix).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.controlplane.cluster import (
    ControlPlane,
    ControlPlaneError,
    RebootEmulator,
    binaries_dir,
    missing_binaries,
)

E2E_DIR = os.path.dirname(__file__)
SHARED_NODES = 12


def _requested(config: pytest.Config) -> bool:
    return bool(config.getoption("--e2e", default=False)) or os.environ.get("RECONCILER_E2E") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of this directory ``e2e``; skip them (with the reason) unless requested.
    The simulated-fleet side of a conformance test (marker ``simulated``) is neither: it runs in
    every test run, so the default suite holds the table it shares with the real side."""
    missing = missing_binaries()
    state = "present" if not missing else f"missing ({', '.join(missing)}; run tests/controlplane/build.sh)"
    skip = pytest.mark.skip(reason=f"e2e skipped: run with --e2e; binaries: {binaries_dir()} {state}")
    for item in items:
        if str(item.path).startswith(E2E_DIR) and item.get_closest_marker("simulated") is None:
            item.add_marker(pytest.mark.e2e)
            if not _requested(config):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def controlplane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """The session's control plane (see module docstring). Fails (never skips) when requested
    and it cannot start."""
    if not _requested(request.config):
        pytest.skip("e2e skipped: run with --e2e")
    missing = missing_binaries()
    if missing:
        pytest.fail(
            f"e2e requested but control-plane binaries are missing in {binaries_dir()}: {', '.join(missing)} "
            "(build them with tests/controlplane/build.sh)",
            pytrace=False,
        )
    cp = ControlPlane(keep=os.environ.get("RECONCILER_E2E_KEEP") == "1")
    try:
        cp.start()
    except ControlPlaneError as e:
        pytest.fail(f"e2e requested but the control plane did not start: {e}", pytrace=False)
    try:
        cp.create_nodes([f"e2e-node-{i:02d}" for i in range(SHARED_NODES)], labels={"e2e.test/pool": "shared"})
        print(f"\ncontrol plane started in {cp.start_seconds:.1f} s; logs in {cp.logs}")
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def controlplane_reboots(controlplane: ControlPlane) -> Iterator[RebootEmulator]:
    """The reboot emulator of the session (see RebootEmulator); ``.reboots`` lists handled pods."""
    emu = RebootEmulator(controlplane).start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture(scope="session")
def api(controlplane: ControlPlane) -> Iterator[Any]:
    """Admin ``kubernetes.client.ApiClient`` (group system:masters)."""
    with controlplane.api_client() as a:
        yield a


@pytest.fixture
def test_id(request: pytest.FixtureRequest) -> str:
    """Short unique DNS-1123 id of the running test, e.g. ``evict-pdb-allows-1-3fa2``."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_")).strip("-")
    return f"{name[:40].strip('-')}-{secrets.token_hex(2)}"


@pytest.fixture
def namespace(api: Any, test_id: str) -> Iterator[str]:
    """A fresh namespace for the test, deleted afterwards (not waited for)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": test_id}})
    try:
        yield test_id
    finally:
        with contextlib.suppress(Exception):
            core.delete_namespace(test_id)


@pytest.fixture
def make_nodes(controlplane: ControlPlane, api: Any, test_id: str) -> Iterator[Callable[..., list[str]]]:
    """Factory: ``make_nodes(n, labels=None)`` creates ``n`` Ready kwok nodes of this test."""
    from kubernetes import client

    created: list[str] = []

    def make(n: int, labels: dict[str, str] | None = None) -> list[str]:
        names = [f"{test_id}-n{len(created) + i}" for i in range(n)]
        controlplane.create_nodes(names, labels={"e2e.test/group": test_id, **(labels or {})})
        created.extend(names)
        return names

    try:
        yield make
    finally:
        core = client.CoreV1Api(api)
        for n in created:
            with contextlib.suppress(Exception):
                core.delete_node(n)


@pytest.fixture
def kube(controlplane: ControlPlane, api: Any, test_id: str) -> Iterator[Any]:
    """KubeCluster (admin kubeconfig) with its own stage namespace ``<test_id>-stages``."""
    from kubernetes import client

    from reconciler.adapters.kube.cache import WatchStore
    from reconciler.adapters.kube.cluster import KubeCluster

    ns = f"{test_id}-stages"
    kc = KubeCluster.from_kubeconfig(str(controlplane.kubeconfig), namespace=ns, store=WatchStore(ns))
    try:
        yield kc
    finally:
        kc.close()
        with contextlib.suppress(Exception):
            client.CoreV1Api(api).delete_namespace(ns)
