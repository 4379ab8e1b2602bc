"""``package logs``: find the stage pods of a package on a node and their log tails (best effort).

Stage pod names are derived from (recipe, package, version, stage, node, attempt, lifecycle run
id, rerun count) (``StageSpec.pod_name``); this module rebuilds the candidates from the node's
records — the versions in the package-state map, the run ids of the in-flight record
(``lifecycle``, ``runId``) and of the failure record, the package's reruns in that lifecycle
(``InFlight.reruns``: the pods of the latest run first, then those of the earlier ones), the
recorded stage (or ``--stage``) and attempts 1..N — and asks the cluster for each
(``Cluster.stage_status``: one read per candidate). The executor deletes a node's stage pods when
its lifecycle completes; until then (in progress, failed) they stay — failed ones for their logs,
successful ones as the record of what completed, which a resumed run reads — so the pods found
are those of a node whose lifecycle has not completed. The failure record's log tail (kept on the
node) is returned as well.
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.model.nodestate import (
    InFlight,
    NodeStateError,
    failure_of,
    inflight_key,
    parse_model,
    parse_state,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.ports import StageRunner, StageSpec, StageStatus

#: Attempts looked up per (version, stage, run id).
MAX_ATTEMPTS = 6


@dataclass(frozen=True)
class StageLog:
    """A stage pod found (``source`` ``pod``) or the failure record's tail (``source`` ``failure``)."""

    node: str
    package: str
    version: str
    stage: str
    source: str
    pod: str = ""
    attempt: int = 0
    phase: str = ""
    exit_code: int | None = None
    reason: str = ""
    log: str = ""


def candidates(node: NodeInfo, recipe: str, package: str, stage: str | None = None,
               max_attempts: int = MAX_ATTEMPTS) -> list[StageSpec]:
    """Stage specs whose pods may exist for ``package`` on ``node`` (see module doc), newest
    attempt first."""
    try:
        state = parse_state(node.annotations.get(state_key(recipe)), node=node.name)
    except NodeStateError:
        state = {}
    entries = [e for e in state.values() if e.name == package]
    inflight = parse_model(InFlight, node.annotations.get(inflight_key(recipe)))
    failure = failure_of(node.annotations, recipe)
    runs: list[str] = []
    for r in ((inflight.lifecycle, inflight.runId) if inflight else ()) + ((failure.runId,) if failure else ()):
        if r and r not in runs:
            runs.append(r)
    reruns = inflight.rerun_of(package) if inflight else 0
    out: list[StageSpec] = []
    for e in sorted(entries, key=lambda x: x.version):
        stages = [stage] if stage else [e.stage]
        for st in stages:
            for run in runs:
                gens = range(reruns, -1, -1) if inflight is not None and run == inflight.lifecycle_id else (0,)
                for gen in gens:
                    for attempt in range(max_attempts, 0, -1):
                        out.append(StageSpec(recipe=recipe, node=node.name, package=package, version=e.version,
                                             stage=st, pull_ref="", run_id=run, attempt=attempt, rerun=gen))
    return out


def find_logs(cluster: StageRunner, node: NodeInfo, recipe: str, package: str, stage: str | None = None,
              max_attempts: int = MAX_ATTEMPTS) -> list[StageLog]:
    """Stage pods found for ``package`` on ``node`` (newest attempt first), then the failure
    record's tail when it is about this package."""
    out: list[StageLog] = []
    for spec in candidates(node, recipe, package, stage, max_attempts):
        st: StageStatus = cluster.stage_status(spec, log=True)
        if st.phase == "missing":
            continue
        out.append(StageLog(node.name, package, spec.version, spec.stage, "pod", spec.pod_name, spec.attempt,
                            st.phase, st.exit_code, st.reason, st.log_tail))
    failure = failure_of(node.annotations, recipe)
    if failure is not None and failure.package == package and (stage is None or failure.stage == stage):
        out.append(StageLog(node.name, package, "", failure.stage, "failure", phase="failed",
                            exit_code=failure.exitCode, reason=failure.reason,
                            log=failure.logTail or failure.message))
    return out
