"""``reconciler crds print`` and :func:`reconciler.load.crd.all_crds`: the package carries the same
CRDs as the chart's ``crds/`` (``reconciler crds apply`` applies what ``helm install`` installs)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.cli.main import main
from reconciler.load.crd import all_crds

CRDS = Path(__file__).resolve().parents[3] / "charts" / "node-reconciler" / "crds"


def test_the_package_carries_the_charts_crds() -> None:
    chart = {d["metadata"]["name"]: d for p in sorted(CRDS.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())}
    assert {d["metadata"]["name"]: d for d in all_crds()} == chart
    assert len(chart) == 2


def test_crds_print_writes_them_as_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "print"]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out)) == all_crds()


@pytest.mark.parametrize("timeout", ["0", "-1", "x", "3601"])
def test_crds_apply_refuses_a_bad_timeout_before_any_request(timeout: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["crds", "apply", "--timeout", timeout, "--kubeconfig", "/nonexistent"])
    assert e.value.code == 2
    assert "--timeout" in capsys.readouterr().err


def test_crds_apply_with_a_missing_kubeconfig_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds", "apply", "--kubeconfig", "/nonexistent/kubeconfig"]) == 2
    err = capsys.readouterr().err
    assert "/nonexistent/kubeconfig" in err and "Traceback" not in err
