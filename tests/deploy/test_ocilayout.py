"""image/ocilayout.py, the daemonless OCI writer of scripts/build-image, on a small tree: layer
contents (owners, modes, symlinks, hard links, excluded mount points, no device nodes), digests,
determinism under SOURCE_DATE_EPOCH, and the layout (index → manifest → config → layers)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import json
import os
import tarfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.deploy.conftest import ROOT


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ocilayout", ROOT / "image" / "ocilayout.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


oci = _module()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_text("#!/bin/sh\necho hi\n")
    (root / "usr" / "bin" / "tool").chmod(0o755)
    os.link(root / "usr" / "bin" / "tool", root / "usr" / "bin" / "tool-alias")
    (root / "bin").symlink_to("usr/bin")
    (root / "proc" / "self").mkdir(parents=True)  # excluded: kept empty as a mount point
    (root / "proc" / "self" / "x").write_text("x")
    os.mkfifo(root / "fifo")
    return root


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_layer_contents_and_digests(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = tmp_path / "layer.tar.gz"
    blob, diff, size = oci.write_layer(tree, out, ["proc"])
    raw = out.read_bytes()
    assert blob == _sha(raw) and size == len(raw)
    plain = gzip.decompress(raw)
    assert diff == _sha(plain)
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    # sorted; the FIFO left out; proc kept (a mount point) without its contents
    assert list(members) == ["bin", "proc", "usr", "usr/bin", "usr/bin/tool", "usr/bin/tool-alias"]
    assert members["bin"].issym() and members["bin"].linkname == "usr/bin"
    assert members["usr/bin/tool"].isfile() and members["usr/bin/tool"].mode == 0o755
    assert members["usr/bin/tool-alias"].islnk() and members["usr/bin/tool-alias"].linkname == "usr/bin/tool"
    assert all(m.mtime <= 1700000000 for m in members.values())
    assert all(m.uname == "" and m.gname == "" for m in members.values())


def test_layers_are_reproducible(tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    a = oci.write_layer(tree, tmp_path / "a.tar.gz")
    os.utime(tree / "usr" / "bin" / "tool", (1800000000, 1800000000))  # newer than the epoch: clamped
    b = oci.write_layer(tree, tmp_path / "b.tar.gz")
    assert a == b


def test_image_layout_links_index_manifest_config_and_layers(tree: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    layer = tmp_path / "l.tar.gz"
    _, diff, _ = oci.write_layer(tree, layer)
    cfg = {"architecture": "amd64", "os": "linux", "config": {"User": "65532:65532", "Entrypoint": ["tool"]}}
    archive = tmp_path / "img.oci.tar"
    digest = oci.write_image([(layer, diff)], cfg, "1.2.3", archive, {"org.opencontainers.image.version": "1.2.3"})
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert _sha(data) == "sha256:" + name.rsplit("/", 1)[1]
    (desc,) = json.loads(files["index.json"])["manifests"]
    assert desc["digest"] == digest and desc["annotations"]["org.opencontainers.image.ref.name"] == "1.2.3"
    manifest = json.loads(files["blobs/sha256/" + digest[7:]])
    assert manifest["annotations"] == {"org.opencontainers.image.version": "1.2.3"}
    config = json.loads(files["blobs/sha256/" + manifest["config"]["digest"][7:]])
    assert config["rootfs"] == {"type": "layers", "diff_ids": [diff]}
    assert config["config"]["User"] == "65532:65532"
    assert manifest["layers"][0]["digest"] == _sha(layer.read_bytes())
    assert oci.write_image([(layer, diff)], cfg, "1.2.3", tmp_path / "again.tar",
                           {"org.opencontainers.image.version": "1.2.3"}) == digest


def test_index_joins_platform_images_under_one_digest(tree: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`ocilayout.py index`: one image index listing each archive's manifest with its platform
    (arm64 with its variant), every blob of both once, index.json naming the index by ``ref``."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    layer = tmp_path / "l.tar.gz"
    _, diff, _ = oci.write_layer(tree, layer)
    digests = {}
    for arch, extra in (("amd64", {}), ("arm64", {"variant": "v8"})):
        cfg = {"architecture": arch, "os": "linux", **extra, "config": {"Entrypoint": ["tool"]}}
        digests[arch] = oci.write_image([(layer, diff)], cfg, "1.2.3", tmp_path / f"{arch}.tar")
    out = tmp_path / "multi.tar"
    digest = oci.write_index([tmp_path / "amd64.tar", tmp_path / "arm64.tar"], "1.2.3", out)
    with tarfile.open(out) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert _sha(data) == "sha256:" + name.rsplit("/", 1)[1]
    (top,) = json.loads(files["index.json"])["manifests"]
    assert top["digest"] == digest and top["mediaType"] == oci.INDEX
    assert top["annotations"]["org.opencontainers.image.ref.name"] == "1.2.3"
    index = json.loads(files["blobs/sha256/" + digest[7:]])
    assert [(m["digest"], m["platform"]) for m in index["manifests"]] == [
        (digests["amd64"], {"architecture": "amd64", "os": "linux"}),
        (digests["arm64"], {"architecture": "arm64", "os": "linux", "variant": "v8"})]
    layers = [n for n in files if n == "blobs/sha256/" + _sha(layer.read_bytes())[7:]]
    assert len(layers) == 1  # the shared layer once
    with pytest.raises(ValueError, match="two archives of one platform"):
        oci.write_index([tmp_path / "amd64.tar", tmp_path / "amd64.tar"], "1.2.3", tmp_path / "bad.tar")
    with pytest.raises(ValueError, match="not a single-platform image archive"):
        oci.write_index([out], "1.2.3", tmp_path / "bad.tar")
