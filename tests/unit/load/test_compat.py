"""NodeWright / Skyhook custom resources (semantics-nodewright.md §1.1) → Recipe."""

from __future__ import annotations

import pytest

from reconciler.load import load_inputs, policy_for
from reconciler.model.policy import Budget
from reconciler.model.recipe import Interrupt
from reconciler.model.selector import LabelSelector, Toleration

SKYHOOK = """\
apiVersion: {api}
kind: {kind}
metadata:
  name: gpu-host-setup
  namespace: skyhook
  uid: 0b5c6a8e-0000-0000-0000-000000000000
  annotations:
    skyhook.nvidia.com/pause: "false"
    reconciler.nodewright.dev/version: "2026.11.2"
spec:
  nodeSelectors: {{matchLabels: {{pool: gpu}}}}
  podNonInterruptLabels: {{matchLabels: {{critical: "true"}}}}
  interruptionBudget: {{count: 2}}
  deploymentPolicyOptions: {{resetBatchStateOnCompletion: false}}
  priority: 100
  sequencing: all
  serial: true
  runtimeRequired: true
  autoTaintNewNodes: true
  additionalTolerations: [{{key: nvidia.com/gpu, operator: Exists}}]
  packages:
    base-tools:
      version: 1.0.0
      image: ghcr.io/nvidia/skyhook-packages/shellscript
      configMap:
        apply.sh: "#!/bin/bash\\necho ok > /etc/base-tools"
    tuning:
      version: 1.1.4
      image: ghcr.io/nvidia/skyhook-packages/tuning:1.1.4
      agentImageOverride: ghcr.io/nvidia/skyhook/agent:6.4.1
      dependsOn: {{base-tools: 1.0.0}}
      interrupt: {{type: reboot}}
      configInterrupts:
        "sysctl*": {{type: restartAllServices}}
        "service_*.conf": {{type: service, services: [containerd]}}
      configMap:
        sysctl.conf: "vm.max_map_count=262144"
        service_containerd.conf: "[Service]\\nLimitNOFILE=1048576"
      env: [{{name: LOG_LEVEL, value: debug}}]
      resources: {{cpuRequest: 100m, cpuLimit: 1, memoryRequest: 64Mi, memoryLimit: 256Mi}}
      gracefulShutdown: 60s
      uninstall: {{enabled: true, apply: false}}
status:
  status: complete
  observedGeneration: 3
"""


@pytest.mark.parametrize(
    ("api", "kind"), [("nodewright.nvidia.com/v1alpha1", "NodeWright"), ("skyhook.nvidia.com/v1alpha1", "Skyhook")]
)
def test_custom_resource_converts_to_recipe(write, api, kind):
    path = write("cr.yaml", SKYHOOK.format(api=api, kind=kind))
    inputs = load_inputs([path])
    (r,) = inputs.recipes
    assert (r.name, r.version, r.origin, r.source) == ("gpu-host-setup", "2026.11.2", kind, path)
    assert r.nodeSelector == LabelSelector(matchLabels={"pool": "gpu"})
    assert r.podNonInterruptLabels == LabelSelector(matchLabels={"critical": "true"})
    assert r.interruptionBudget == Budget(count=2) and r.deploymentPolicy is None
    assert (r.priority, r.sequencing, r.runtimeRequired, r.autoTaintNewNodes) == (100, "all", True, True)
    assert r.additionalTolerations == (Toleration(key="nvidia.com/gpu", operator="Exists"),)
    tuning = r.packages["tuning"]
    assert tuning.image == "ghcr.io/nvidia/skyhook-packages/tuning"
    assert tuning.agentImageOverride == "ghcr.io/nvidia/skyhook/agent:6.4.1"
    assert tuning.configInterrupts["service_*.conf"] == Interrupt(type="service", services=("containerd",))
    assert tuning.resources is not None and tuning.resources.cpuLimit == "1"  # YAML number → quantity string
    assert tuning.uninstall is not None and tuning.uninstall.enabled
    # deploymentPolicyOptions.resetBatchStateOnCompletion overrides the (legacy) policy's flag.
    pol = policy_for(r, inputs)
    assert pol.name == "legacy" and pol.default.budget == Budget(count=2)
    assert pol.resetBatchStateOnCompletion is False


