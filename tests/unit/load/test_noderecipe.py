"""NodeRecipe (architecture.md §3.1): what loads into which model, and every rejection with its line."""

from __future__ import annotations

import textwrap

import pytest

from reconciler.load import load_inputs
from reconciler.model.recipe import Interrupt, Resources
from reconciler.model.selector import LabelSelector, Requirement, Toleration

HEAD = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata:
  name: demo
  version: 2026.11.2
spec:
"""


def recipe(spec_body: str) -> str:
    """A NodeRecipe named ``demo`` whose ``spec`` is ``spec_body`` (written at column 0)."""
    return HEAD + textwrap.indent(textwrap.dedent(spec_body).lstrip("\n"), "  ")


FULL = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata:
  name: gpu-training-tuning
  version: 2026.11.2
spec:
  nodeSelector:
    matchLabels: {nodepool: gpu}
    matchExpressions:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}
  podNonInterruptLabels: {matchLabels: {workload: long-running-training}}
  deploymentPolicy: gpu-rollout
  runtimeRequired: true
  autoTaintNewNodes: true
  priority: 120
  sequencing: all
  additionalTolerations: [{key: nvidia.com/gpu, operator: Exists}]
  drain: {timeoutSeconds: 600, deleteEmptyDirData: true, force: false, ignoreDaemonSets: true}
  timeouts: {waitNonInterrupt: 60, reboot: 300}
  packages:
    base-tools:
      version: 1.0.0
      image: ghcr.io/nvidia/skyhook-packages/shellscript:1.0.0
      containerSHA: "@DIGEST@"
      configMap: {apply.sh: "echo ok"}
    nvidia-tuned:
      name: nvidia-tuned
      version: 0.3.2
      image: localhost:5000/nvidia/nvidia-tuned
      dependsOn: {base-tools: 1.0.0}
      interrupt: {type: reboot}
      configMap:
        intent.conf: "accelerator=h100\\n"
        sysctl.conf: "vm.max_map_count=262144"
      configInterrupts:
        "sysctl*": {type: service, services: [containerd]}
      env: [{name: LOG_LEVEL, value: debug}]
      resources: {cpuRequest: 100m, cpuLimit: 500m, memoryRequest: 64Mi, memoryLimit: 256Mi}
      gracefulShutdown: 60s
      uninstall: {enabled: true}
"""


def test_full_noderecipe_loads_into_expected_model(write, sha):
    path = write("r.yaml", FULL.replace("@DIGEST@", sha))
    inputs = load_inputs([path])
    assert inputs.files == (path,)
    (r,) = inputs.recipes
    assert (r.name, r.version, r.origin, r.source) == ("gpu-training-tuning", "2026.11.2", "NodeRecipe", path)
    assert r.nodeSelector == LabelSelector(
        matchLabels={"nodepool": "gpu"},
        matchExpressions=(Requirement(key="node.kubernetes.io/instance-type", operator="In", values=("p5.48xlarge",)),),
    )
    assert r.podNonInterruptLabels == LabelSelector(matchLabels={"workload": "long-running-training"})
    assert r.deploymentPolicy == "gpu-rollout" and r.interruptionBudget is None
    assert r.runtimeRequired and r.autoTaintNewNodes
    assert (r.priority, r.sequencing) == (120, "all")
    assert r.additionalTolerations == (Toleration(key="nvidia.com/gpu", operator="Exists"),)
    assert (r.drain.timeoutSeconds, r.drain.deleteEmptyDirData, r.drain.ignoreDaemonSets) == (600, True, True)
    assert (r.timeouts.waitNonInterrupt, r.timeouts.reboot, r.timeouts.stage) == (60, 300, 1800)
    assert list(r.packages) == ["base-tools", "nvidia-tuned"]
    base, tuned = r.packages["base-tools"], r.packages["nvidia-tuned"]
    # A tag equal to the version is stripped; a registry port is not a tag.
    assert base.image == "ghcr.io/nvidia/skyhook-packages/shellscript"
    assert base.containerSHA == sha and base.pull_ref == f"{base.image}@{sha}"
    assert tuned.image == "localhost:5000/nvidia/nvidia-tuned"
    assert tuned.pull_ref == "localhost:5000/nvidia/nvidia-tuned:0.3.2"
    assert tuned.dependsOn == {"base-tools": "1.0.0"}
    assert tuned.interrupt == Interrupt(type="reboot")
    assert tuned.configMap == {"intent.conf": "accelerator=h100\n", "sysctl.conf": "vm.max_map_count=262144"}
    assert tuned.configInterrupts == {"sysctl*": Interrupt(type="service", services=("containerd",))}
    assert tuned.env[0].name == "LOG_LEVEL" and tuned.env[0].value == "debug"
    assert tuned.resources == Resources(cpuRequest="100m", cpuLimit="500m", memoryRequest="64Mi", memoryLimit="256Mi")
    assert tuned.gracefulShutdown == "60s"
    assert tuned.uninstall is not None and tuned.uninstall.enabled and not tuned.uninstall.apply


