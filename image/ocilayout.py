"""Write an OCI image (image-spec v1.1) without a daemon: layers from directories, the image
config, the manifest and the index, packed as an OCI layout tar archive (``oci-archive:`` for
skopeo/podman, ``docker load`` since 25, ``crane``, ``umoci``). Standard library only, so
scripts/build-image can run it with the host's python3 before anything is installed.

Everything is deterministic for the same inputs: entries sorted by path, mtimes clamped to
``SOURCE_DATE_EPOCH``, numeric owners only, gzip without a timestamp. Device nodes, sockets and
FIFOs are left out (the runtime provides /dev).

Usage (see scripts/build-image)::

    python3 ocilayout.py layer ROOTDIR OUT.tar.gz [--exclude REL ...]   # prints "<blob digest> <diff id>"
    python3 ocilayout.py image --layer L1.tar.gz --layer L2.tar.gz --config-json CFG.json \
        --ref 0.1.0 --out IMAGE.oci.tar                                # prints the manifest digest
    python3 ocilayout.py index --ref 0.1.0 --out MULTI.oci.tar AMD64.oci.tar ARM64.oci.tar
                                                           # prints the image index digest

Sources: OCI image-spec v1.1 (image-layout.md, manifest.md, config.md, layer.md).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CHUNK = 1 << 20


def epoch() -> int:
    """``SOURCE_DATE_EPOCH`` (seconds, UTC) or 0."""
    return int(os.environ.get("SOURCE_DATE_EPOCH", "0"))


class _Hashing(io.RawIOBase):
    """A write-only stream that hashes (sha256) and counts what passes through to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.sha, self.size = inner, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, b: Any) -> int:
        mv = memoryview(b).cast("B")
        self.sha.update(mv)
        self.size += len(mv)
        if self.inner is not None:
            self.inner.write(mv)
        return len(mv)


def _walk(root: Path, excluded: set[str], rel: str = "") -> Iterator[tuple[str, Path]]:
    """(archive name, path) for every entry under ``root``, depth first, sorted by name; an
    excluded directory is kept (a mount point) but not its contents."""
    for name in sorted(os.listdir(root / rel if rel else root)):
        child = f"{rel}/{name}" if rel else name
        p = root / child
        yield child, p
        if p.is_dir() and not p.is_symlink() and child not in excluded:
            yield from _walk(root, excluded, child)


def write_layer(root: Path, out: Path, exclude: Sequence[str] = ()) -> tuple[str, str, int]:
    """Pack the tree under ``root`` as a gzip layer at ``out``.

    Returns ``(blob digest, diff id, blob size)``: digests as ``sha256:<hex>`` of the compressed
    and the uncompressed tar. Hard links inside the tree stay hard links.
    """
    excluded = {e.strip("/") for e in exclude}
    clamp = epoch()
    with out.open("wb") as raw:
        blob = _Hashing(raw)
        with gzip.GzipFile(fileobj=blob, mode="wb", compresslevel=6, mtime=0) as gz:
            plain = _Hashing(gz)
            with tarfile.open(fileobj=plain, mode="w", format=tarfile.PAX_FORMAT) as tar:
                seen: dict[tuple[int, int], str] = {}
                for name, path in _walk(root, excluded):
                    st = path.lstat()
                    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                        continue  # devices, sockets, FIFOs
                    ti = tarfile.TarInfo(name)
                    ti.mode = stat.S_IMODE(st.st_mode)
                    ti.uid, ti.gid, ti.uname, ti.gname = st.st_uid, st.st_gid, "", ""
                    ti.mtime = min(int(st.st_mtime), clamp) if clamp else int(st.st_mtime)
                    if stat.S_ISDIR(st.st_mode):
                        ti.type = tarfile.DIRTYPE
                        tar.addfile(ti)
                    elif stat.S_ISLNK(st.st_mode):
                        ti.type, ti.linkname = tarfile.SYMTYPE, os.readlink(path)
                        tar.addfile(ti)
                    elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen:
                        ti.type, ti.linkname = tarfile.LNKTYPE, seen[(st.st_dev, st.st_ino)]
                        tar.addfile(ti)
                    else:
                        if st.st_nlink > 1:
                            seen[(st.st_dev, st.st_ino)] = name
                        ti.size = st.st_size
                        with path.open("rb") as f:
                            tar.addfile(ti, f)
    return f"sha256:{blob.sha.hexdigest()}", f"sha256:{plain.sha.hexdigest()}", blob.size


