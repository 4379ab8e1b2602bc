"""docs/reference/node-keys.md: every key the reconciler reads or writes on Kubernetes objects."""

from __future__ import annotations

from refgen.common import GENERATED

#: Every key the reconciler reads or writes on Kubernetes objects: (key, where, what it holds).
#: ``<recipe>`` is a recipe's name; ``<legacy>`` is ``skyhook.nvidia.com`` or ``nodewright.nvidia.com``.
KEYS: tuple[tuple[str, str, str], ...] = (
    ("reconciler.nodewright.dev/nodeState_<recipe>", "Node annotation",
     "The recipe's package state on the node: a JSON map keyed `name|version` (NodeWright's shape) with each "
     "package's stage, state and restarts."),
    ("reconciler.nodewright.dev/config_<recipe>", "Node annotation",
     "Digests of each package's configuration as applied, so a configuration change is seen as a reconfigure."),
    ("reconciler.nodewright.dev/cordon_<recipe>", "Node annotation",
     "Present while the recipe holds a cordon it placed (a JSON owner record); we only ever undo a cordon "
     "one of these claims."),
    ("reconciler.nodewright.dev/inflight_<recipe>", "Node annotation",
     "The lifecycle in flight: run id, plan hash, phase, the interrupt still owed, the pre-reboot bootID, "
     "timers (UTC) and the packages `package rerun` restarted. Written before each step's effect."),
    ("reconciler.nodewright.dev/failure_<recipe>", "Node annotation",
     "Why the node failed: reason (see [vocabulary](vocabulary.md)), package, stage, exit code, the masked "
     "log tail, the inputs digest, and the node's UID and readiness when it failed."),
    ("reconciler.nodewright.dev/validate_<recipe>", "Node annotation",
     "Written when the node reaches the recipe's readiness gate: the gate's token (`<version>/<lifecycle>`), a "
     "request to the validator; removed when the node completes (see the readiness-gate how-to)."),
    ("reconciler.nodewright.dev/validated_<recipe>", "Node annotation (the validator's)",
     "Written by a validator with the token of `validate_<recipe>` once it validated the node after the request: "
     "a fresh validation passes the gate. Never written by the reconciler."),
    ("reconciler.nodewright.dev/status_<recipe>", "Node label and annotation",
     "The recipe's status on the node (complete, in_progress, erroring, blocked, waiting, unknown); the "
     "label is its projection for `kubectl get nodes -l`."),
    ("reconciler.nodewright.dev/<recipe>/<kind>", "Node condition type",
     "`Erroring` (True while the recipe failed on the node) or `NotReady`, NodeWright's condition shape."),
    ("reconciler.nodewright.dev/reconcileRequest", "Node annotation",
     "Set by `package rerun` and `reset --package` in their write: a running controller takes a change of it "
     "as a request for a pass (as Flux's `reconcile.fluxcd.io/requestedAt`). `reset` removes it (the removal "
     "of the recipe's state record is its request)."),
    ("reconciler.nodewright.dev/runtime-required", "Node taint (NoSchedule)",
     "Keeps workloads off a node until every runtime-required recipe is complete on it; we remove it then. "
     "Stage pods tolerate it."),
    ("reconciler.nodewright.dev/autoTaint", "Node annotation",
     "Written with the runtime-required taint when `autoTaintNewNodes` put it on a joining node, so the "
     "taint is known to be ours to remove."),
    ("reconciler.nodewright.dev/ignore", "Node label",
     "`true` takes the node out of every rollout (`reconciler node ignore`); a node in progress is "
     "finished safely."),
    ("reconciler.nodewright.dev/version", "NodeWright or Skyhook object annotation",
     "The recipe's release of a NodeWright or Skyhook resource (its spec has no field for it). On a NodeRecipe "
     "it is read with a warning for now: the release is `spec.version` (`reconciler convert --write`)."),
    ("reconciler.nodewright.dev/recipe-version", "object annotation (refused)",
     "The name of the release annotation before 0.1.0: refused with the new name, so a release is never "
     "silently dropped."),
    ("reconciler.nodewright.dev/estimate-stage-duration", "recipe annotation",
     "Go duration (at most a week) the plan's and the PR comment's estimates take for a stage."),
    ("reconciler.nodewright.dev/estimate-reboot-duration", "recipe annotation",
     "Go duration (at most a week) the estimates take for a reboot."),
    ("reconciler.nodewright.dev/recipe", "stage Pod label", "The recipe the stage pod runs for."),
    ("reconciler.nodewright.dev/package", "stage Pod label", "The package the stage pod runs."),
    ("reconciler.nodewright.dev/stage", "stage Pod label", "The stage (apply, config, interrupt, ...)."),
    ("reconciler.nodewright.dev/node", "stage Pod label", "The node the stage pod runs on."),
    ("reconciler.nodewright.dev/run-id", "stage Pod label", "The lifecycle (run id) the pod belongs to."),
    ("reconciler.nodewright.dev/interrupt-type", "interrupt Pod label",
     "The interrupt type (reboot, service, restartAllServices, noop)."),
    ("reconciler.nodewright.dev/stage-spec", "stage Pod annotation",
     "A JSON summary of the stage specification the pod was made from."),
    ("reconciler.nodewright.dev/name", "package ConfigMap label and annotation", "The recipe's name."),
    ("reconciler.nodewright.dev/Package.Name", "package ConfigMap annotation", "The package's name."),
    ("reconciler.nodewright.dev/Package.Version", "package ConfigMap annotation", "The package's version."),
    ("reconciler.nodewright.dev/node-meta", "node metadata ConfigMap label",
     "Marks the per-node metadata ConfigMap a stage pod mounts (labels, annotations, packages of the node)."),
    ("reconciler.nodewright.dev/Node.name", "node metadata ConfigMap annotation", "The node it describes."),
    ("app.kubernetes.io/managed-by", "label of our Pods, ConfigMaps and status objects",
     "`node-reconciler`; the drain leaves our own stage pods alone by it."),
    ("app.kubernetes.io/name", "label of the reconciler's own Pods (read)",
     "`node-reconciler` on the chart's controller and pipeline pods and the examples' hook Jobs: a drain "
     "refuses a node running one of them (DrainRefused) instead of evicting the reconciler itself."),
    ("<legacy>/nodeState_<recipe>", "Node annotation (read)",
     "NodeWright's package state: read when ours is absent, and taken over by `reconciler import`."),
    ("<legacy>/status_<recipe>", "Node label and annotation (read)",
     "NodeWright's status of the resource on the node, read by `reconciler import`."),
    ("<legacy>/cordon_<recipe>", "Node annotation (read)",
     "NodeWright's cordon: `reconciler import` takes the cordon over as ours."),
    ("<legacy>/ignore", "Node label (read)", "NodeWright's ignore label: `reconciler import` sets ours."),
    ("<legacy>/version_<recipe>", "Node annotation (removed)",
     "Deleted with the other legacy keys by `reconciler import --remove-legacy`."),
)


def node_keys_page() -> str:
    """docs/reference/node-keys.md."""
    lines = [GENERATED, "# Annotations, labels, taints and conditions", "",
             "Every key the reconciler reads or writes on Kubernetes objects. `<recipe>` is a recipe's name; "
             "`<legacy>` is NodeWright's prefix, `skyhook.nvidia.com` or `nodewright.nvidia.com`. How the node "
             "records keep a rollout crash-safe: [node records](node-records.md).", "",
             "| key | on | meaning |", "| --- | --- | --- |"]
    for key, where, meaning in KEYS:
        lines.append(f"| `{key}` | {where} | {meaning} |")
    return "\n".join(lines) + "\n"