def test_minimal_recipe_gets_model_defaults(write):
    path = write(
        "r.yaml",
        recipe(
            """
            packages:
              tools: {version: 1.0.0, image: ghcr.io/x/shellscript}
            """
        ),
    )
    (r,) = load_inputs([path]).recipes
    assert r.nodeSelector.is_empty() and r.priority == 200 and r.sequencing == "node"
    assert r.deploymentPolicy is None and r.interruptionBudget is None
    assert r.packages["tools"].name == "tools"


def test_multi_document_file_and_priority_order(write):
    doc = recipe("priority: {p}\npackages: {{}}\n")
    text = doc.replace("name: demo", "name: zeta").format(p=300) + "---\n" + doc.replace(
        "name: demo", "name: alpha"
    ).format(p=300) + "---\n" + doc.replace("name: demo", "name: first").format(p=10) + "---\n"
    path = write("multi.yaml", text)
    inputs = load_inputs([path])
    assert [r.name for r in inputs.recipes] == ["first", "alpha", "zeta"]


PKG = """
packages:
  base-tools:
    version: 1.0.0
    image: ghcr.io/nvidia/skyhook-packages/shellscript
"""

# (id, spec body with "# <-" on the line the error must point at, expected message part, field)
REJECTIONS = [
    (
        "unknown-spec-field",
        "nodeSelectors: {matchLabels: {a: b}}  # <-\n" + PKG,
        "unknown field 'nodeSelectors' in spec; did you mean 'nodeSelector'?",
        "spec.nodeSelectors",
    ),
    (
        "spec-name-is-not-a-spec-field",
        "name: sneaky  # <-\n" + PKG,
        "unknown field 'name' in spec",
        "spec.name",
    ),
    (
        "unknown-package-field",
        PKG + "    imagee: ghcr.io/typo  # <-\n",
        "unknown field 'imagee'",
        "spec.packages.base-tools.imagee",
    ),
    (
        "unknown-nested-drain-field",
        "drain:\n  timeout: 30  # <-\n" + PKG,
        "unknown field 'timeout'",
        "spec.drain.timeout",
    ),
    (
        "invalid-semver",
        "packages:\n  tools:\n    version: 1.x.3  # <-\n    image: ghcr.io/x/shellscript\n",
        "'1.x.3' is not a semantic version",
        "spec.packages.tools.version",
    ),
    (
        "version-read-as-number",
        "packages:\n  tools:\n    version: 1.0  # <-\n    image: ghcr.io/x/shellscript\n",
        'quote it ("1.0")',
        "spec.packages.tools.version",
    ),
    (
        "image-tag-differs-from-version",
        "packages:\n  tools:\n    version: 1.0.0\n    image: ghcr.io/x/shellscript:1.0.1  # <-\n",
        "image tag '1.0.1' does not match version '1.0.0'",
        "spec.packages.tools.image",
    ),
    (
        "image-with-digest",
        "packages:\n  tools:\n    version: 1.0.0\n    image: ghcr.io/x/shellscript@sha256:00  # <-\n",
        "put it in containerSHA",
        "spec.packages.tools.image",
    ),
    (
        "missing-image",
        "packages:\n  tools:  # <-\n    version: 1.0.0\n",
        "missing required field 'image'",
        "spec.packages.tools.image",
    ),
    (
        "package-name-differs-from-key",
        PKG + "    name: base  # <-\n",
        "package name 'base' must equal its key 'base-tools'",
        "spec.packages.base-tools.name",
    ),
    (
        "package-key-bad-shape",
        "packages:\n  Tools:  # <-\n    version: 1.0.0\n    image: ghcr.io/x/shellscript\n",
        "must match",
        "spec.packages.Tools.name",
    ),
    (
        "depends-on-missing-package",
        PKG + "    dependsOn:\n      kernel: 1.0.0  # <-\n",
        "dependsOn names 'kernel', which is not a package of this recipe (packages: base-tools)",
        "spec.packages.base-tools.dependsOn.kernel",
    ),
    (
        "depends-on-other-version",
        PKG
        + "  tuning:\n    version: 2.0.0\n    image: ghcr.io/x/tuning\n    dependsOn:\n      base-tools: 1.1.0  # <-\n",
        "dependsOn base-tools 1.1.0, but this recipe has base-tools at 1.0.0",
        "spec.packages.tuning.dependsOn.base-tools",
    ),
    (
        "depends-on-empty-version",
        PKG + "    dependsOn:\n      base-tools: ''  # <-\n",
        "dependsOn.base-tools needs an exact version",
        "spec.packages.base-tools.dependsOn.base-tools",
    ),
    (
        "configinterrupt-key-not-in-configmap",
        PKG + "    configMap: {apply.sh: x}\n    configInterrupts:\n      apply_check.sh: {type: reboot}  # <-\n",
        "configInterrupts key 'apply_check.sh' matches no configMap key (configMap has: apply.sh)",
        'spec.packages.base-tools.configInterrupts["apply_check.sh"]',
    ),
    (
        "configinterrupt-glob-matches-nothing",
        PKG + "    configMap: {apply.sh: x}\n    configInterrupts:\n      'sysctl*': {type: reboot}  # <-\n",
        "configInterrupts glob 'sysctl*' matches no configMap key",
        'spec.packages.base-tools.configInterrupts["sysctl*"]',
    ),
    (
        "service-interrupt-without-services",
        PKG + "    interrupt: {type: service}  # <-\n",
        "interrupt type 'service' needs at least one entry in services",
        "spec.packages.base-tools.interrupt.type",
    ),
    (
        "unknown-interrupt-type",
        PKG + "    interrupt:\n      type: kexec  # <-\n",
        "Input should be 'reboot', 'restartAllServices', 'service' or 'noop'",
        "spec.packages.base-tools.interrupt.type",
    ),
    (
        "bad-container-sha",
        PKG + "    containerSHA: sha256:abc  # <-\n",
        "must be sha256:<64 lower-case hex digits>",
        "spec.packages.base-tools.containerSHA",
    ),
    (
        "bad-graceful-shutdown",
        PKG + "    gracefulShutdown: 30  # <-\n",
        'a duration needs a unit, e.g. "30s"',
        "spec.packages.base-tools.gracefulShutdown",
    ),
    (
        "resources-incomplete",
        PKG + "    resources:  # <-\n      cpuRequest: 100m\n",
        "missing required field 'cpuLimit'",
        "spec.packages.base-tools.resources.cpuLimit",
    ),
    (
        "uninstall-apply-without-enabled",
        PKG + "    uninstall:\n      apply: true  # <-\n",
        "uninstall.apply: true requires uninstall.enabled: true",
        "spec.packages.base-tools.uninstall.apply",
    ),
    (
        "policy-and-budget",
        "deploymentPolicy: gpu-rollout  # <-\ninterruptionBudget: {count: 1}\n" + PKG,
        "deploymentPolicy and interruptionBudget are mutually exclusive",
        "spec.deploymentPolicy",
    ),
    (
        "zero-count-budget",
        "interruptionBudget:\n  count: 0  # <-\n" + PKG,
        "a policy that can never finish",
        "spec.interruptionBudget.count",
    ),
    (
        "zero-percent-budget",
        "interruptionBudget:\n  percent: 0  # <-\n" + PKG,
        "a policy that can never finish",
        "spec.interruptionBudget.percent",
    ),
    (
        "priority-zero",
        "priority: 0  # <-\n" + PKG,
        "greater than or equal to 1",
        "spec.priority",
    ),
    (
        "priority-infinite",
        "priority: .inf  # <-\n" + PKG,
        "Input should be a valid integer",
        "spec.priority",
    ),
    # numbers and booleans are taken only as themselves (no lax coercion of true, "900" or "yes")
    ("priority-bool", "priority: true  # <-\n" + PKG, "Input should be a valid integer", "spec.priority"),
    ("runtime-required-string", "runtimeRequired: \"yes\"  # <-\n" + PKG, "Input should be a valid boolean",
     "spec.runtimeRequired"),
    ("reboot-timeout-bool", "timeouts:\n    reboot: true  # <-\n" + PKG, "Input should be a valid integer",
     "spec.timeouts.reboot"),
    ("drain-timeout-string", "drain:\n    timeoutSeconds: \"900\"  # <-\n" + PKG,
     "Input should be a valid integer", "spec.drain.timeoutSeconds"),
    ("force-string", "drain:\n    force: \"yes\"  # <-\n" + PKG, "Input should be a valid boolean",
     "spec.drain.force"),
    (
        "sequencing-unknown",
        "sequencing: cluster  # <-\n" + PKG,
        "Input should be 'node' or 'all'",
        "spec.sequencing",
    ),
    (
        "selector-operator-without-values",
        "nodeSelector:\n  matchExpressions:\n    - {key: zone, operator: In}  # <-\n" + PKG,
        "operator In needs at least one value",
        "spec.nodeSelector.matchExpressions[0].operator",
    ),
    (
        "drain-timeout-absurd",
        "drain:\n  timeoutSeconds: 99999999999999999999  # <-\n" + PKG,
        "too large",
        "spec.drain.timeoutSeconds",
    ),
    (
        "gate-nothing-to-wait-for",
        "readinessGate:  # <-\n  timeout: 30m\n" + PKG,
        "readinessGate needs conditionType, labelSelector or both",
        "spec.readinessGate",
    ),
    (
        "gate-bad-condition-type",
        "readinessGate:\n  conditionType: 'GPU ready'  # <-\n" + PKG,
        "is not a condition type",
        "spec.readinessGate.conditionType",
    ),
    (
        "gate-timeout-a-number",
        "readinessGate:\n  conditionType: Validated\n  timeout: 3600  # <-\n" + PKG,
        'a duration needs a unit, e.g. "3600s"',
        "spec.readinessGate.timeout",
    ),
    (
        "gate-timeout-too-long",
        "readinessGate:\n  conditionType: Validated\n  timeout: 300h  # <-\n" + PKG,
        "longer than the 168 h allowed",
        "spec.readinessGate.timeout",
    ),
    (
        "gate-empty-selector",
        "readinessGate:\n  labelSelector: {}  # <-\n" + PKG,
        "labelSelector is empty",
        "spec.readinessGate.labelSelector",
    ),
    (
        "gate-bad-label-value",
        "readinessGate:\n  labelSelector:\n    matchLabels: {nvcre: 'not ok'}  # <-\n" + PKG,
        "is not a valid label value",
        "spec.readinessGate.labelSelector.matchLabels.nvcre",
    ),
    (
        "gate-unknown-field",
        "readinessGate:\n  conditionType: Validated\n  conditon: x  # <-\n" + PKG,
        "unknown field 'conditon'",
        "spec.readinessGate.conditon",
    ),
    (
        "packages-not-a-mapping",
        "packages:  # <-\n  - tools\n",
        "packages must be a mapping",
        "spec.packages",
    ),
    (
        "package-not-a-mapping",
        "packages:\n  tools: 1.0.0  # <-\n",
        "package 'tools' must be a mapping",
        "spec.packages.tools",
    ),
]


