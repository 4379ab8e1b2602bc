"""The image built by scripts/build-image: the OCI archive is well formed (every blob matches its
digest, the recorded digest is the manifest's, the layers' diff ids match), and its entrypoint
runs from the unpacked root file system as the non-root user, with the root file system
read-only (as the chart and examples run it: readOnlyRootFilesystem, /tmp an emptyDir).

Needs the archive (scripts/test builds it when mmdebstrap is installed) and root for chroot
and mounts in a private mount namespace (unshare). Skipped with the reason otherwise; failed
instead in CI (see tests/deploy/conftest.py).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import IMAGE_CACHE, ROOT, VERSION, unavailable

pytestmark = pytest.mark.deploy
UID = 65532


def archive_path() -> Path:
    """``$NODE_RECONCILER_IMAGE`` or the default output of scripts/build-image."""
    env = os.environ.get("NODE_RECONCILER_IMAGE")
    return Path(env) if env else IMAGE_CACHE / "out" / f"node-reconciler-{VERSION}.oci.tar"


@dataclass
class Image:
    archive: Path
    index: dict[str, Any]
    manifest_digest: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    blob_sizes: dict[str, int]
    rootfs: Path


def _sha256(f: Any) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    while chunk := f.read(1 << 20):
        h.update(chunk)
        n += len(chunk)
    return "sha256:" + h.hexdigest(), n


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    """The archive opened, every blob checked against its name, the layers unpacked in order."""
    path = archive_path()
    if not path.is_file():
        unavailable(f"no image archive at {path}: build it with scripts/build-image (needs mmdebstrap, root)")
    yield open_archive(path, tmp_path_factory.mktemp("image"))


def open_archive(path: Path, work: Path) -> Image:
    """The single-image OCI archive ``path`` unpacked under ``work``: every blob checked against its
    name, the layers unpacked in order into ``work/rootfs``."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("chroot"):
        unavailable("running the image's root file system needs root, unshare and chroot")
    blobs = work / "blobs"
    with tarfile.open(path) as tar:
        tar.extractall(blobs, filter="data")
    sizes = {}
    for blob in (blobs / "blobs" / "sha256").iterdir():
        with blob.open("rb") as f:
            digest, size = _sha256(f)
        assert digest == f"sha256:{blob.name}", f"blob {blob.name} does not match its digest"
        sizes[digest] = size
    assert json.loads((blobs / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((blobs / "index.json").read_text())

    def blob(digest: str) -> Path:
        return blobs / "blobs" / "sha256" / digest.removeprefix("sha256:")

    (desc,) = index["manifests"]
    manifest = json.loads(blob(desc["digest"]).read_text())
    config = json.loads(blob(manifest["config"]["digest"]).read_text())
    rootfs = work / "rootfs"
    rootfs.mkdir()
    for layer in manifest["layers"]:
        with gzip.open(blob(layer["digest"])) as gz, tarfile.open(fileobj=gz, mode="r|") as tar:
            # "tar" filter: no absolute or escaping paths; owners kept (we are root)
            tar.extractall(rootfs, filter="tar", numeric_owner=True)
    return Image(path, index, desc["digest"], manifest, config, sizes, rootfs)


def run_in_image(img: Image, args: list[str], *, entrypoint: list[str] | None = None,
                 files: dict[str, Path] | None = None, env: dict[str, str] | None = None,
                 mounts: dict[str, Path] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the image's entrypoint (or ``entrypoint``) with ``args`` the way a container runtime
    would: its Env (plus ``env``, as a pod spec adds) only, its WorkingDir, its User, in a private
    mount namespace where the root file system is read-only and /tmp, /dev (null, zero, random,
    urandom) and /proc are mounted; the host network (an API server on the loopback is reached).
    ``files``: copied into /tmp (name → host path) before the start. ``mounts``: host directories
    bound read-only at paths of the image (symlinks such as /var/run → /run resolved inside the
    image, as a runtime does), like a pod's volumes."""
    cfg = img.config["config"]
    user = cfg["User"]
    r = shlex.quote(str(img.rootfs))
    copies = " ".join(f"cp -r {shlex.quote(str(src))} {r}/tmp/{shlex.quote(name)};"
                      for name, src in (files or {}).items())
    binds = " ".join(
        f"d=$(chroot {r} /usr/bin/realpath -m {shlex.quote(at)}); mkdir -p {r}$d;"
        f" mount --bind {shlex.quote(str(src))} {r}$d; mount -o remount,bind,ro {r}$d;"
        for at, src in (mounts or {}).items())
    environ = [*cfg["Env"], *(f"{k}={v}" for k, v in (env or {}).items())]
    argv = [*(entrypoint or cfg["Entrypoint"]), *args]
    inner = (
        f"mount --bind {r} {r}; mount -t tmpfs -o mode=1777 tmpfs {r}/tmp; {copies}"
        f" chown -R {user} {r}/tmp/*  2>/dev/null || true;"
        f" mount -t tmpfs -o mode=755 tmpfs {r}/dev;"
        f" for d in null zero random urandom; do touch {r}/dev/$d; mount --bind /dev/$d {r}/dev/$d; done;"
        f" mount -t proc proc {r}/proc; {binds} mount -o remount,bind,ro {r};"
        f" exec chroot --userspec={user} {r} /usr/bin/env -i {' '.join(shlex.quote(e) for e in environ)}"
        f" /bin/sh -c 'cd \"$0\" && exec \"$@\"' {shlex.quote(cfg['WorkingDir'])}"
        f" {' '.join(shlex.quote(a) for a in argv)}"
    )
    return subprocess.run(["unshare", "--mount", "--fork", "sh", "-ec", inner],
                          capture_output=True, text=True, timeout=180)


def test_recorded_digest_is_the_manifest_digest(image: Image) -> None:
    recorded = Path(str(image.archive) + ".digest").read_text().strip()
    assert recorded == image.manifest_digest
    assert image.index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"] == VERSION
    assert image.index["manifests"][0]["platform"] == {"architecture": "amd64", "os": "linux"}
    build = json.loads((image.archive.parent / f"node-reconciler-{VERSION}.build.json").read_text())
    assert build["digest"] == recorded


def test_the_image_is_built_from_this_commit(image: Image) -> None:
    """The archive under test holds this checkout's code (scripts/test rebuilds it every run), not
    an image left in the cache by an older commit."""
    build = json.loads((image.archive.parent / f"node-reconciler-{VERSION}.build.json").read_text())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    assert build["revision"] == head.stdout.strip(), "the image is stale: rebuild it with scripts/build-image"


def test_layers_match_their_diff_ids_and_descriptors(image: Image) -> None:
    blobs = image.rootfs.parent / "blobs" / "blobs" / "sha256"
    assert image.manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    diff_ids = []
    for layer in image.manifest["layers"]:
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
        assert image.blob_sizes[layer["digest"]] == layer["size"]
        with gzip.open(blobs / layer["digest"].removeprefix("sha256:")) as gz:
            diff_ids.append(_sha256(gz)[0])
    assert image.config["rootfs"] == {"type": "layers", "diff_ids": diff_ids}
    assert image.blob_sizes[image.manifest["config"]["digest"]] == image.manifest["config"]["size"]


def test_config_is_non_root_with_the_reconciler_entrypoint(image: Image) -> None:
    cfg = image.config["config"]
    assert cfg["User"] == f"{UID}:{UID}"
    assert cfg["Entrypoint"] == ["reconciler"]
    assert cfg["Labels"]["org.opencontainers.image.version"] == VERSION
    assert cfg["Labels"]["org.opencontainers.image.licenses"] == "Apache-2.0"
    passwd = (image.rootfs / "etc" / "passwd").read_text().splitlines()
    assert f"reconciler:x:{UID}:{UID}:node-reconciler:/home/reconciler:/bin/sh" in passwd


def test_nothing_outside_home_belongs_to_the_user(image: Image) -> None:
    owned = [str(p.relative_to(image.rootfs)) for p in image.rootfs.rglob("*")
             if not p.is_symlink() and p.lstat().st_uid == UID]
    assert owned == ["home/reconciler"]


def test_entrypoint_prints_the_version_as_the_non_root_user(image: Image) -> None:
    cp = run_in_image(image, ["version", "-o", "json"])
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    assert doc["client"]["version"] == VERSION
    assert doc["client"]["python"].startswith("3.11.")
    assert "server" not in doc


def test_sh_and_git_are_present_and_the_user_is_not_root(image: Image) -> None:
    cp = run_in_image(image, ["-c", "id -u; id -g; git --version; test -s /etc/ssl/certs/ca-certificates.crt && "
                                    "echo ca-ok; touch /usr/x 2>/dev/null || echo read-only; pwd"],
                      entrypoint=["/bin/sh"])
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[:2] == [str(UID), str(UID)]
    assert lines[2].startswith("git version ")
    assert lines[3:] == ["ca-ok", "read-only", "/home/reconciler"]


def test_the_image_validates_and_plans_the_example_recipes(image: Image) -> None:
    """Every dependency imports: validate and plan against the simulated fleet inside the image."""
    files = {"recipes": ROOT / "recipes", "policies": ROOT / "policies",
             "fleet.yaml": ROOT / "examples" / "fleets" / "gpu-24.yaml"}
    cp = run_in_image(image, ["validate", "/tmp/recipes", "--policy", "/tmp/policies"], files=files)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = run_in_image(image, ["plan", "/tmp/recipes", "--policy", "/tmp/policies", "--cluster", "sim:/tmp/fleet.yaml",
                              "-o", "json"], files=files)
    assert cp.returncode == 0, cp.stderr[-2000:]
    plans = json.loads(cp.stdout)
    assert plans, "no plan printed"
