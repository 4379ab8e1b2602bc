"""diff: per (node, package) action, stages, interrupt and reason from the recorded node state."""

from __future__ import annotations

import pytest

from reconciler.diff import (
    ConfigChange,
    config_changes,
    config_digest,
    config_interrupt,
    diff_node,
    diff_package,
    diff_removed,
    read_state,
)
from reconciler.model.nodestate import ConfigDigest, config_key, dump_config_digests, inflight_key, state_key
from reconciler.model.recipe import Interrupt, Resources
from reconciler.testing import as_interrupt, entry, inflight, node, package, recipe

REBOOT = Interrupt(type="reboot")


# ------------------------------------------------------------------------------ action kinds

ACTION_CASES = [
    # id, spec version, recorded entries [(version, stage, state)], action, from, stages
    ("install-fresh", "1.0.0", [], "install", None, ("apply", "config")),
    ("upgrade", "1.1.0", [("1.0.0", "config", "complete")], "upgrade", "1.0.0", ("upgrade", "config")),
    ("downgrade", "1.0.0", [("1.1.0", "config", "complete")], "downgrade", "1.1.0", ("uninstall", "apply", "config")),
    ("unchanged", "1.0.0", [("1.0.0", "config", "complete")], "unchanged", "1.0.0", ()),
    ("unchanged-after-interrupt", "1.0.0", [("1.0.0", "post-interrupt", "complete")], "unchanged", "1.0.0", ()),
    # upgrade from an erroring old version still upgrades
    ("upgrade-from-erroring", "2.0.0", [("1.0.0", "apply", "erroring")], "upgrade", "1.0.0", ("upgrade", "config")),
    # several old versions recorded: compare with the highest
    (
        "downgrade-highest-wins",
        "1.5.0",
        [("1.0.0", "config", "complete"), ("2.0.0", "config", "complete")],
        "downgrade",
        "2.0.0",
        ("uninstall", "apply", "config"),
    ),
]


@pytest.mark.parametrize(
    ("spec", "entries", "action", "from_", "stages"),
    [c[1:] for c in ACTION_CASES],
    ids=[c[0] for c in ACTION_CASES],
)
def test_action_kinds(spec, entries, action, from_, stages):
    pkg = package("tuned", spec)
    recorded = [entry("tuned", v, st, s) for v, st, s in entries]
    digest = config_digest(pkg) if entries else None
    ch = diff_package(pkg, recorded, digest)
    assert (ch.action, ch.from_, ch.stages) == (action, from_, stages)
    assert ch.to == spec
    assert ch.reason


def test_a_package_no_longer_in_the_recipe_stays_as_a_marker():
    """Issue 34, item 9: nothing runs for a removed package (NodeWright HEAD); v0.15 uninstalled it."""
    ch = diff_removed("old-agent", [entry("old-agent", "2.0.0", "config", "complete")])
    assert (ch.action, ch.from_, ch.to, ch.stages) == ("unchanged", "2.0.0", None, ())
    assert ch.interrupt is None and not ch.changing
    assert "not in the recipe" in ch.reason and "marker" in ch.reason


def test_a_removed_package_lists_every_recorded_version():
    ch = diff_removed(
        "old-agent",
        [entry("old-agent", "2.0.0", "uninstall", "erroring", restarts=2), entry("old-agent", "1.0.0")],
    )
    assert ch.from_ == "2.0.0" and not ch.changing
    assert "1.0.0, 2.0.0" in ch.reason


def test_explicit_uninstall_apply():
    pkg = package("tuned", "1.0.0", interrupt="reboot", uninstall=True)
    ch = diff_package(pkg, [entry("tuned", "1.0.0", "post-interrupt")], config_digest(pkg))
    assert (ch.action, ch.stages, ch.to) == ("uninstall", ("uninstall",), None)
    assert ch.interrupt == REBOOT  # NodeWright uninstall-interrupt; no post-interrupt stage
    gone = diff_package(pkg, [], None)
    assert gone.action == "unchanged" and "uninstalled" in gone.reason