@pytest.mark.parametrize(("body", "message", "field"), [c[1:] for c in REJECTIONS], ids=[c[0] for c in REJECTIONS])
def test_recipe_rejection_names_file_line_and_field(write, fail, line_of, body, message, field):
    path = write("recipe.yaml", recipe(body))
    errors = fail([path])
    line = line_of(path)
    hits = [e for e in errors if e.field == field]
    assert hits, f"no error for {field}: {[str(e) for e in errors]}"
    err = hits[0]
    assert message in err.message
    assert err.pos is not None and err.pos.file == path and err.pos.line == line
    assert str(err).startswith(f"{path}:{line}:")


def test_readiness_gate_loads(write):
    path = write("recipe.yaml", recipe(textwrap.dedent("""
        readinessGate:
          conditionType: nvidia.com/gpu.validated
          labelSelector: {matchLabels: {nvcre.nvidia.com/result: pass}}
          timeout: 90m
    """) + PKG))
    r = load_inputs([path]).recipes[0]
    g = r.readinessGate
    assert g is not None and g.conditionType == "nvidia.com/gpu.validated" and g.timeout_seconds == 5400
    assert g.labelSelector == LabelSelector(matchLabels={"nvcre.nvidia.com/result": "pass"})
    assert g.describe() == "condition nvidia.com/gpu.validated=True, labels nvcre.nvidia.com/result=pass (timeout 90m)"
    plain = load_inputs([write("plain.yaml", recipe(PKG))]).recipes[0]
    assert plain.readinessGate is None and "readinessGate" not in plain.digest_dump()
    assert "readinessGate" in r.digest_dump()


