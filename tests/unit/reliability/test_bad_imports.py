"""``reconciler import`` of hostile Skyhook/NodeWright records (issue 36): a package entry no
recipe could hold — a name or version with control characters, ``not-semver``, an image that is no
repository or carries ``user:token@`` — is never copied into our records (the next plan would
uninstall it): the node says which entry and field, nothing of it is written, the other nodes are
imported, and the exit code is 1. No view, ``--dry-run``, table or ``-o json``, prints a secret.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.cli.main import main
from reconciler.model.nodestate import state_key
from reconciler.testing.fleetgen import make_node, write_fleet

NAME = "gpu-setup"
OLD = f"skyhook.nvidia.com/nodeState_{NAME}"
SECRET = "S3cr3tT0kenXyz"
SHA = "sha256:" + "d" * 64

#: case → (fields of the entry that differ from a good one, the field named, a piece of the message)
BAD_ENTRIES: dict[str, tuple[dict[str, Any], str, str]] = {
    "name-escape": ({"name": "tune\x1b[31m"}, "name", "must match"),
    "name-newline": ({"name": "tune\nok"}, "name", "must match"),
    "name-nul": ({"name": "tu\x00ne"}, "name", "must match"),
    "name-del": ({"name": "tune\x7f"}, "name", "must match"),
    "name-bidi": ({"name": "tu\u202ene"}, "name", "must match"),
    "name-upper": ({"name": "Tune"}, "name", "must match"),
    "name-one-letter": ({"name": "t"}, "name", "must match"),
    "name-empty": ({"name": ""}, "name", "must match"),
    "name-too-long": ({"name": "t" * 44}, "name", "must match"),
    "name-pipe": ({"name": "tu|ne"}, "name", "must match"),
    "name-digit-end": ({"name": "tune2"}, "name", "must match"),
    "name-space": ({"name": "tu ne"}, "name", "must match"),
    "name-slash": ({"name": "../tune"}, "name", "must match"),
    "version-word": ({"version": "not-semver"}, "version", "is not a semantic version"),
    "version-four-parts": ({"version": "1.2.3.4"}, "version", "is not a semantic version"),
    "version-leading-zero": ({"version": "01.0.0"}, "version", "is not a semantic version"),
    "version-empty": ({"version": ""}, "version", "is not a semantic version"),
    "version-space": ({"version": " 1.0.0"}, "version", "is not a semantic version"),
    "version-newline": ({"version": "1.0.0\n"}, "version", "is not a semantic version"),
    "version-escape": ({"version": "1.0.0\x1b[2J"}, "version", "is not a semantic version"),
    "version-too-long": ({"version": "1.0.0-" + "a" * 130}, "version", "is not a semantic version"),
    "version-latest": ({"version": "latest"}, "version", "is not a semantic version"),
    "image-user-token": ({"image": f"robot:{SECRET}@ghcr.io/acme/tune"}, "image", "not a valid image repository"),
    "image-url-token": ({"image": f"https://robot:{SECRET}@ghcr.io/acme/tune"}, "image",
                        "not a valid image repository"),
    "image-bare-token": ({"image": f"{SECRET}@ghcr.io/acme/tune"}, "image", "not a valid image repository"),
    "image-port-token": ({"image": f"u:{SECRET}@registry.local:5000/tune"}, "image",
                         "not a valid image repository"),
    "image-query-token": ({"image": f"https://ghcr.io/acme/tune?token={SECRET}"}, "image",
                          "not a valid image repository"),
    "image-upper": ({"image": "ghcr.io/Acme/tune"}, "image", "not a valid image repository"),
    "image-space": ({"image": "ghcr.io/acme/tu ne"}, "image", "not a valid image repository"),
    "image-newline": ({"image": "ghcr.io/acme/tune\n"}, "image", "not a valid image repository"),
    "image-escape": ({"image": "ghcr.io/acme/\x1b]0;x\x07tune"}, "image", "not a valid image repository"),
    "image-tag": ({"image": "ghcr.io/acme/tune:2.0.0"}, "image", "not a valid image repository"),
    "image-too-long": ({"image": "ghcr.io/" + "a" * 300}, "image", "not a valid image repository"),
    "sha-short": ({"containerSHA": "sha256:abc"}, "containerSHA", "is not sha256:"),
    "sha-upper": ({"containerSHA": "sha256:" + "D" * 64}, "containerSHA", "is not sha256:"),
    "sha-newline": ({"containerSHA": SHA + "\n"}, "containerSHA", "is not sha256:"),
}


def _entry(**changes: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"name": "tune", "version": "2.0.0", "image": "ghcr.io/acme/tune", "containerSHA": SHA,
                         "stage": "config", "state": "complete"}
    e.update(changes)
    return e


def _state(*entries: dict[str, Any]) -> str:
    return json.dumps({f"{e['name']}|{e['version']}": e for e in entries})


@pytest.mark.parametrize("case", sorted(BAD_ENTRIES))
def test_bad_entry_is_not_imported(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes, field, piece = BAD_ENTRIES[case]
    good = _state(_entry(name="base", version="1.0.0", image="ghcr.io/acme/base"))
    bad = _state(_entry(name="base", version="1.0.0", image="ghcr.io/acme/base"), _entry(**changes))
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node("n0", {"pool": "gpu"}, annotations={OLD: good}),
                        make_node("n1", {"pool": "gpu"}, annotations={OLD: bad})])
    before = fleet.read_bytes()
    views = {}
    for view in (("--dry-run",), ("--dry-run", "-o", "json")):
        rc = main(["import", "--from", "skyhook", "--name", NAME, "--cluster", f"sim:{fleet}", *view])
        out, err = capsys.readouterr()
        views[view] = out + err
        assert rc == 1, out + err
    assert fleet.read_bytes() == before  # a dry run writes nothing

    doc = json.loads(views[("--dry-run", "-o", "json")])
    n0, n1 = sorted(doc["nodes"], key=lambda n: n["node"])
    assert n0["error"] == "" and n0["patch"] is not None
    assert n1["patch"] is None and n1["packages"] == {}
    assert n1["error"].startswith(f"{OLD}: entry ") and f": {field}: " in n1["error"] and piece in n1["error"]
    assert n1["error"].endswith("; nothing of this node is imported")
    assert f"n1: NOT imported: {OLD}: entry " in views[("--dry-run",)]

    rc = main(["import", "--from", "skyhook", "--name", NAME, "--cluster", f"sim:{fleet}", "-y"])
    out, err = capsys.readouterr()
    views[("-y",)] = out + err
    assert rc == 1 and "written: 1 node(s)" in out
    saved = fleet.read_text(encoding="utf-8")
    ours = [line for line in saved.splitlines() if state_key(NAME) in line]
    assert len(ours) == 1 and "base|1.0.0" in ours[0]  # n0 imported; n1's entries copied nowhere
    for text in views.values():
        assert SECRET not in text
        assert not any(c in text for c in "\x1b\x00\x7f\u202e\x07"), text


def test_good_entries_import_with_shorthand_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What NodeWright accepts (``v`` prefix, ``X.Y`` shorthand, pre-releases, no image) still imports."""
    state = _state(_entry(name="base", version="v1.0.0"), _entry(name="tune", version="2.1"),
                   _entry(name="agent", version="3.0.0-rc.1+build.5", image="", containerSHA=None))
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node("n0", {"pool": "gpu"}, annotations={OLD: state})])
    rc = main(["import", "--from", "skyhook", "--name", NAME, "--cluster", f"sim:{fleet}", "-y", "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["written"] == 1
    assert sorted(doc["nodes"][0]["packages"]) == ["agent|3.0.0-rc.1+build.5", "base|v1.0.0", "tune|2.1"]


def test_old_status_with_a_secret_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A status value that is none of ours is named in a note, masked."""
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node("n0", {"pool": "gpu"}, annotations={
        OLD: _state(_entry()), f"skyhook.nvidia.com/status_{NAME}": f"token={SECRET}"})])
    for view in ((), ("-o", "json")):
        rc = main(["import", "--from", "skyhook", "--name", NAME, "--cluster", f"sim:{fleet}", "--dry-run", *view])
        out, err = capsys.readouterr()
        assert rc == 0 and "token=***" in out and SECRET not in out + err
