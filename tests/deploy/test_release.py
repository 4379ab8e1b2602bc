"""What ``scripts/release --dry-run`` built (issue 38's release path), checked from its output
directory (``$NODE_RECONCILER_RELEASE``, default dist/release):

* the wheel and the sdist carry this version, and the wheel the CRD the ``crds`` verb applies;
* the multi-platform archive is an image index whose manifests are the amd64 and arm64 archives'
  (each with its platform), and its digest is the one recorded;
* the packaged chart's image reference is ``REPO@<that digest>`` (rendered by ``helm template``),
  at the chart version = the package version;
* each platform's entrypoint runs from its root file system (arm64 under qemu-user-static);
* each SBOM lists the image's Debian and Python packages, node-reconciler itself among them;
* release.json records every file's sha256.

scripts/test makes the output with ``scripts/release --dry-run`` when the release tools are there
(root, mmdebstrap, syft from tests/deploy/build-syft.sh, ``arch-test arm64``) and names it in
``$NODE_RECONCILER_RELEASE``; the release workflow checks its own build with this file. Without an
output the tests are skipped with the reason (also in CI: the release tools are not the test
suite's requirements).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import ROOT, VERSION, helm_binary, unavailable
from tests.deploy.test_image import open_archive, run_in_image

pytestmark = pytest.mark.deploy
ARCHES = ("amd64", "arm64")


@pytest.fixture(scope="module")
def out() -> Path:
    path = Path(os.environ.get("NODE_RECONCILER_RELEASE", ROOT / "dist" / "release"))
    if not (path / "release.json").is_file():
        if "NODE_RECONCILER_RELEASE" in os.environ:  # named, so it was meant to be there
            unavailable(f"no release output in {path}: scripts/release --dry-run did not finish")
        pytest.skip(f"no release output in {path}: run scripts/release --dry-run")
    return path


def archive(out: Path, arch: str) -> Path:
    return out / "image" / f"node-reconciler-{VERSION}{'' if arch == 'amd64' else '-' + arch}.oci.tar"


def _read(tar: tarfile.TarFile, name: str) -> Any:
    f = tar.extractfile(name)
    assert f is not None, name
    return json.loads(f.read())


def index_of(out: Path) -> tuple[str, dict[str, Any]]:
    """(digest, image index) of the multi-platform archive; the blob checked against its digest."""
    with tarfile.open(out / "image" / f"node-reconciler-{VERSION}.multiarch.oci.tar") as tar:
        (top,) = _read(tar, "index.json")["manifests"]
        assert top["mediaType"] == "application/vnd.oci.image.index.v1+json"
        assert top["annotations"]["org.opencontainers.image.ref.name"] == VERSION
        f = tar.extractfile("blobs/sha256/" + top["digest"].removeprefix("sha256:"))
        assert f is not None
        raw = f.read()
        assert "sha256:" + hashlib.sha256(raw).hexdigest() == top["digest"]
        names = set(tar.getnames())
        index = json.loads(raw)
        for m in index["manifests"]:  # every platform's manifest and its blobs are in the archive
            manifest = _read(tar, "blobs/sha256/" + m["digest"].removeprefix("sha256:"))
            for blob in [manifest["config"], *manifest["layers"]]:
                assert "blobs/sha256/" + blob["digest"].removeprefix("sha256:") in names
    return top["digest"], index


def test_the_index_lists_each_platforms_image(out: Path) -> None:
    digest, index = index_of(out)
    assert digest == (out / "image" / f"node-reconciler-{VERSION}.multiarch.oci.tar.digest").read_text().strip()
    platforms = {m["platform"]["architecture"]: m for m in index["manifests"]}
    assert set(platforms) == set(ARCHES), "the release must carry amd64 and arm64 images"
    assert platforms["arm64"]["platform"] == {"architecture": "arm64", "os": "linux", "variant": "v8"}
    for arch in ARCHES:
        recorded = Path(str(archive(out, arch)) + ".digest").read_text().strip()
        assert platforms[arch]["digest"] == recorded


def test_the_charts_default_image_is_the_built_index_by_digest(out: Path, tmp_path: Path) -> None:
    digest, _ = index_of(out)
    package = out / "chart" / f"node-reconciler-{VERSION}.tgz"
    with tarfile.open(package) as tar:
        chart = yaml.safe_load(tar.extractfile("node-reconciler/Chart.yaml").read())  # type: ignore[union-attr]
        values = yaml.safe_load(tar.extractfile("node-reconciler/values.yaml").read())  # type: ignore[union-attr]
    assert chart["version"] == chart["appVersion"] == VERSION
    assert values["image"]["digest"] == digest
    cp = subprocess.run([str(helm_binary()), "template", "nr", str(package), "--kube-version", "1.36.3"],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    (dep,) = [d for d in yaml.safe_load_all(cp.stdout) if d and d["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == f"ghcr.io/nodewright/node-reconciler@{digest}"
    release = json.loads((out / "release.json").read_text())
    assert release["image"] == f"ghcr.io/nodewright/node-reconciler@{digest}"


@pytest.mark.parametrize("arch", ARCHES)
def test_each_platforms_entrypoint_runs(out: Path, arch: str, tmp_path: Path) -> None:
    """arm64 on an amd64 host runs under qemu-user-static (binfmt_misc), as `docker run
    --platform linux/arm64` would."""
    img = open_archive(archive(out, arch), tmp_path)
    assert img.config["architecture"] == arch
    cp = run_in_image(img, ["version", "-o", "json"])
    assert cp.returncode == 0, cp.stderr
    client = json.loads(cp.stdout)["client"]
    assert client["version"] == VERSION
    assert client["platform"] == f"linux/{'x86_64' if arch == 'amd64' else 'aarch64'}"


@pytest.mark.parametrize("arch", ARCHES)
def test_each_sbom_lists_the_debian_and_python_packages(out: Path, arch: str) -> None:
    sbom = json.loads((out / "sbom" / f"node-reconciler-{VERSION}-{arch}.spdx.json").read_text())
    assert sbom["spdxVersion"].startswith("SPDX-2.")
    purls = {ref["referenceLocator"].split("@")[0] for p in sbom["packages"]
             for ref in p.get("externalRefs", []) if ref.get("referenceType") == "purl"}
    for want in ("pkg:deb/debian/python3.11", "pkg:deb/debian/git", "pkg:pypi/kubernetes", "pkg:pypi/pydantic",
                 "pkg:pypi/node-reconciler"):
        assert any(p == want or p.startswith(want + "?") for p in purls), f"{want} not in the {arch} SBOM"


def test_python_dists_and_the_manifest(out: Path) -> None:
    wheel = out / "python" / f"node_reconciler-{VERSION}-py3-none-any.whl"
    assert (out / "python" / f"node_reconciler-{VERSION}.tar.gz").is_file()
    with zipfile.ZipFile(wheel) as z:
        assert "reconciler/load/nodereciperollouts.yaml" in z.namelist()  # `reconciler crds apply` needs it
    release = json.loads((out / "release.json").read_text())
    assert release["version"] == VERSION
    for name, digest in release["files"].items():
        assert digest == "sha256:" + hashlib.sha256((out / name).read_bytes()).hexdigest(), name
    assert {f"python/{wheel.name}", f"chart/node-reconciler-{VERSION}.tgz"} <= set(release["files"])