def test_dependency_cycle_is_named(write, fail, line_of):
    path = write(
        "cycle.yaml",
        recipe(
            """
            packages:
              alpha:
                version: 1.0.0
                image: ghcr.io/x/a
                dependsOn: {beta: 1.0.0}   # <-
              beta:
                version: 1.0.0
                image: ghcr.io/x/b
                dependsOn: {alpha: 1.0.0}
            """
        ),
    )
    (err,) = fail([path])
    assert "dependsOn cycle: alpha -> beta -> alpha" in err.message
    assert err.pos is not None and err.pos.line == line_of(path) == 11
    assert err.field == "spec.packages.alpha.dependsOn.beta"


def test_self_dependency_is_a_cycle(write, fail):
    path = write("self.yaml", recipe("packages:\n  alpha: {version: 1.0.0, image: x/a, dependsOn: {alpha: 1.0.0}}\n"))
    (err,) = fail([path])
    assert "dependsOn cycle: alpha -> alpha" in err.message


def test_duplicate_package_key_is_rejected_with_both_lines(write, fail):
    path = write(
        "dup.yaml",
        recipe(
            """
            packages:
              tuning: {version: 1.0.0, image: x/tuning}
              tuning: {version: 1.1.0, image: x/tuning}
            """
        ),
    )
    (err,) = fail([path])
    assert str(err).startswith(f"{path}:9:5:")
    assert "duplicate key 'tuning' (first defined at line 8)" in err.message