# ------------------------------------------------------------------------------ versions

VERSION_CASES = [
    ("v-prefix-equal", "v1.2.3", "1.2.3", "unchanged"),
    ("v-prefix-spec", "1.2.3", "v1.2.3", "unchanged"),
    ("build-metadata-ignored", "1.0.0+build.1", "1.0.0+build.2", "unchanged"),
    ("shorthand", "1.2", "1.2.0", "unchanged"),
    ("prerelease-to-release", "1.0.0-rc.1", "1.0.0", "upgrade"),
    ("release-to-prerelease", "1.0.0", "1.0.0-rc.2", "downgrade"),
    ("prerelease-order", "1.0.0-alpha.1", "1.0.0-beta", "upgrade"),
    ("prerelease-numeric", "1.0.0-rc.2", "1.0.0-rc.10", "upgrade"),
    ("numeric-not-lexical", "1.9.0", "1.10.0", "upgrade"),
    ("numeric-down", "1.10.0", "1.9.0", "downgrade"),
    ("major", "2.0.0", "10.0.0", "upgrade"),
]


@pytest.mark.parametrize(
    ("recorded", "spec", "action"), [c[1:] for c in VERSION_CASES], ids=[c[0] for c in VERSION_CASES]
)
def test_version_comparison(recorded, spec, action):
    pkg = package("tuned", spec)
    ch = diff_package(pkg, [entry("tuned", recorded)], config_digest(pkg))
    assert ch.action == action


# ------------------------------------------------------------------------------ reconfigure


def _configured(**kw):
    return package(
        "tuning",
        "1.1.4",
        interrupt="reboot",
        config_interrupts={"sysctl*": "restartAllServices", "service_*.conf": "service:containerd"},
        **kw,
    )


OLD_CONFIG = {"sysctl.conf": "a=1", "service_containerd.conf": "x", "notes.txt": "n"}

RECONFIGURE_CASES = [
    # id, new configMap, env, resources, changedKeys, interrupt, restartOnly
    ("sysctl-changed", {**OLD_CONFIG, "sysctl.conf": "a=2"}, None, None, ("sysctl.conf",), "restartAllServices", False),
    (
        "two-globs-merge",
        {**OLD_CONFIG, "sysctl.conf": "a=2", "service_containerd.conf": "y"},
        None,
        None,
        ("service_containerd.conf", "sysctl.conf"),
        "restartAllServices",
        False,
    ),
    (
        "service-glob",
        {**OLD_CONFIG, "service_containerd.conf": "y"},
        None,
        None,
        ("service_containerd.conf",),
        "service:containerd",
        False,
    ),
    # no configInterrupt matches → no interrupt even though interrupt: reboot is set
    ("unmatched-key-no-interrupt", {**OLD_CONFIG, "notes.txt": "m"}, None, None, ("notes.txt",), None, False),
    (
        "added-key",
        {**OLD_CONFIG, "sysctl-extra.conf": "b"},
        None,
        None,
        ("sysctl-extra.conf",),
        "restartAllServices",
        False,
    ),
    # removed keys re-run config but select no configInterrupt
    (
        "removed-key",
        {k: v for k, v in OLD_CONFIG.items() if k != "sysctl.conf"},
        None,
        None,
        (),
        None,
        False,
    ),
    ("env-only", OLD_CONFIG, {"LOG": "debug"}, None, (), None, True),
    (
        "resources-only",
        OLD_CONFIG,
        None,
        Resources(cpuRequest="1", cpuLimit="2", memoryRequest="1Gi", memoryLimit="2Gi"),
        (),
        None,
        True,
    ),
]


