"""A kubeconfig is an input: a malformed one is bad input (exit 2) at its file:line:column,
without a traceback and without any of its values (reconciler/load/kubeconfigfile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli.main import main

SECRET = "SUPERSECRETTOKEN-abc123XYZ"
GOOD = f"""\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:1", certificate-authority-data: aGVsbG8=}}
contexts:
- {{name: x, context: {{cluster: c, user: u}}}}
current-context: x
users:
- {{name: u, user: {{token: {SECRET}}}}}
"""


@pytest.mark.parametrize(("text", "where", "message"), [
    (GOOD.replace(f"token: {SECRET}}}}}", f'token: "{SECRET}\n'), ":", "YAML syntax error"),
    (GOOD.replace(f"token: {SECRET}", f"token: !!python/object/apply:os.system [{SECRET}]"), ":10:", "not allowed"),
    ("- a\n- b\n", ":1:1:", "a kubeconfig is a mapping"),
    (GOOD.replace("aGVsbG8=", "not-base64!!"), ":5:", "certificate-authority-data: is not base64 data"),
    (GOOD.replace("current-context: x", "current-context: nope"), ":8:", "names context 'nope'"),
    (GOOD.replace("user: u}", "user: ghost}"), ":7:", "names user 'ghost'"),
    (GOOD.replace("clusters:\n- name: c\n", "clusters:\n- 3\n- name: c\n"), ":4:", "clusters[0]: must be a mapping"),
    (GOOD.replace("users:\n", "users: {}\nx:\n"), ":9:", "users: must be a list"),
    (GOOD + "users: []\n", ":11:", "duplicate key"),
    ("", ":1:1:", "kubeconfig is empty"),
])
def test_a_malformed_kubeconfig_is_bad_input_at_its_line(text: str, where: str, message: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(text)
    root = Path(__file__).resolve().parents[3]
    rc = main(["plan", str(root / "recipes" / "gpu-training-tuning.yaml"), "--kubeconfig", str(kc)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"{kc}{where}" in err and message in err, err
    assert SECRET not in err and "Traceback" not in err


def test_an_unknown_context_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(GOOD)
    root = Path(__file__).resolve().parents[3]
    rc = main(["plan", str(root / "recipes" / "gpu-training-tuning.yaml"), "--kubeconfig", str(kc),
               "--context", "prod"])
    err = capsys.readouterr().err
    assert rc == 2 and "--context 'prod': no such context (it has: x)" in err


def test_a_well_formed_kubeconfig_reaches_the_client(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing here refuses what the client takes: the good file goes on to connect (refused: 4),
    base64 broken over lines included."""
    kc = tmp_path / "kubeconfig"
    kc.write_text(GOOD.replace("certificate-authority-data: aGVsbG8=", 'certificate-authority-data: "aGVs\n    bG8="'))
    root = Path(__file__).resolve().parents[3]
    rc = main(["plan", str(root / "recipes" / "gpu-training-tuning.yaml"), "--kubeconfig", str(kc),
               "--request-timeout", "2s"])
    err = capsys.readouterr().err
    assert rc == 4 and "cannot reach" in err and SECRET not in err


def test_the_library_entry_point_never_raises_the_yaml_error_nor_quotes_the_line(tmp_path: Path) -> None:
    from reconciler.adapters.kube.cluster import KubeCluster
    from reconciler.errors import ClusterError

    kc = tmp_path / "kubeconfig"
    kc.write_text(GOOD.replace(f"token: {SECRET}}}}}", f'token: "{SECRET}\n'))
    with pytest.raises(ClusterError) as e:
        KubeCluster.from_kubeconfig(str(kc))
    assert "YAML error" in str(e.value) and SECRET not in str(e.value)
