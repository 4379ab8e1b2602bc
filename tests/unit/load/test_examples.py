"""The shipped examples (recipes/, policies/, examples/aicr/) load in locked mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.load import load_inputs, policy_for
from reconciler.model.graph import topo_order
from reconciler.model.versions import is_exact

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)
    return REPO


def test_recipes_and_policies_validate_locked(in_repo):
    inputs = load_inputs(["recipes"], locked=True)  # policies/ found next to recipes/
    assert [r.name for r in inputs.recipes] == [
        "cve-ksmbd-blacklist",
        "gpu-node-stack",
        "containerd-limits",
        "gpu-training-tuning",
    ]
    assert sorted(inputs.policies) == ["conservative", "gpu-rollout"]
    for r in inputs.recipes:
        assert r.origin == "NodeRecipe" and r.version
        policy_for(r, inputs)  # every referenced policy exists
        for p in r.packages.values():
            assert p.containerSHA and is_exact(p.version)
            assert p.image.startswith("ghcr.io/nvidia/skyhook-packages/") and ":" not in p.image


def test_examples_cover_the_documented_scenarios(in_repo):
    inputs = load_inputs(["recipes"], locked=True)
    tuning = inputs.recipe("gpu-training-tuning")
    assert tuning.packages["nvidia-tuned"].interrupt is not None
    assert tuning.packages["nvidia-tuned"].interrupt.type == "reboot"
    assert "sysctl*" in tuning.packages["nvidia-tuned"].configInterrupts
    assert tuning.podNonInterruptLabels is not None
    assert tuning.podNonInterruptLabels.matchLabels == {"workload": "long-running-training"}

    cve = inputs.recipe("cve-ksmbd-blacklist")
    (fix,) = cve.packages.values()
    assert "apply_check.sh" in fix.configMap and fix.interrupt is not None and fix.interrupt.type == "reboot"

    svc = inputs.recipe("containerd-limits")
    (pkg,) = svc.packages.values()
    assert pkg.interrupt is not None and (pkg.interrupt.type, pkg.interrupt.services) == ("service", ("containerd",))

    stack = inputs.recipe("gpu-node-stack")
    deps = {n: list(p.dependsOn) for n, p in stack.packages.items()}
    assert deps["nvidia-setup"] == ["kernel-params", "rdma-memlock"]  # the diamond's bottom
    assert topo_order(deps) == ["base-tools", "kernel-params", "rdma-memlock", "nvidia-setup"]

    rollout = inputs.policies["gpu-rollout"]
    zones = {c.name: c.selector.matchLabels["topology.kubernetes.io/zone"] for c in rollout.compartments}
    assert zones == {"us-east-1a": "us-east-1a", "us-east-1b": "us-east-1b"}
    assert {c.strategy.kind for c in rollout.compartments if c.strategy} == {"exponential", "linear"}


def test_aicr_example_loads_locked(in_repo):
    inputs = load_inputs(["examples/aicr/recipe-result.yaml"], locked=True)
    (r,) = inputs.recipes
    assert (r.name, r.origin, r.version) == ("tuning", "NodeWright", "v0.21.3")
    assert r.source.endswith("components/nodewright-customizations/manifests/tuning.yaml")
    assert list(r.packages) == ["nvidia-setup-kernel", "nvidia-tuned", "nvidia-setup-full"]
    # The directory form loads the manifest once, through the RecipeResult.
    assert [x.name for x in load_inputs(["examples/aicr"], locked=True).recipes] == ["tuning"]