@pytest.mark.parametrize(
    ("config", "env", "resources", "keys", "intr", "restart_only"),
    [c[1:] for c in RECONFIGURE_CASES],
    ids=[c[0] for c in RECONFIGURE_CASES],
)
def test_reconfigure(config, env, resources, keys, intr, restart_only):
    old = _configured(config=OLD_CONFIG)
    new = _configured(config=config, env=env, resources=resources)
    ch = diff_package(new, [entry("tuning", "1.1.4", "post-interrupt")], config_digest(old))
    assert ch.action == "reconfigure"
    assert ch.from_ == ch.to == "1.1.4"
    assert ch.changed_keys == keys
    assert ch.interrupt == as_interrupt(intr)
    assert ch.restart_only is restart_only
    assert ch.stages == (("config", "post-interrupt") if intr else ("config",))


def test_unchanged_config_is_unchanged():
    pkg = _configured(config=OLD_CONFIG, env={"A": "1"})
    ch = diff_package(pkg, [entry("tuning", "1.1.4", "post-interrupt")], config_digest(pkg))
    assert ch.action == "unchanged" and not ch.changing


def test_no_recorded_digest_means_unchanged():
    pkg = _configured(config=OLD_CONFIG)
    ch = diff_package(pkg, [entry("tuning", "1.1.4", "post-interrupt")], None, imported=True)
    assert ch.action == "unchanged"
    assert "imported" in ch.reason


def test_config_digest_shape():
    pkg = package("pk", "1.0.0", config={"b": "2", "a": "1"})
    d = config_digest(pkg)
    assert list(d.configMap) == ["a", "b"]
    assert d.env == "" and d.resources == ""
    assert config_digest(pkg) == d  # stable
    assert config_digest(package("pk", "1.0.0", config={"a": "1", "b": "3"})).configMap["a"] == d.configMap["a"]
    assert config_changes(ConfigDigest(), package("pk", config={"k": "v"})) == ConfigChange(changed_keys=("k",))


def test_config_interrupt_globs_use_fnmatchcase():
    pkg = package("pk", config={"Sysctl.conf": "x", "sysctl.conf": "y"}, config_interrupts={"sysctl*": "noop"})
    assert config_interrupt(pkg, ["Sysctl.conf"]) is None
    assert config_interrupt(pkg, ["sysctl.conf"]) == Interrupt(type="noop")


# ------------------------------------------------------------------------------ resume


RESUME_CASES = [
    # id, entries (version, stage, state, restarts), digest recorded?, action, stages, interrupt
    (
        "apply-in-progress",
        [("1.0.0", "apply", "in_progress", 0)],
        False,
        "install",
        ("apply", "config", "post-interrupt"),
        "reboot",
    ),
    ("apply-complete", [("1.0.0", "apply", "complete", 0)], False, "install", ("config", "post-interrupt"), "reboot"),
    (
        "config-erroring-install",
        [("1.0.0", "config", "erroring", 3)],
        False,
        "install",
        ("config", "post-interrupt"),
        "reboot",
    ),
    # a reconfigure erroring at config: interrupt from the changed keys (none here)
    ("config-erroring-reconfigure", [("1.0.0", "config", "erroring", 1)], True, "reconfigure", ("config",), None),
    ("config-unknown", [("1.0.0", "config", "unknown", 0)], False, "install", ("config", "post-interrupt"), "reboot"),
    (
        "upgrade-in-progress",
        [("1.0.0", "upgrade", "in_progress", 0), ("0.9.0", "post-interrupt", "complete", 0)],
        True,
        "upgrade",
        ("upgrade", "config", "post-interrupt"),
        "reboot",
    ),
    (
        "upgrade-complete",
        [("1.0.0", "upgrade", "complete", 0)],
        True,
        "upgrade",
        ("config", "post-interrupt"),
        "reboot",
    ),
    (
        "post-interrupt-erroring",
        [("1.0.0", "post-interrupt", "erroring", 2)],
        True,
        "reconfigure",
        ("post-interrupt",),
        None,
    ),
    ("interrupt-complete", [("1.0.0", "interrupt", "complete", 0)], True, "reconfigure", ("post-interrupt",), None),
    (
        "interrupt-in-progress",
        [("1.0.0", "interrupt", "in_progress", 0)],
        False,
        "install",
        ("post-interrupt",),
        "reboot",
    ),
    ("skipped-interrupt", [("1.0.0", "interrupt", "skipped", 0)], False, "install", ("post-interrupt",), "reboot"),
]


