"""docs/reference/vocabulary.md (reconciler.model.vocab) and metrics.md (every metric family)."""

from __future__ import annotations

import enum

from reconciler.model import vocab
from refgen.common import GENERATED, _md, _md_keep_code

#: The meaning of each member of the closed vocabularies (reconciler.model.vocab); a member without
#: one fails the tests.
MEANINGS: dict[str, dict[str, str]] = {
    "Phase": {
        "start": "In memory only: the node has not been read yet.",
        "pre-cordon": "Running the stages of packages without an interrupt, before any cordon: only "
                      "packages with an interrupt wait for the cordon, the wait and the drain (NodeWright).",
        "cordon": "Cordoning the node (our cordon claim is recorded first).",
        "wait": "Waiting for the node's protected pods (podNonInterruptLabels) to finish.",
        "drain": "Evicting the node's pods through the Eviction API, PodDisruptionBudgets honoured.",
        "stages": "Running the packages' stages (apply, config, upgrade, uninstall and their checks).",
        "interrupt": "Carrying out the node's one merged interrupt (reboot or service restart).",
        "post-interrupt": "Running the post-interrupt stages and checks.",
        "readiness-gate": "Held, still cordoned, until the external validator says the node is ready.",
        "uncordon": "Releasing our cordon and the runtime-required taint.",
        "failing": "In memory only: the node failed and its failure record (reason, Erroring condition, "
                   "event) is being written; retried within bounds when the API refuses it.",
    },
    "FailureReason": {
        "NodeNotReady": "The node was not Ready within timeouts.nodeReady when its lifecycle needed it "
                        "(retried once its readiness changes).",
        "DrainRefused": "kubectl drain's refusals before any eviction: an unmanaged pod, local data, a "
                        "DaemonSet pod without ignoreDaemonSets.",
        "DrainTimeout": "The drain took longer than drain.timeoutSeconds.",
        "MultiplePDBs": "The Eviction API answered 500: a pod is under several PodDisruptionBudgets.",
        "ExternallyUncordoned": "Someone else uncordoned the node while we held it cordoned.",
        "Forbidden": "The API refused a request (RBAC or admission).",
        "Invalid": "The API rejected a request as invalid (400/422); never retried.",
        "ApiErrorPersists": "An API error persisted through its bounded retries (count or time).",
        "StageFailed": "A stage still failed after its retries (exit code kept).",
        "StageTimeout": "A stage pod took longer than timeouts.stage.",
        "ImagePullBackOff": "The stage image could not be pulled (kubelet's ImagePullBackOff).",
        "ErrImagePull": "The stage image could not be pulled (kubelet's ErrImagePull).",
        "InvalidImageName": "The stage image reference is invalid (kubelet's InvalidImageName).",
        "ErrImageNeverPull": "The image is not on the node and the pull policy is Never.",
        "InterruptFailed": "The interrupt pod failed.",
        "RebootTimeout": "No new bootID and Ready within timeouts.reboot after the reboot request.",
        "ReadinessGateTimeout": "The validator did not say ready within readinessGate.timeout.",
        "StagePodDeleted": "Someone else deleted the stage pod before its end, on its last attempt.",
    },
    "EventKind": {
        "cordon": "The node was cordoned (by us).",
        "wait": "The node waits for protected pods, or (NodeNotReady) to be Ready.",
        "blocked": "The node waited past timeouts.waitNonInterrupt: released, retried in a later pass.",
        "evict": "A pod was evicted (or a finished pod removed).",
        "evict-refused": "A pod's first 429 in a drain (PodDisruptionBudget or throttling); retried.",
        "drained": "The drain is done: the evicted pods are gone.",
        "stage-start": "A stage pod started (with its attempt number).",
        "stage-end": "A stage ended (ok or its exit code).",
        "stage-retry": "A stage failed and will be retried after the backoff.",
        "stage-lost": "A stage pod was deleted by someone else before its end (who, if seen): an attempt; made again.",
        "interrupt": "The interrupt was requested.",
        "rebooted": "The node came back with a new bootID.",
        "uncordon": "Our cordon was released.",
        "complete": "The node's lifecycle completed.",
        "failed": "The node failed (with its reason).",
        "left": "The node left the recipe's scope (selector or ignore label) mid-lifecycle.",
        "removed": "The node was deleted from the cluster.",
        "batch-start": "A batch of a compartment started (its nodes named).",
        "batch-end": "A batch ended: ok, failed and blocked counts, passed or failed.",
        "halted": "A compartment halted (failure threshold, or no free budget with nothing running).",
        "resume": "A run resumed a lifecycle an earlier run left in flight.",
        "stopped": "The run stopped before its end (preempted, pause, Lease lost).",
        "owed": "A node out of scope still owes an interrupt: recorded and kept.",
        "gate": "The node reached the readiness gate and is held.",
        "gate-passed": "The external validator said the node is ready.",
        "replaced": "Another machine under the node's name (another UID): its lifecycle starts from scratch.",
        "not-started": "The node was not Ready within timeouts.nodeReady: nothing started; it is left waiting.",
        "superseded": "A lifecycle of an older release: it finishes what its record owes before the newer one.",
        "release": "At a safe point a lifecycle took up the recipe's release, planned from what the node has.",
    },
    "Stage": {
        "apply": "Install the package (then apply-check).",
        "config": "Apply its configuration (then config-check).",
        "interrupt": "The node's merged interrupt.",
        "post-interrupt": "After the interrupt (then post-interrupt-check).",
        "upgrade": "Move to a newer version (then upgrade-check).",
        "uninstall": "Remove the package (then uninstall-check); downgrades run it for the newer version.",
        "uninstall-interrupt": "The interrupt after an uninstall.",
    },
    "PackageStatus": {
        "in_progress": "A stage of the package is running or due.",
        "complete": "Every stage of the package is done.",
        "erroring": "A stage failed.",
        "skipped": "Nothing to do for the package on this node.",
        "unknown": "A state this version does not know (from another tool).",
    },
    "NodeStatus": {
        "complete": "The recipe is complete on the node.",
        "in_progress": "A lifecycle is in flight on the node.",
        "erroring": "The recipe failed on the node.",
        "blocked": "The node waited too long for its protected pods.",
        "waiting": "The node waits for an earlier recipe (priority, sequencing).",
        "unknown": "No status, or one this version does not know.",
    },
    "InterruptType": {
        "reboot": "Reboot the node.",
        "restartAllServices": "Restart all services.",
        "service": "Restart the listed systemd units.",
        "noop": "Nothing is executed (cordon and drain still happen).",
    },
    "Action": {
        "install": "The package is not on the node: apply, config, interrupt, post-interrupt.",
        "upgrade": "A newer version: upgrade (or apply), config, interrupt, post-interrupt.",
        "downgrade": "An older version: uninstall the newer one, then install the older.",
        "reconfigure": "Same version, changed configuration: config, the config interrupt, post-interrupt.",
        "uninstall": "The package leaves the recipe (or uninstall.apply): uninstall and its interrupt.",
    },
    "NodeResult": {
        "complete": "The node's lifecycle completed in this run.",
        "failed": "The node failed in this run (or earlier, with the same inputs, and was not retried).",
        "untouched": "The node had nothing to do.",
        "blocked": "The node waited too long for its protected pods and was released.",
        "removed": "The node was deleted from the cluster during the run.",
        "left": "The node left the recipe's scope during the run.",
        "waiting": "The node waits for an earlier recipe (priority, sequencing), or to be Ready (not started).",
    },
    "RunVerdict": {
        "succeeded": "Every node is complete or had nothing to do (exit 0).",
        "failed": "A node failed or stayed blocked, or was still running when the run gave up (exit 1).",
        "halted": "A compartment stopped: failure threshold, or the run was stopped (exit 1).",
        "waiting": "Nothing failed, but nodes wait for an earlier recipe (exit 1; a later run takes them up).",
    },
    "UnhealthyPodEvictionPolicy": {
        "IfHealthyBudget": "The default: a Running pod that is not Ready is evicted only while the budget is "
                           "healthy.",
        "AlwaysAllow": "A Running pod that is not Ready may always be evicted.",
    },
}