def test_version_defaults_to_empty_and_empty_budget_means_unset(write):
    path = write(
        "cr.yaml",
        """
        apiVersion: nodewright.nvidia.com/v1alpha1
        kind: NodeWright
        metadata: {name: tuning}
        spec:
          interruptionBudget: {percent: null, count: null}
          packages:
            tuned: {version: 0.3.2, image: ghcr.io/nvidia/nodewright-packages/nvidia-tuned}
        """,
    )
    inputs = load_inputs([path])
    (r,) = inputs.recipes
    assert r.version == "" and r.interruptionBudget is None
    assert policy_for(r, inputs).default.budget == Budget(percent=100)


@pytest.mark.parametrize(
    ("spec_line", "message", "field"),
    [
        ("  drain: {timeoutSeconds: 5}", "unknown field 'drain' in NodeWright spec", "spec.drain"),
        ("  nodeSelector: {matchLabels: {a: b}}", "did you mean 'nodeSelectors'?", "spec.nodeSelector"),
        ("  serial: maybe", "serial must be true or false", "spec.serial"),
        ("  deploymentPolicyOptions: {reset: true}", "unknown field 'reset'", "spec.deploymentPolicyOptions.reset"),
        ("  interruptionBudget: {count: 0}", "a policy that can never finish", "spec.interruptionBudget.count"),
        ("  nodeSelectors: {matchLabels: {a: b}, bogus: 1}", "unknown field 'bogus'", "spec.nodeSelectors.bogus"),
    ],
)
def test_custom_resource_rejections(write, fail, spec_line, message, field):
    text = (
        "apiVersion: nodewright.nvidia.com/v1alpha1\nkind: NodeWright\nmetadata: {name: t}\nspec:\n"
        + spec_line
        + "\n  packages: {tools: {version: 1.0.0, image: x/tools}}\n"
    )
    path = write("cr.yaml", text)
    errors = fail([path])
    hits = [e for e in errors if e.field == field]
    assert hits and message in hits[0].message, [str(e) for e in errors]
    assert str(hits[0]).startswith(f"{path}:5:")


def test_kind_in_wrong_group_names_the_right_one(write, fail):
    path = write("cr.yaml", "apiVersion: skyhook.nvidia.com/v1alpha1\nkind: NodeWright\nmetadata: {name: t}\n")
    (err,) = fail([path])
    assert str(err) == (
        f"{path}:1:1: apiVersion: kind NodeWright needs apiVersion nodewright.nvidia.com/v1alpha1, "
        "found 'skyhook.nvidia.com/v1alpha1'"
    )


def test_unknown_kind_names_the_accepted_ones(write, fail):
    path = write("x.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    (err,) = fail([path])
    assert err.pos is not None and err.pos.line == 2
    for accepted in (
        "NodeRecipe (reconciler.nodewright.dev/v1alpha1)",
        "NodeWright (nodewright.nvidia.com/v1alpha1)",
        "Skyhook (skyhook.nvidia.com/v1alpha1)",
        "DeploymentPolicy (reconciler.nodewright.dev/v1alpha1, nodewright.nvidia.com/v1alpha1, "
        "skyhook.nvidia.com/v1alpha1)",
        "RecipeResult (aicr.run/v1alpha1",
    ):
        assert accepted in err.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "kind: NodeRecipe\nmetadata: {name: a}\n",
            "kind NodeRecipe needs apiVersion reconciler.nodewright.dev/v1alpha1, found None",
        ),
        ("apiVersion: v1\nmetadata: {name: a}\n", "missing kind; accepted:"),
        ("metadata: {name: a}\n", "missing apiVersion and kind"),
        ("- a\n- b\n", "a document must be a mapping with apiVersion and kind, found a list"),
    ],
)
def test_documents_without_kind_are_rejected(write, fail, text, message):
    (err,) = fail([write("x.yaml", text)])
    assert message in err.message and err.pos is not None and err.pos.line == 1
