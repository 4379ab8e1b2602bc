"""What a stage pod of a package gets, the way NodeWright packages expect it (pure functions).

On the host, the agent's copy directory ``$SKYHOOK_DIR`` holds (semantics-nodewright.md §2.7, §3.4):

* ``configmaps/<key>``: one file per key of the package's ``configMap`` (the ConfigMap of that
  package version, mounted into the stage pod). The agent requires every
  ``expected_config_files`` entry of the package's ``config.json`` to be there;
* ``node-metadata/labels.json`` and ``node-metadata/annotations.json``: the node's labels and
  annotations when the pod was created;
* ``node-metadata/packages.json``: ``{"agentVersion": <agent image tag>, "packages": {name:
  {name, version, image, agentImageOverride?, interrupt?, configInterrupts?}}}`` for every package
  of the recipe.

NodeWright names the per-version ConfigMap ``<skyhook>-<package>-<version>`` and the per-node
metadata ConfigMap ``<skyhook>-<node>-metadata-<8 hex>`` (length-safe); the same shapes are used
here with the recipe name in place of the Skyhook name and our label/annotation prefix. JSON files
are compact with sorted keys, so the same inputs give byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from reconciler.model.nodestate import PREFIX
from reconciler.model.observed import NodeInfo
from reconciler.model.recipe import Package, Recipe

#: Namespace of the objects the reconciler creates for stage pods (the kube adapter's default).
DEFAULT_NAMESPACE = "node-reconciler"
MANAGED_BY = {"app.kubernetes.io/managed-by": "node-reconciler"}
CONFIGMAPS_DIR = "configmaps"
METADATA_DIR = "node-metadata"
METADATA_FILES = ("labels.json", "annotations.json", "packages.json")

_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def dns_label(text: str, limit: int = 63) -> str:
    """``text`` as a DNS-1123 label (lower case, ``[a-z0-9-]``, at most ``limit`` characters);
    when it had to be shortened or changed, 8 hex of its sha256 are appended so names stay unique."""
    clean = _NOT_DNS.sub("-", text.lower()).strip("-")
    if clean == text and len(clean) <= limit:
        return clean
    h = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{clean[: limit - 9].strip('-')}-{h}"


def image_tag(image: str) -> str:
    """The tag of an image reference (``repo:tag`` → ``tag``; ``repo@sha256:…`` → the digest; no
    tag → ``latest``). A registry port (``host:5000/repo``) is not a tag."""
    if "@" in image:
        return image.split("@", 1)[1]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


def config_map_name(recipe: str, package: str, version: str) -> str:
    """Name of the ConfigMap of one package version: ``<recipe>-<package>-<version>`` (made a
    DNS-1123 label; ``+``/``.`` in versions become ``-``, with a digest suffix when changed)."""
    return dns_label(f"{recipe}-{package}-{version}")


def package_config_map(recipe: Recipe, package: Package, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    """The ConfigMap object holding ``package.configMap`` for its version (mounted by stage pods
    at ``$SKYHOOK_DIR/configmaps``): labels name the recipe, annotations the package and version."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(recipe.name, package.name, package.version),
            "namespace": namespace,
            "labels": {**MANAGED_BY, f"{PREFIX}/name": dns_label(recipe.name)},
            "annotations": {
                f"{PREFIX}/name": recipe.name,
                f"{PREFIX}/Package.Name": package.name,
                f"{PREFIX}/Package.Version": package.version,
            },
        },
        "data": {k: package.configMap[k] for k in sorted(package.configMap)},
    }


def packages_document(recipe: Recipe, agent_version: str) -> dict[str, Any]:
    """The ``packages.json`` document: agent version and, per package of the recipe, ``name,
    version, image`` plus ``agentImageOverride``, ``interrupt`` and ``configInterrupts`` when set."""
    pkgs: dict[str, Any] = {}
    for name in sorted(recipe.packages):
        p = recipe.packages[name]
        entry: dict[str, Any] = {"name": p.name, "version": p.version, "image": p.image}
        if p.agentImageOverride:
            entry["agentImageOverride"] = p.agentImageOverride
        if p.interrupt is not None:
            entry["interrupt"] = p.interrupt.model_dump(mode="json", exclude_defaults=True)
        if p.configInterrupts:
            entry["configInterrupts"] = {
                k: v.model_dump(mode="json", exclude_defaults=True) for k, v in sorted(p.configInterrupts.items())
            }
        pkgs[name] = entry
    return {"agentVersion": agent_version, "packages": pkgs}


def node_metadata_files(node: NodeInfo, recipe: Recipe, agent_version: str) -> dict[str, str]:
    """``{"labels.json", "annotations.json", "packages.json"}`` → file text for ``node``."""
    return {
        "labels.json": _compact(dict(node.labels)),
        "annotations.json": _compact(dict(node.annotations)),
        "packages.json": _compact(packages_document(recipe, agent_version)),
    }


def metadata_config_map_name(recipe: str, node: str) -> str:
    """``<recipe>-<node>-metadata-<8 hex>`` (8 hex of the recipe and node names; the readable
    part is shortened so the name stays a 63-character DNS label)."""
    h = hashlib.sha256(f"{recipe}/{node}".encode()).hexdigest()[:8]
    base = _NOT_DNS.sub("-", f"{recipe}-{node}".lower()).strip("-")[: 63 - len("-metadata-") - 8].strip("-")
    return f"{base}-metadata-{h}"


def node_metadata_config_map(
    node: NodeInfo, recipe: Recipe, agent_version: str, namespace: str = DEFAULT_NAMESPACE
) -> dict[str, Any]:
    """The per-node metadata ConfigMap (mounted at ``$SKYHOOK_DIR/node-metadata``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": metadata_config_map_name(recipe.name, node.name),
            "namespace": namespace,
            "labels": {**MANAGED_BY, f"{PREFIX}/node-meta": dns_label(recipe.name)},
            "annotations": {f"{PREFIX}/name": recipe.name, f"{PREFIX}/Node.name": node.name},
        },
        "data": node_metadata_files(node, recipe, agent_version),
    }


def stage_files(node: NodeInfo, recipe: Recipe, package: str, agent_version: str) -> dict[str, str]:
    """Every file the stage pod of ``package`` adds under ``$SKYHOOK_DIR``, by relative path:
    ``configmaps/<key>`` and ``node-metadata/<file>``.

    Raises:
        KeyError: ``package`` is not in the recipe.
    """
    pkg = recipe.packages[package]
    out = {f"{CONFIGMAPS_DIR}/{k}": v for k, v in sorted(pkg.configMap.items())}
    out.update({f"{METADATA_DIR}/{k}": v for k, v in node_metadata_files(node, recipe, agent_version).items()})
    return out


def missing_config_files(expected: tuple[str, ...] | list[str], config_map: Mapping[str, str]) -> list[str]:
    """``expected_config_files`` entries absent from a package's ``configMap`` (the agent fails the
    stage when one is missing)."""
    return [f for f in expected if f not in config_map]