def vocabularies() -> dict[str, type[enum.Enum]]:
    """The StrEnums of reconciler.model.vocab, by name, in source order."""
    return {name: obj for name, obj in vars(vocab).items()
            if isinstance(obj, type) and issubclass(obj, enum.Enum) and obj.__module__ == vocab.__name__}


def vocabulary_page() -> str:
    """docs/reference/vocabulary.md."""
    lines = [GENERATED, "# Vocabulary: phases, events, failure reasons, statuses", "",
             "The closed vocabularies the reconciler records on nodes and prints in results, events, "
             "metrics and the PR comment (`reconciler.model.vocab`).", ""]
    for name, enum_type in vocabularies().items():
        doc = " ".join((enum_type.__doc__ or "").strip().split("\n\n")[0].split()).replace("``", "`")
        lines += [f"## {name}", "", _md_keep_code(doc), "", "| value | meaning |", "| --- | --- |"]
        meanings = MEANINGS.get(name, {})
        for member in enum_type:
            lines.append(f"| `{member.value}` | {meanings.get(str(member.value), '')} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def metric_families() -> list[tuple[str, str, str, str]]:
    """``(name, type, labels, help)`` of every metric: the rollout families of
    reconciler.report.metrics (textfile, Pushgateway, the controller's /metrics) and the
    controller's own."""
    from reconciler.controller.metrics import ControllerMetrics
    from reconciler.report import metrics as export

    out = [(export.PREFIX + short, "gauge", "", text) for short, text in export.HELP.items()]
    registry = ControllerMetrics().registry
    for collector in registry._collector_to_names:
        if not hasattr(collector, "_name"):  # the rollout gauges above, registered as one collector
            continue
        out.append((collector._name, collector._type, ", ".join(collector._labelnames),  # type: ignore[attr-defined]
                    collector._documentation))  # type: ignore[attr-defined]
    return out


def metrics_page() -> str:
    """docs/reference/metrics.md."""
    lines = [GENERATED, "# Metrics", "",
             "`apply --metrics-file x.prom` writes the rollout metrics for node-exporter's textfile collector, "
             "`--pushgateway URL` pushes them, and `reconciler metrics` prints them; `reconciler controller` "
             "serves the same names on `/metrics` while its rollouts run (nodes by state, batch k of N, budget "
             "in use, phase, last progress), with its own. A Grafana dashboard for them is "
             "`docs/grafana/node-reconciler-dashboard.json` and alert rules (rollout halted, node failed, "
             "rollout stalled) are `charts/node-reconciler/files/prometheus-rules.yaml` (the chart's PrometheusRule); every query of both is checked "
             "against what `apply` exports and what a controller serves mid-rollout "
             "(`tests/unit/report/test_grafana_dashboard.py`, `tests/e2e/test_metrics_e2e.py`).", "",
             "The export's families (`node_reconciler_*`) carry the label `recipe`; the `rollout_*` ones also "
             "`policy`, `compartment` and `strategy`, and the others the dimension their help names (`status`, "
             "`package`, `version`, `state`, `stage`, `result`, `phase`).", "",
             "| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, kind, labels, text in metric_families():
        lines.append(f"| `{name}` | {kind} | {labels} | {_md(text)} |")
    return "\n".join(lines) + "\n"
