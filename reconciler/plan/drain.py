"""Drain rules (pure, shared by the planner and the executor): which pods a drain evicts, skips or
is refused by (``kubectl drain``'s filter chain, drain-and-scenarios.md §1.2).

:func:`classify_pods` is pure and shared by the planner (to show what will be evicted) and the
executor (to do it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from reconciler.model.observed import PodInfo
from reconciler.model.recipe import DrainOptions
from reconciler.model.selector import LabelSelector

#: Our own stage pods carry this label and are never evicted by a drain.
MANAGED_BY = ("app.kubernetes.io/managed-by", "node-reconciler")

#: The reconciler's own pods (the chart's controller and pipeline Job, the examples' Argo CD hook
#: Jobs) carry this label: a drain never evicts them, it refuses the node instead — evicting the
#: controller that drains would stop the rollout half way, on the node it is cordoning.
RECONCILER_POD = ("app.kubernetes.io/name", "node-reconciler")
OWN_POD_REFUSAL = ("the reconciler's own pod runs on this node and is not evicted by itself; keep it off the "
                   "nodes it manages (chart values placement.*, docs/controller.md)")


@dataclass(frozen=True)
class DrainClassification:
    """Result of the filter chain for one node.

    ``evict``: pods to evict (Eviction API). ``remove_finished``: finished pods (Succeeded/Failed),
    removed without a budget check (kubectl filter 6). ``skipped``: pods left alone with the
    reason (DaemonSet, mirror, ours, not selected by ``podSelector``, terminating long enough).
    ``blockers``: pods that make kubectl refuse the whole drain, with the reason; when non-empty
    nothing is evicted. ``protected``: pods matching podNonInterruptLabels (waited for, never
    evicted).
    """

    evict: tuple[PodInfo, ...] = ()
    remove_finished: tuple[PodInfo, ...] = ()
    skipped: tuple[tuple[PodInfo, str], ...] = ()
    blockers: tuple[tuple[PodInfo, str], ...] = ()
    protected: tuple[PodInfo, ...] = field(default=())

    @property
    def to_remove(self) -> tuple[PodInfo, ...]:
        """Every pod the drain sends an eviction for (finished pods first)."""
        return self.remove_finished + self.evict


def is_protected(pod: PodInfo, selector: LabelSelector | None) -> bool:
    """A pod that blocks interruption: matches ``podNonInterruptLabels`` and is Running or Pending
    (NodeWright ``HasNonInterruptWork``). An absent or empty selector protects nothing."""
    if selector is None or selector.is_empty():
        return False
    return pod.phase in ("Running", "Pending") and pod.deletion_ts is None and selector.matches(pod.labels)


def classify_pods(
    pods: Iterable[PodInfo],
    options: DrainOptions,
    protected_selector: LabelSelector | None,
    *,
    now_wall: float | None = None,
    daemonset_exists: Callable[[str, str], bool] = lambda ns, name: True,
) -> DrainClassification:
    """Run kubectl drain's filter chain over the pods of one node (pure).

    Order (first verdict wins): protected → our own stage pods → the reconciler's own pods
    (:data:`RECONCILER_POD`: a blocker) → ``podSelector`` → terminating for
    longer than ``skipWaitForDeleteTimeoutSeconds`` (needs ``now_wall``) → DaemonSet-managed
    (finished: removed; live DaemonSet: skipped if ``ignoreDaemonSets`` else blocker; orphaned:
    removed with ``force`` else blocker) → mirror (skipped) → finished (removed) → emptyDir (needs
    ``deleteEmptyDirData``) → unmanaged (needs ``force``) → evicted.
    Source: kubectl ``pkg/drain/filters.go`` as summarised in drain-and-scenarios.md §1.2.
    """
    evict: list[PodInfo] = []
    finished: list[PodInfo] = []
    skipped: list[tuple[PodInfo, str]] = []
    blockers: list[tuple[PodInfo, str]] = []
    protected: list[PodInfo] = []
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name)):
        if is_protected(pod, protected_selector):
            protected.append(pod)
            continue
        if pod.labels.get(MANAGED_BY[0]) == MANAGED_BY[1]:
            skipped.append((pod, "node-reconciler stage pod"))
            continue
        if pod.labels.get(RECONCILER_POD[0]) == RECONCILER_POD[1] and not pod.finished and pod.deletion_ts is None:
            blockers.append((pod, OWN_POD_REFUSAL))
            continue
        if options.podSelector is not None and not options.podSelector.matches(pod.labels):
            skipped.append((pod, "not selected by drain.podSelector"))
            continue
        if (
            options.skipWaitForDeleteTimeoutSeconds > 0
            and pod.deletion_ts is not None
            and now_wall is not None
            and now_wall - pod.deletion_ts > options.skipWaitForDeleteTimeoutSeconds
        ):
            skipped.append((pod, "terminating longer than skipWaitForDeleteTimeoutSeconds"))
            continue
        ctrl = pod.controller
        if ctrl is not None and ctrl.kind == "DaemonSet":
            if pod.finished:
                finished.append(pod)
            elif daemonset_exists(pod.namespace, ctrl.name):
                if options.ignoreDaemonSets:
                    skipped.append((pod, f"DaemonSet-managed ({ctrl.name})"))
                else:
                    blockers.append((pod, f"DaemonSet-managed ({ctrl.name}); set drain.ignoreDaemonSets"))
            elif options.force:
                evict.append(pod)
            else:
                blockers.append((pod, f"orphaned DaemonSet pod ({ctrl.name} is gone); needs drain.force"))
            continue
        if pod.mirror:
            skipped.append((pod, "mirror pod (static pod)"))
            continue
        if pod.finished:
            finished.append(pod)
            continue
        if pod.emptydir and not options.deleteEmptyDirData:
            blockers.append((pod, "uses emptyDir local storage; needs drain.deleteEmptyDirData"))
            continue
        if ctrl is None and not options.force:
            blockers.append((pod, "not managed by a controller; needs drain.force"))
            continue
        evict.append(pod)
    return DrainClassification(tuple(evict), tuple(finished), tuple(skipped), tuple(blockers), tuple(protected))