@pytest.mark.parametrize(
    ("entries", "recorded", "action", "stages", "intr"),
    [c[1:] for c in RESUME_CASES],
    ids=[c[0] for c in RESUME_CASES],
)
def test_resume_continues_from_the_recorded_stage(entries, recorded, action, stages, intr):
    pkg = package("tuned", "1.0.0", interrupt="reboot")
    es = [entry("tuned", v, st, s, restarts=r) for v, st, s, r in entries]
    ch = diff_package(pkg, es, config_digest(pkg) if recorded else None)
    assert (ch.action, ch.stages, ch.interrupt) == (action, stages, as_interrupt(intr))
    assert ch.resumed and ch.reason.startswith("resume:")


def test_erroring_config_runs_only_config_and_says_how_often_it_failed():
    pkg = package("tuned", "1.0.0")
    ch = diff_package(pkg, [entry("tuned", "1.0.0", "config", "erroring", restarts=3)], None)
    assert ch.stages == ("config",)
    assert "config/erroring (3 restarts)" in ch.reason


def test_config_complete_with_interrupt_is_complete_unless_owed():
    pkg = package("tuned", "1.0.0", interrupt="reboot")
    done = diff_package(pkg, [entry("tuned", "1.0.0", "config", "complete")], config_digest(pkg))
    assert done.action == "unchanged"
    owed = diff_package(pkg, [entry("tuned", "1.0.0", "config", "complete")], config_digest(pkg), owed=REBOOT)
    assert owed.stages == ("post-interrupt",) and owed.interrupt == REBOOT
    assert "owes" in owed.reason


def test_downgrade_resumes_from_the_old_entrys_uninstall():
    pkg = package("tuned", "1.0.0")
    ch = diff_package(pkg, [entry("tuned", "2.0.0", "uninstall", "in_progress")], None)
    assert (ch.action, ch.from_, ch.stages, ch.resumed) == (
        "downgrade",
        "2.0.0",
        ("uninstall", "apply", "config"),
        True,
    )


def test_downgrade_recorded_on_the_new_key_still_resumes_as_downgrade():
    pkg = package("tuned", "1.0.0")
    es = [entry("tuned", "1.0.0", "uninstall", "in_progress"), entry("tuned", "2.0.0")]
    ch = diff_package(pkg, es, None)
    assert (ch.action, ch.from_, ch.stages) == ("downgrade", "2.0.0", ("uninstall", "apply", "config"))


def test_spec_version_being_uninstalled_is_installed_again():
    pkg = package("tuned", "1.0.0")
    ch = diff_package(pkg, [entry("tuned", "1.0.0", "uninstall", "erroring")], None)
    assert (ch.action, ch.stages) == ("install", ("apply", "config"))


def test_sha_mismatch_at_same_version_is_flagged_not_rerun():
    sha_a, sha_b = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    pkg = package("tuned", "1.0.0", sha=sha_b)
    ch = diff_package(pkg, [entry("tuned", "1.0.0", sha=sha_a)], config_digest(pkg))
    assert ch.action == "unchanged" and ch.sha_mismatch


# ------------------------------------------------------------------------------ per node


def test_diff_node_sorts_changes_and_marks_removed():
    base, tuned = package("base-tools", "1.0.0"), package("tuned", "2.0.0")
    r = recipe("gpu", base, tuned)
    n = node("n1", recipe="gpu", installed=[package("tuned", "1.0.0"), package("zzz-old", "3.0.0")])
    d = diff_node(r, n)
    assert [(c.package, c.action) for c in d.changes] == [
        ("base-tools", "install"),
        ("tuned", "upgrade"),
        ("zzz-old", "unchanged"),  # removed from the recipe: a marker (issue 34)
    ]
    assert not d.imported and d.state_source == state_key("gpu")


