"""Desired × observed → what each package needs on each node (pure).

Reads the node annotations the executor writes (``model/nodestate.py``) and decides, per
(node, package), one action with a human reason:

* **install**: no entry for the package name → ``apply``, ``config``;
* **upgrade**: an entry at a lower semver → ``upgrade``, ``config`` (``apply`` is not re-run);
* **downgrade**: an entry at a higher semver → ``uninstall`` (old entry), ``apply``, ``config``;
* **reconfigure**: the spec version is complete and the recorded :class:`ConfigDigest` differs →
  ``config``; ``changedKeys`` = added or changed configMap keys (removed keys re-run ``config``
  but select no ``configInterrupts``); env/resources-only changes → ``restartOnly``, no interrupt;
* **uninstall**: the package has ``uninstall.apply: true`` → ``uninstall``; an entry whose name
  is not in the recipe any more stays as a marker and nothing runs (NodeWright HEAD;
  :func:`diff_removed`);
* **unchanged**: the spec version is complete and its configuration is the recorded one.

Rules (semantics-nodewright.md §2.2, §2.3, §2.7):

* Versions compare by semver (``v`` prefix accepted, pre-release < release, build metadata
  ignored), so ``1.0.0+b1`` and ``1.0.0+b2`` are the same version.
* An entry at the spec version that is not complete (``in_progress``, ``erroring``, ``unknown``,
  ``skipped``) continues from its recorded stage; stages recorded complete never run again
  (``config`` erroring → ``("config",)``).
* A package is complete when its spec-version entry is ``complete`` at ``config`` or
  ``post-interrupt``. ``config/complete`` of a package with an interrupt is complete unless the
  node's ``InFlight`` record still owes that interrupt (``interruptPackages`` names the package,
  or lists nothing and the package has an interrupt); then the step carries the owed interrupt
  and its ``post-interrupt`` stage.
* Effective interrupt (§2.2): for a reconfigure, the merged ``configInterrupts`` whose key or glob
  (``fnmatch.fnmatchcase``) matches a changed key (none → no interrupt even if ``interrupt`` is
  set); otherwise the package's ``interrupt``.
* **How post-interrupt is shown:** a step's ``stages`` end with ``post-interrupt`` exactly when
  the step has an interrupt (install, upgrade, downgrade, reconfigure) — the node's merged
  interrupt runs after every step's other stages and before these ``post-interrupt`` stages.
  Two cases differ: a step resumed after its interrupt already ran has ``("post-interrupt",)``
  and carries only the interrupt the node's ``InFlight`` record still lists (none once it is
  cleared), and an explicit uninstall of a package with an interrupt has ``("uninstall",)`` with
  the interrupt (NodeWright's ``uninstall-interrupt``, no post stage).
* **Action of a resumed step:** node state does not record why a stage runs, so a step resumed
  at ``apply`` is an install, at ``upgrade`` an upgrade, at ``uninstall`` of an old version a
  downgrade; at ``config``/``interrupt``/``post-interrupt`` it is an upgrade when an entry of
  another version still exists, a reconfigure when a config digest was recorded before, else an
  install. Its reason starts with ``resume:``. Known limit: an upgrade killed after its
  ``upgrade`` stage completed (old entry already deleted) resumes at ``config`` as a reconfigure
  whose interrupt comes from the changed keys and from the ``InFlight`` record.
* **Import (decision (h)):** when our state annotation is absent, ``skyhook.nvidia.com/`` or
  ``nodewright.nvidia.com/nodeState_<recipe>`` is read and the node is marked imported; with no
  recorded config digest, configuration is treated as unchanged.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from reconciler.model.interrupts import describe, interrupt_from_record, merge_interrupts
from reconciler.model.nodestate import (
    LEGACY_PREFIXES,
    ConfigDigest,
    FailureRecord,
    InFlight,
    NodeStateError,
    PackageState,
    config_key,
    digest,
    failure_key,
    holds_claim,
    inflight_key,
    of_another_machine,
    parse_config_digests,
    parse_model,
    parse_state,
    recipe_keys,
    state_key,
)
from reconciler.model.observed import NodeInfo
from reconciler.model.plan import Step
from reconciler.model.recipe import Interrupt, Package, Recipe
from reconciler.model.versions import compare
from reconciler.model.vocab import Action

ChangeKind = Literal["install", "upgrade", "downgrade", "reconfigure", "uninstall", "unchanged"]


# --------------------------------------------------------------------------------------------
# configuration digests


_DIGESTS: dict[int, tuple[Package, ConfigDigest]] = {}


def config_digest(pkg: Package) -> ConfigDigest:
    """The configuration a package is applied with, as the executor records it when the
    package's ``config`` stage completes (annotation :func:`~reconciler.model.nodestate.config_key`).

    ``configMap``: one :func:`~reconciler.model.nodestate.digest` per key of the value;
    ``env``: digest of the env list in order ("" when there is none); ``resources``: digest of
    the resources ("" when unset). Empty strings for absent parts keep a digest written by an
    older tool (defaults) equal to "nothing set". Memoised per package object (models are frozen),
    so planning a fleet digests each package once, not once per node.
    """
    hit = _DIGESTS.get(id(pkg))
    if hit is not None and hit[0] is pkg:
        return hit[1]
    if len(_DIGESTS) > 4096:
        _DIGESTS.clear()
    out = ConfigDigest(
        configMap={k: digest(v) for k, v in sorted(pkg.configMap.items())},
        env=digest([e.model_dump(mode="json", exclude_none=True) for e in pkg.env]) if pkg.env else "",
        resources=digest(pkg.resources.model_dump(mode="json")) if pkg.resources else "",
    )
    _DIGESTS[id(pkg)] = (pkg, out)
    return out


@dataclass(frozen=True)
class ConfigChange:
    """How a package's configuration differs from what was last applied.

    ``changed_keys``: configMap keys added or whose value changed (sorted); ``removed_keys``:
    keys no longer present (sorted); ``env``/``resources``: those digests differ.
    """

    changed_keys: tuple[str, ...] = ()
    removed_keys: tuple[str, ...] = ()
    env: bool = False
    resources: bool = False

    @property
    def config(self) -> bool:
        """The configMap changed (a key added, changed or removed)."""
        return bool(self.changed_keys or self.removed_keys)

    @property
    def any(self) -> bool:
        """Anything changed."""
        return self.config or self.env or self.resources


def config_changes(recorded: ConfigDigest, pkg: Package) -> ConfigChange:
    """Compare the recorded digest of a package with its spec (see :func:`config_digest`)."""
    cur = config_digest(pkg)
    if cur == recorded:
        return ConfigChange()
    changed = tuple(sorted(k for k, d in cur.configMap.items() if recorded.configMap.get(k) != d))
    removed = tuple(sorted(k for k in recorded.configMap if k not in cur.configMap))
    return ConfigChange(changed, removed, cur.env != recorded.env, cur.resources != recorded.resources)


def config_interrupt(pkg: Package, changed_keys: Iterable[str]) -> Interrupt | None:
    """The effective interrupt of a configMap change: the merge of every ``configInterrupts``
    entry whose key or glob matches a changed key (``fnmatch.fnmatchcase``, like Go's
    ``filepath.Match`` for key names). None when nothing matches, even if the package has an
    ``interrupt`` (semantics §2.2)."""
    keys = list(changed_keys)
    picked = [
        intr
        for pattern, intr in sorted(pkg.configInterrupts.items())
        if any(fnmatch.fnmatchcase(k, pattern) for k in keys)
    ]
    return merge_interrupts(picked)


# --------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class PackageChange:
    """The decision for one package on one node.

    ``action`` is a plan action or ``unchanged``; ``from_``/``to`` the recorded and spec
    versions (None when absent); ``stages`` the non-interrupt stages to run in order (see the
    module docstring for ``post-interrupt``); ``interrupt`` the package's effective interrupt;
    ``resumed``: continues work recorded on the node. ``sha_mismatch``: the recorded
    ``containerSHA`` of the same version differs from the spec (same version is not re-run).
    """

    package: str
    action: ChangeKind
    from_: str | None
    to: str | None
    stages: tuple[str, ...]
    reason: str
    interrupt: Interrupt | None = None
    changed_keys: tuple[str, ...] = ()
    restart_only: bool = False
    resumed: bool = False
    sha_mismatch: bool = False

    @property
    def changing(self) -> bool:
        """True unless the package is unchanged."""
        return self.action != "unchanged"

    def to_step(self, after: Sequence[str] = ()) -> Step:
        """This change as a plan :class:`~reconciler.model.plan.Step`.

        Raises:
            ValueError: the package is unchanged (it has no step).
        """
        if self.action == "unchanged":
            raise ValueError(f"package {self.package} is unchanged and has no step")
        action = Action(self.action)
        return Step.model_validate(
            {
                "package": self.package,
                "action": action,
                "from": self.from_,
                "to": self.to,
                "stages": self.stages,
                "reason": self.reason,
                "interrupt": self.interrupt,
                "changedKeys": self.changed_keys,
                "after": tuple(after),
                "restartOnly": self.restart_only,
            }
        )


@dataclass(frozen=True)
class NodeDiff:
    """Every package decision for one node, plus what the node's records say.

    ``changes``: spec packages then removed names, sorted by package name. ``imported``: the
    state came from a NodeWright/Skyhook annotation (``state_source`` names the key read).
    ``inflight``/``owed_interrupt``: the node's unfinished lifecycle and the interrupt it still
    owes. ``cordoned_by_us``: our cordon record is present. ``failure``: a previous run's failure
    record. ``state_error``: the state annotation is malformed — no decision is possible and
    ``changes`` is empty. ``problems``: other unreadable records (the planner warns). ``void``:
    the records on the node were written on another machine (its UID differs,
    :func:`~reconciler.model.nodestate.of_another_machine`) and were ignored: planned from scratch.
    """

    node: str
    changes: tuple[PackageChange, ...]
    imported: bool = False
    state_source: str = ""
    inflight: InFlight | None = None
    owed_interrupt: Interrupt | None = None
    cordoned_by_us: bool = False
    failure: FailureRecord | None = None
    state_error: str = ""
    problems: tuple[str, ...] = ()
    void: bool = False

    @property
    def changing(self) -> tuple[PackageChange, ...]:
        """The changes that are not ``unchanged``."""
        return tuple(c for c in self.changes if c.changing)


# --------------------------------------------------------------------------------------------
# helpers


def _same_version(a: str, b: str) -> bool:
    try:
        return compare(a, b) == 0
    except ValueError:
        return a == b


def _cmp(a: str, b: str) -> int:
    """Semver order; an unparsable recorded version sorts below everything (→ upgrade)."""
    try:
        return compare(a, b)
    except ValueError:
        try:
            compare(b, b)
        except ValueError:
            return (a > b) - (a < b)
        return -1


def _highest(entries: Sequence[PackageState]) -> PackageState:
    best = entries[0]
    for e in entries[1:]:
        if _cmp(e.version, best.version) > 0 or (_cmp(e.version, best.version) == 0 and e.key > best.key):
            best = e
    return best


def _with_post(stages: tuple[str, ...], interrupt: Interrupt | None) -> tuple[str, ...]:
    return (*stages, "post-interrupt") if interrupt is not None else stages


def _state_text(e: PackageState) -> str:
    text = f"{e.stage}/{e.state}"
    if e.restarts:
        text += f" ({e.restarts} restarts)"
    return text


def read_state(
    recipe: str, annotations: Mapping[str, str], *, node: str = ""
) -> tuple[dict[str, PackageState], str, bool]:
    """The package-state map of ``recipe`` on a node: ``(state, annotation key read, imported)``.

    Our annotation wins when present (even empty); otherwise ``skyhook.nvidia.com/`` then
    ``nodewright.nvidia.com/nodeState_<recipe>`` is imported (decision (h)). No annotation at
    all → ``({}, "", False)``.

    Raises:
        NodeStateError: the annotation read is malformed (message names node and key).
    """
    ours = state_key(recipe)
    if ours in annotations:
        return parse_state(annotations[ours], node=node, key=ours), ours, False
    for prefix in LEGACY_PREFIXES:
        key = f"{prefix}/nodeState_{recipe}"
        if key in annotations:
            return parse_state(annotations[key], node=node, key=key), key, True
    return {}, "", False


# --------------------------------------------------------------------------------------------
# per-package decisions


def _resume_action(other: PackageState | None, recorded: ConfigDigest | None) -> ChangeKind:
    if other is not None:
        return "upgrade"
    return "reconfigure" if recorded is not None else "install"


def _complete_or_reconfigure(
    pkg: Package, cur: PackageState, recorded: ConfigDigest | None, imported: bool
) -> PackageChange:
    sha_mismatch = bool(cur.containerSHA and pkg.containerSHA and cur.containerSHA != pkg.containerSHA)
    if recorded is None:
        why = (
            "no config digest recorded (imported state): config treated as unchanged"
            if imported
            else ("no config digest recorded: config treated as unchanged")
        )
        return PackageChange(
            pkg.name,
            "unchanged",
            cur.version,
            pkg.version,
            (),
            f"up to date; {why}",
            sha_mismatch=sha_mismatch,
        )
    ch = config_changes(recorded, pkg)
    if not ch.any:
        return PackageChange(
            pkg.name, "unchanged", cur.version, pkg.version, (), "up to date", sha_mismatch=sha_mismatch
        )
    if not ch.config:
        parts = [p for p, on in (("env", ch.env), ("resources", ch.resources)) if on]
        return PackageChange(
            pkg.name,
            "reconfigure",
            cur.version,
            pkg.version,
            ("config",),
            f"{' and '.join(parts)} changed: config re-run, no interrupt",
            restart_only=True,
        )
    intr = config_interrupt(pkg, ch.changed_keys)
    bits = []
    if ch.changed_keys:
        bits.append("configMap keys changed: " + ", ".join(ch.changed_keys))
    if ch.removed_keys:
        bits.append("configMap keys removed: " + ", ".join(ch.removed_keys))
    if ch.env or ch.resources:
        bits.append(" and ".join(p for p, on in (("env", ch.env), ("resources", ch.resources)) if on) + " changed")
    if intr is not None:
        bits.append(f"configInterrupts select {describe(intr)}")
    elif pkg.configInterrupts or pkg.interrupt:
        bits.append("no configInterrupts match: no interrupt")
    return PackageChange(
        pkg.name,
        "reconfigure",
        cur.version,
        pkg.version,
        _with_post(("config",), intr),
        "; ".join(bits),
        interrupt=intr,
        changed_keys=ch.changed_keys,
    )


def _continue(
    pkg: Package,
    cur: PackageState,
    others: Sequence[PackageState],
    recorded: ConfigDigest | None,
    owed: Interrupt | None,
    imported: bool,
) -> PackageChange:
    """An entry exists at the spec version: finish it, or check its configuration."""
    old = _highest(others) if others else None
    at = _state_text(cur)
    name, to = pkg.name, pkg.version

    def step(
        action: ChangeKind,
        stages: tuple[str, ...],
        intr: Interrupt | None,
        why: str,
        keys: tuple[str, ...] = (),
    ) -> PackageChange:
        frm = old.version if old is not None else (cur.version if action == "reconfigure" else None)
        return PackageChange(
            name, action, frm, to, stages, f"resume: {why}", interrupt=intr, changed_keys=keys, resumed=True
        )

    if cur.state == "complete":
        if cur.stage == "post-interrupt":
            return _complete_or_reconfigure(pkg, cur, recorded, imported)
        if cur.stage == "config":
            if owed is not None:
                return step(
                    _resume_action(old, recorded),
                    ("post-interrupt",),
                    owed,
                    f"config complete; the node still owes its {describe(owed)} interrupt, then post-interrupt",
                )
            return _complete_or_reconfigure(pkg, cur, recorded, imported)
        if cur.stage in ("apply", "upgrade"):
            action: ChangeKind = "install" if cur.stage == "apply" else "upgrade"
            return step(
                action,
                _with_post(("config",), pkg.interrupt),
                pkg.interrupt,
                f"{cur.stage} complete, config not yet run",
            )
        if cur.stage == "interrupt":
            return step(
                _resume_action(old, recorded),
                ("post-interrupt",),
                owed,
                "interrupt complete, post-interrupt not yet run",
            )
        # uninstall / uninstall-interrupt recorded complete for the version the recipe wants
        return PackageChange(
            name,
            "install",
            None,
            to,
            _with_post(("apply", "config"), pkg.interrupt),
            f"entry at {at} (uninstalled): install again",
            interrupt=pkg.interrupt,
        )

    # in_progress / erroring / unknown / skipped: continue from the recorded stage
    if cur.stage == "apply":
        return step("install", _with_post(("apply", "config"), pkg.interrupt), pkg.interrupt, f"at {at}")
    if cur.stage == "upgrade":
        return step("upgrade", _with_post(("upgrade", "config"), pkg.interrupt), pkg.interrupt, f"at {at}")
    if cur.stage == "config":
        if recorded is not None and old is None:
            ch = config_changes(recorded, pkg)
            intr = merge_interrupts([config_interrupt(pkg, ch.changed_keys), owed])
            return step("reconfigure", _with_post(("config",), intr), intr, f"at {at}", ch.changed_keys)
        intr = merge_interrupts([pkg.interrupt, owed])
        return step("upgrade" if old else "install", _with_post(("config",), intr), intr, f"at {at}")
    if cur.stage == "interrupt":
        intr = owed or pkg.interrupt
        return step(
            _resume_action(old, recorded),
            ("post-interrupt",),
            intr,
            f"at {at}; interrupt {describe(intr)} runs again unless the executor confirms it ran",
        )
    if cur.stage == "post-interrupt":
        return step(_resume_action(old, recorded), ("post-interrupt",), owed, f"at {at}")
    if cur.stage == "uninstall" and old is not None and _cmp(old.version, pkg.version) > 0:
        # a downgrade recorded on the new version's key while the newer entry still exists
        return PackageChange(
            name,
            "downgrade",
            old.version,
            to,
            _with_post(("uninstall", "apply", "config"), pkg.interrupt),
            f"resume: downgrade from {old.version} at {at}",
            interrupt=pkg.interrupt,
            resumed=True,
        )
    # uninstall / uninstall-interrupt in progress while the recipe wants this version: reinstall
    return PackageChange(
        name,
        "install",
        None,
        to,
        _with_post(("apply", "config"), pkg.interrupt),
        f"entry at {at} while the recipe wants it: install again",
        interrupt=pkg.interrupt,
        resumed=True,
    )


def diff_package(
    pkg: Package,
    entries: Sequence[PackageState],
    recorded: ConfigDigest | None = None,
    *,
    owed: Interrupt | None = None,
    imported: bool = False,
) -> PackageChange:
    """Decide what a spec package needs on a node.

    ``entries``: the node-state entries whose name is ``pkg.name`` (any version); ``recorded``:
    the config digest last applied for it (None: unknown, e.g. imported → config unchanged);
    ``owed``: the interrupt the node's ``InFlight`` record still owes *this* package.
    """
    entries = sorted(entries, key=lambda e: e.key)
    if pkg.uninstall is not None and pkg.uninstall.apply:
        if not entries:
            return PackageChange(pkg.name, "unchanged", None, None, (), "uninstalled (uninstall.apply)")
        hi = _highest(entries)
        return PackageChange(
            pkg.name,
            "uninstall",
            hi.version,
            None,
            ("uninstall",),
            f"uninstall.apply is set (entry at {_state_text(hi)})",
            interrupt=pkg.interrupt,
            resumed=hi.stage == "uninstall",
        )
    same = [e for e in entries if _same_version(e.version, pkg.version)]
    others = [e for e in entries if not _same_version(e.version, pkg.version)]
    if same:
        exact = [e for e in same if e.version == pkg.version]
        return _continue(pkg, (exact or same)[0], others, recorded, owed, imported)
    if not others:
        return PackageChange(
            pkg.name,
            "install",
            None,
            pkg.version,
            _with_post(("apply", "config"), pkg.interrupt),
            "not installed",
            interrupt=pkg.interrupt,
        )
    hi = _highest(others)
    if _cmp(hi.version, pkg.version) > 0:
        resumed = hi.stage == "uninstall"
        why = (
            f"resume: uninstall of {hi.version} at {_state_text(hi)}, then install {pkg.version}"
            if resumed
            else f"{hi.version} is newer than {pkg.version}: uninstall it, then install"
        )
        return PackageChange(
            pkg.name,
            "downgrade",
            hi.version,
            pkg.version,
            _with_post(("uninstall", "apply", "config"), pkg.interrupt),
            why,
            interrupt=pkg.interrupt,
            resumed=resumed,
        )
    return PackageChange(
        pkg.name,
        "upgrade",
        hi.version,
        pkg.version,
        _with_post(("upgrade", "config"), pkg.interrupt),
        f"{hi.version} → {pkg.version} (entry at {_state_text(hi)})",
        interrupt=pkg.interrupt,
    )


def diff_removed(name: str, entries: Sequence[PackageState]) -> PackageChange:
    """A package name recorded on the node but absent from the recipe: nothing runs; its entry
    stays as a marker (NodeWright HEAD: a package removed without ``uninstall.enabled`` is left
    in place; one with it cannot be removed before ``uninstall.apply`` ran everywhere — v0.15 ran
    the uninstall, a destructive surprise). To uninstall it, keep it in the recipe with
    ``uninstall: {enabled: true, apply: true}`` until no node records it."""
    hi = _highest(sorted(entries, key=lambda e: e.key))
    why = "not in the recipe any more: its entry stays as a marker, nothing is uninstalled"
    if len(entries) > 1:
        why += " (versions recorded: " + ", ".join(sorted(e.version for e in entries)) + ")"
    return PackageChange(name, "unchanged", hi.version, None, (), why)


# --------------------------------------------------------------------------------------------
# per-node


def _owed_for(pkg: Package, inflight: InFlight | None, owed: Interrupt | None) -> Interrupt | None:
    if inflight is None or owed is None:
        return None
    if inflight.interruptPackages:
        return owed if pkg.name in inflight.interruptPackages else None
    return owed if pkg.interrupt is not None else None


def diff_node(recipe: Recipe, node: NodeInfo) -> NodeDiff:
    """Decide every package of ``recipe`` on ``node`` from its annotations.

    Returns a :class:`NodeDiff`; a malformed state annotation gives ``state_error`` and no
    changes (the planner skips the node and warns) rather than guessing.
    """
    ann = node.annotations
    problems: list[str] = []
    void = of_another_machine(ann, recipe.name, node.uid)
    if void:  # another machine's records: the node is planned from scratch
        gone = set(recipe_keys(recipe.name))
        ann = {k: v for k, v in ann.items() if k not in gone}
    inflight_text = ann.get(inflight_key(recipe.name))
    inflight: InFlight | None = parse_model(InFlight, inflight_text)
    if inflight_text and inflight is None:
        problems.append(f"annotation {inflight_key(recipe.name)} is malformed and was ignored")
    owed = interrupt_from_record(inflight.interrupt) if inflight is not None else None
    if inflight is not None and inflight.interrupt and owed is None:
        problems.append(f"annotation {inflight_key(recipe.name)} has an unreadable interrupt; ignored")
    failure_text = ann.get(failure_key(recipe.name))
    failure: FailureRecord | None = parse_model(FailureRecord, failure_text)
    ours = holds_claim(ann, recipe.name, node.uid)
    try:
        state, source, imported = read_state(recipe.name, ann, node=node.name)
    except NodeStateError as err:
        return NodeDiff(
            node.name,
            (),
            inflight=inflight,
            owed_interrupt=owed,
            cordoned_by_us=ours,
            failure=failure,
            state_error=str(err),
            problems=tuple(problems),
            void=void,
        )
    digests_text = ann.get(config_key(recipe.name))
    digests = parse_config_digests(digests_text)
    if digests_text and not digests and digests_text.strip() not in ("{}", ""):
        problems.append(f"annotation {config_key(recipe.name)} is malformed: config treated as unchanged")
    if imported:
        digests = {}
    by_name: dict[str, list[PackageState]] = {}
    for entry in state.values():
        by_name.setdefault(entry.name, []).append(entry)
    changes: list[PackageChange] = []
    for name in sorted(set(recipe.packages) | set(by_name)):
        pkg = recipe.packages.get(name)
        if pkg is None:
            changes.append(diff_removed(name, by_name[name]))
        else:
            changes.append(
                diff_package(
                    pkg,
                    by_name.get(name, []),
                    digests.get(name),
                    owed=_owed_for(pkg, inflight, owed),
                    imported=imported,
                )
            )
    return NodeDiff(
        node.name,
        tuple(changes),
        imported=imported,
        state_source=source,
        inflight=inflight,
        owed_interrupt=owed,
        cordoned_by_us=ours,
        failure=failure,
        problems=tuple(problems),
        void=void,
    )