def test_every_error_of_a_file_is_reported(write, fail):
    path = write(
        "many.yaml",
        recipe(
            """
            priority: 0
            packages:
              alpha: {version: nope, image: x/a}
              beta: {version: 1.0.0, image: x/b, bogus: 1}
            """
        ),
    )
    errors = fail([path])
    assert sorted(e.field for e in errors) == [
        "spec.packages.alpha.version",
        "spec.packages.beta.bogus",
        "spec.priority",
    ]
    assert [e.pos.line for e in errors if e.pos] == [7, 9, 10]


@pytest.mark.parametrize(
    ("meta", "message", "field"),
    [
        ("metadata:\n  version: 1\n", "a recipe needs metadata.name", "metadata.name"),
        ("metadata:\n  name: GPU_Tuning\n", "must be lower-case letters", "metadata.name"),
        ("metadata:\n  name: a..b\n", "DNS-1123", "metadata.name"),
        ("metadata:\n  name: a.-b\n", "DNS-1123", "metadata.name"),
        # 54 characters: reconciler.nodewright.dev/nodeState_<name> would have a 64-character name part
        ("metadata:\n  name: " + "a" * 54 + "\n", "is 54 characters; at most 53", "metadata.name"),
        ("metadata:\n  name: ok\n  version: 1.0\n", "metadata.version must be a string", "metadata.version"),
        ("metadata:\n  name: ok\n  labelz: x\n", "unknown field 'labelz' in metadata", "metadata.labelz"),
    ],
)
def test_metadata_rejections(write, fail, meta, message, field):
    text = "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\n" + meta + "spec: {}\n"
    path = write("m.yaml", text)
    errors = fail([path])
    assert any(e.field == field and message in e.message for e in errors), [str(e) for e in errors]


def test_missing_spec_and_extra_top_level_key(write, fail):
    path = write(
        "nospec.yaml",
        "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata: {name: a}\nstatuz: {}\n",
    )
    errors = fail([path])
    assert {e.field for e in errors} == {"statuz", "spec"}
    assert any("spec: is missing" in str(e) for e in errors)


LOCKED = recipe(
    """
    packages:
      pinned: {version: 1.0.0, image: x/pinned, containerSHA: "@DIGEST@"}
      unpinned:            # <-
        version: 1.0.0
        image: x/unpinned
      shorthand:
        version: "1.2"     # <- version
        image: x/shorthand
        containerSHA: "@DIGEST@"
    """
)


def test_locked_mode_requires_digest_and_exact_version(write, fail, line_of, sha):
    path = write("locked.yaml", LOCKED.replace("@DIGEST@", sha))
    assert len(load_inputs([path]).recipes) == 1  # fine when not locked
    errors = fail([path], locked=True)
    by_field = {e.field: e for e in errors}
    assert set(by_field) == {"spec.packages.unpinned", "spec.packages.shorthand.version"}
    e1 = by_field["spec.packages.unpinned"]
    assert "package 'unpinned' has no containerSHA" in e1.message
    assert e1.pos is not None and e1.pos.line == line_of(path)
    e2 = by_field["spec.packages.shorthand.version"]
    assert "package 'shorthand' version '1.2' is not exact; --locked needs X.Y.Z" in e2.message
    assert e2.pos is not None and e2.pos.line == line_of(path, "# <- version")


def test_locked_mode_accepts_prerelease_exact_versions(write, sha):
    path = write("pre.yaml", recipe(f"packages:\n  pkg: {{version: 1.2.3-rc.1, image: x/p, containerSHA: '{sha}'}}\n"))
    (r,) = load_inputs([path], locked=True).recipes
    assert r.packages["pkg"].version == "1.2.3-rc.1"