@pytest.mark.parametrize("prefix", ["skyhook.nvidia.com", "nodewright.nvidia.com"])
def test_import_from_nodewright_state(prefix):
    pkg = package("tuned", "1.0.0", config={"a": "1"})
    r = recipe("gpu", pkg)
    n = node("n1", recipe="gpu", installed=[package("tuned", "1.0.0", config={"a": "old"})], legacy=prefix)
    d = diff_node(r, n)
    assert d.imported and d.state_source == f"{prefix}/nodeState_gpu"
    assert d.changes[0].action == "unchanged"  # no digest: config treated as unchanged


def test_our_state_wins_over_legacy_state():
    r = recipe("gpu", package("tuned", "1.0.0"))
    ann = {
        state_key("gpu"): "{}",
        "skyhook.nvidia.com/nodeState_gpu": '{"tuned|1.0.0": {"name": "tuned", "version": "1.0.0",'
        ' "stage": "config", "state": "complete"}}',
    }
    d = diff_node(r, node("n1", annotations=ann))
    assert not d.imported and d.changes[0].action == "install"
    state, key, imported = read_state("gpu", {}, node="n1")
    assert (state, key, imported) == ({}, "", False)


def test_digest_is_ignored_for_imported_state():
    pkg = package("tuned", "1.0.0", config={"a": "1"})
    ann = {
        "nodewright.nvidia.com/nodeState_gpu": '{"tuned|1.0.0": {"name": "tuned", "version": "1.0.0",'
        ' "stage": "config", "state": "complete"}}',
        config_key("gpu"): dump_config_digests({"tuned": ConfigDigest(configMap={"a": "stale"})}),
    }
    d = diff_node(recipe("gpu", pkg), node("n1", annotations=ann))
    assert d.imported and d.changes[0].action == "unchanged"


def test_malformed_state_gives_a_state_error_and_no_changes():
    d = diff_node(recipe("gpu", package("tuned")), node("n1", annotations={state_key("gpu"): "{not json"}))
    assert d.changes == () and "not JSON" in d.state_error and "n1" in d.state_error


def test_malformed_inflight_is_a_problem_not_a_crash():
    d = diff_node(recipe("gpu", package("tuned")), node("n1", annotations={inflight_key("gpu"): "garbage"}))
    assert d.inflight is None and any("malformed" in p for p in d.problems)


def test_owed_interrupt_from_inflight_applies_to_listed_packages_only():
    a = package("a-pkg", "1.0.0", interrupt="reboot")
    b = package("b-pkg", "1.0.0", interrupt="reboot")
    r = recipe("gpu", a, b)
    n = node(
        "n1",
        recipe="gpu",
        state=[entry("a-pkg", "1.0.0", "config"), entry("b-pkg", "1.0.0", "config")],
        digests={"a-pkg": config_digest(a), "b-pkg": config_digest(b)},
        inflight=inflight("interrupt", interrupt="reboot", packages=["a-pkg"]),
        cordoned_by_us=True,
    )
    d = diff_node(r, n)
    assert d.owed_interrupt == REBOOT and d.cordoned_by_us
    by = {c.package: c for c in d.changes}
    assert by["a-pkg"].stages == ("post-interrupt",) and by["a-pkg"].interrupt == REBOOT
    assert by["b-pkg"].action == "unchanged"


def test_to_step_carries_everything_and_refuses_unchanged():
    pkg = package("tuned", "1.1.0", interrupt="reboot")
    ch = diff_package(pkg, [entry("tuned", "1.0.0")], config_digest(pkg))
    st = ch.to_step(["base"])
    assert (st.package, st.action, st.from_, st.to, st.after) == ("tuned", "upgrade", "1.0.0", "1.1.0", ("base",))
    assert st.stages == ("upgrade", "config", "post-interrupt") and st.interrupt == REBOOT
    with pytest.raises(ValueError, match="unchanged"):
        diff_package(pkg, [entry("tuned", "1.1.0", "post-interrupt")], config_digest(pkg)).to_step()