def _file_digest(path: Path) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    return f"sha256:{h.hexdigest()}", n


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def write_image(layers: list[tuple[Path, str]], config: dict[str, Any], ref: str, out: Path,
                annotations: dict[str, str] | None = None) -> str:
    """Write the OCI layout tar ``out``: ``oci-layout``, ``index.json`` (one manifest named
    ``ref`` by ``org.opencontainers.image.ref.name``) and ``blobs/sha256/*``.

    ``layers``: (gzip layer file, its diff id) bottom first; ``config``: the image config
    without ``rootfs`` (added here). Returns the manifest digest ``sha256:<hex>``, the image's
    digest as a registry reports it after a push of this archive.
    """
    clamp = epoch()
    cfg = dict(config)
    cfg["rootfs"] = {"type": "layers", "diff_ids": [d for _, d in layers]}
    cfg_bytes = _json_bytes(cfg)
    blobs: list[tuple[str, Path | bytes]] = []
    layer_descs = []
    for path, _ in layers:
        digest, size = _file_digest(path)
        layer_descs.append({"mediaType": LAYER, "digest": digest, "size": size})
        blobs.append((digest, path))
    cfg_digest = f"sha256:{hashlib.sha256(cfg_bytes).hexdigest()}"
    blobs.append((cfg_digest, cfg_bytes))
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST,
                "config": {"mediaType": CONFIG, "digest": cfg_digest, "size": len(cfg_bytes)},
                "layers": layer_descs}
    if annotations:
        manifest["annotations"] = dict(sorted(annotations.items()))
    man_bytes = _json_bytes(manifest)
    man_digest = f"sha256:{hashlib.sha256(man_bytes).hexdigest()}"
    blobs.append((man_digest, man_bytes))
    index = {"schemaVersion": 2, "mediaType": INDEX,
             "manifests": [{"mediaType": MANIFEST, "digest": man_digest, "size": len(man_bytes),
                            "platform": {"architecture": cfg["architecture"], "os": cfg["os"],
                                         **({"variant": cfg["variant"]} if "variant" in cfg else {})},
                            "annotations": {"org.opencontainers.image.ref.name": ref}}]}

    def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime = len(data), 0o644, clamp
        tar.addfile(ti, io.BytesIO(data))

    def add_dir(tar: tarfile.TarFile, name: str) -> None:
        ti = tarfile.TarInfo(name)
        ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, clamp
        tar.addfile(ti)

    tmp = out.with_name(out.name + ".part")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes(tar, "oci-layout", _json_bytes({"imageLayoutVersion": "1.0.0"}))
        add_bytes(tar, "index.json", _json_bytes(index))
        add_dir(tar, "blobs")
        add_dir(tar, "blobs/sha256")
        for digest, src in sorted(blobs, key=lambda b: b[0]):
            name = "blobs/sha256/" + digest.removeprefix("sha256:")
            if isinstance(src, bytes):
                add_bytes(tar, name, src)
            else:
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime = src.stat().st_size, 0o644, clamp
                with src.open("rb") as f:
                    tar.addfile(ti, f)
    tmp.replace(out)
    return man_digest


def write_index(archives: Sequence[Path], ref: str, out: Path) -> str:
    """Write the multi-platform OCI layout tar ``out`` from single-image archives (as
    :func:`write_image` writes them): every blob of each, an image index listing each archive's
    manifest with its platform, and ``index.json`` naming that image index ``ref``. Returns the
    image index digest, the multi-platform image's digest as a registry reports it after
    ``skopeo copy --all``.

    Raises:
        ValueError: an archive holds other than one manifest, or two archives one platform.
    """
    clamp = epoch()
    entries: list[dict[str, Any]] = []
    for path in archives:
        with tarfile.open(path) as tar:
            f = tar.extractfile("index.json")
            assert f is not None
            (desc,) = json.loads(f.read())["manifests"]
        if desc.get("mediaType") != MANIFEST or "platform" not in desc:
            raise ValueError(f"{path}: not a single-platform image archive")
        entries.append({k: desc[k] for k in ("mediaType", "digest", "size", "platform")})
    platforms = [json.dumps(e["platform"], sort_keys=True) for e in entries]
    if len(set(platforms)) != len(platforms):
        raise ValueError(f"two archives of one platform: {platforms}")
    image_index = _json_bytes({"schemaVersion": 2, "mediaType": INDEX, "manifests": entries})
    index_digest = f"sha256:{hashlib.sha256(image_index).hexdigest()}"
    top = {"schemaVersion": 2, "mediaType": INDEX,
           "manifests": [{"mediaType": INDEX, "digest": index_digest, "size": len(image_index),
                          "annotations": {"org.opencontainers.image.ref.name": ref}}]}
    tmp = out.with_name(out.name + ".part")
    seen: set[str] = set()
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as dst:
        layout = _json_bytes({"imageLayoutVersion": "1.0.0"})
        for name, data in (("oci-layout", layout), ("index.json", _json_bytes(top))):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, clamp
            dst.addfile(ti, io.BytesIO(data))
        for name in ("blobs", "blobs/sha256"):
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, clamp
            dst.addfile(ti)
        ti = tarfile.TarInfo("blobs/sha256/" + index_digest.removeprefix("sha256:"))
        ti.size, ti.mode, ti.mtime = len(image_index), 0o644, clamp
        dst.addfile(ti, io.BytesIO(image_index))
        seen.add(ti.name)
        for path in archives:
            with tarfile.open(path) as src:
                for m in src.getmembers():
                    if m.isfile() and m.name.startswith("blobs/sha256/") and m.name not in seen:
                        seen.add(m.name)
                        dst.addfile(m, src.extractfile(m))
    tmp.replace(out)
    return index_digest


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("layer")
    lp.add_argument("root", type=Path)
    lp.add_argument("out", type=Path)
    lp.add_argument("--exclude", action="append", default=[])
    ip = sub.add_parser("image")
    ip.add_argument("--layer", action="append", required=True, help="LAYER.tar.gz=sha256:DIFFID")
    ip.add_argument("--config-json", type=Path, required=True)
    ip.add_argument("--ref", required=True)
    ip.add_argument("--annotation", action="append", default=[], help="KEY=VALUE (manifest annotation)")
    ip.add_argument("--out", type=Path, required=True)
    xp = sub.add_parser("index")
    xp.add_argument("archives", type=Path, nargs="+")
    xp.add_argument("--ref", required=True)
    xp.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "index":
        print(write_index(a.archives, a.ref, a.out))
        return 0
    if a.cmd == "layer":
        blob, diff, _ = write_layer(a.root, a.out, a.exclude)
        print(blob, diff)
        return 0
    layers = []
    for spec in a.layer:
        path, _, diff = spec.partition("=")
        layers.append((Path(path), diff))
    ann = dict(x.split("=", 1) for x in a.annotation)
    print(write_image(layers, json.loads(a.config_json.read_text()), a.ref, a.out, ann))
    return 0


if __name__ == "__main__":
    sys.exit(main())
