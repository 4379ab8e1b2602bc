"""``--as``/``--as-group`` (kubectl's user impersonation, issue 38) on the real API server with
RBAC: the admin kubeconfig acting as a user with no grant is refused (exit 4, the user named by the
server), and acting as a member of ``system:masters`` is allowed."""

from __future__ import annotations

import pytest

from reconciler.cli.main import main
from tests.controlplane.cluster import ControlPlane


def test_as_acts_as_the_user_on_every_request(controlplane: ControlPlane, capsys: pytest.CaptureFixture[str]) -> None:
    kc = str(controlplane.kubeconfig)
    assert main(["status", "--kubeconfig", kc, "-o", "json"]) == 0
    capsys.readouterr()
    assert main(["status", "--kubeconfig", kc, "--as", "e2e-nobody", "-o", "json"]) == 4
    err = capsys.readouterr().err
    assert "403" in err or "forbidden" in err.lower(), err
    assert "e2e-nobody" in err, err
    assert main(["status", "--kubeconfig", kc, "--as", "e2e-nobody", "--as-group", "system:masters", "-o", "json"]) == 0
    assert main(["version", "--kubeconfig", kc, "--as", "e2e-nobody"]) == 0  # /version is public to every user


def test_as_on_the_simulated_fleet_or_a_group_alone_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--cluster", "sim:examples/fleets/gpu-24.yaml", "--as", "x"]) == 2
    assert "--as" in capsys.readouterr().err
    assert main(["version", "--kubeconfig", "/nonexistent", "--as-group", "g"]) == 2
    assert "--as-group needs --as" in capsys.readouterr().err
