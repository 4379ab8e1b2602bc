"""AICR RecipeResult (gitops-conventions.md §1.2, §1.9-1.10): the nodewright-customizations
component's manifests become recipes; paths are confined to the RecipeResult's directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.load import load_inputs

NODEWRIGHT = """\
apiVersion: nodewright.nvidia.com/v1alpha1
kind: NodeWright
metadata:
  name: tuning
spec:
  interruptionBudget: {count: 1}
  packages:
    nvidia-tuned:
      image: ghcr.io/nvidia/nodewright-packages/nvidia-tuned
      version: "0.3.2"
      interrupt: {type: reboot}
      configMap: {intent: multiNodeTraining, accelerator: h100}
"""


def recipe_result(manifest_files: list[str], api: str = "aicr.run/v1alpha2", extra: str = "") -> str:
    files = "".join(f"      - {f}  # <- {i}\n" for i, f in enumerate(manifest_files))
    return (
        f"kind: RecipeResult\napiVersion: {api}\nmetadata:\n  version: v0.21.3\n"
        "componentRefs:\n"
        "  - name: cert-manager\n    type: Helm\n    version: v1.20.2\n"
        "  - name: nodewright-customizations\n    type: Helm\n"
        + ("    manifestFiles:\n" + files if manifest_files else "")
        + extra
        + "deploymentOrder: [cert-manager, nodewright-customizations]\n"
    )


MANIFEST = "components/nodewright-customizations/manifests/tuning.yaml"


@pytest.mark.parametrize(
    "api",
    [
        "aicr.run/v1alpha1",
        "aicr.run/v1alpha2",
        "aicr.run/v1alpha3",
        "aicr.run/v1beta1",
        "aicr.run/v1beta2",
        "aicr.run/v1",
        "aicr.nvidia.com/v1alpha1",
    ],
)
def test_manifest_files_load_for_every_accepted_api_version(write, api):
    manifest = write(f"bundle/{MANIFEST}", NODEWRIGHT)
    rr = write("bundle/recipe.yaml", recipe_result([MANIFEST], api))
    inputs = load_inputs([rr])
    (r,) = inputs.recipes
    assert (r.name, r.origin, r.version, r.source) == ("tuning", "NodeWright", "v0.21.3", manifest)
    assert r.packages["nvidia-tuned"].version == "0.3.2"
    assert inputs.files == (rr, manifest)
    # Positions of AICR recipes point into the manifest file.
    assert inputs.locate("tuning", ("spec", "packages", "nvidia-tuned", "version")).line == 10


def test_annotation_version_wins_over_aicr_version(write):
    write(
        f"b/{MANIFEST}",
        NODEWRIGHT.replace(
            "  name: tuning\n", "  name: tuning\n  annotations: {reconciler.nodewright.dev/version: '7'}\n"
        ),
    )
    (r,) = load_inputs([write("b/recipe.yaml", recipe_result([MANIFEST]))]).recipes
    assert r.version == "7"


def test_the_old_release_annotation_is_refused_with_its_new_name(write):
    """One release annotation everywhere (NodeRecipe objects and NodeWright/Skyhook resources):
    the pre-0.1 name is an error naming the new one, never silently ignored."""
    write(
        f"b/{MANIFEST}",
        NODEWRIGHT.replace(
            "  name: tuning\n", "  name: tuning\n  annotations: {reconciler.nodewright.dev/recipe-version: '7'}\n"
        ),
    )
    with pytest.raises(InputError) as e:
        load_inputs([write("b/recipe.yaml", recipe_result([MANIFEST]))])
    text = str(e.value)
    assert "recipe-version was renamed reconciler.nodewright.dev/version" in text and MANIFEST in text


def test_other_kinds_in_manifests_are_ignored_and_policies_loaded(write):
    write(
        f"b/{MANIFEST}",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: nodewright}\n---\n"
        + NODEWRIGHT.replace("interruptionBudget: {count: 1}", "deploymentPolicy: zonal")
        + "---\napiVersion: nodewright.nvidia.com/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: zonal}\n"
        "spec: {default: {budget: {percent: 20}}}\n",
    )
    inputs = load_inputs([write("b/recipe.yaml", recipe_result([MANIFEST]))])
    assert [r.name for r in inputs.recipes] == ["tuning"]
    assert list(inputs.policies) == ["zonal"]


def test_inline_manifests_are_accepted(write):
    inline = "    manifests:\n" + "".join("      " + line + "\n" if line else "\n" for line in [
        "- apiVersion: skyhook.nvidia.com/v1alpha1",
        "  kind: Skyhook",
        "  metadata: {name: inline-tuning}",
        "  spec:",
        "    packages:",
        "      tuned: {version: 0.3.2, image: ghcr.io/nvidia/skyhook-packages/nvidia-tuned}",
        "- apiVersion: v1",
        "  kind: ConfigMap",
        "  metadata: {name: ignored}",
    ])
    path = write("b/recipe.yaml", recipe_result([], extra=inline))
    inputs = load_inputs([path])
    (r,) = inputs.recipes
    assert (r.name, r.origin, r.version, r.source) == ("inline-tuning", "Skyhook", "v0.21.3", path)
    assert inputs.locate("inline-tuning", ("spec", "packages", "tuned")).line == 17


def test_inline_manifest_errors_point_into_the_recipe_result(write, fail):
    inline = (
        "    manifests:\n"
        "      - apiVersion: nodewright.nvidia.com/v1alpha1\n"
        "        kind: NodeWright\n"
        "        metadata: {name: x}\n"
        "        spec:\n"
        "          packages:\n"
        "            tuned: {version: nope, image: x/tuned}\n"
    )
    path = write("b/recipe.yaml", recipe_result([], extra=inline))
    (err,) = fail([path])
    assert err.field == "spec.packages.tuned.version"
    assert str(err).startswith(f"{path}:17:")


def test_disabled_component_is_skipped(write):
    extra = "    overrides: {enabled: false}\n"
    write(f"b/{MANIFEST}", NODEWRIGHT)
    assert load_inputs([write("b/recipe.yaml", recipe_result([MANIFEST], extra=extra))]).recipes == ()


def test_directory_with_recipe_result_loads_manifest_once(write, tmp_path: Path):
    write(f"b/{MANIFEST}", NODEWRIGHT)
    write("b/recipe.yaml", recipe_result([MANIFEST]))
    inputs = load_inputs([str(tmp_path / "b")])
    assert [r.name for r in inputs.recipes] == ["tuning"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("/etc/passwd", "is absolute; paths are relative to the RecipeResult's directory"),
        ("../outside.yaml", "uses '..' to leave the RecipeResult's directory"),
        ("components/../../outside.yaml", "uses '..' to leave the RecipeResult's directory"),
        ("components/missing.yaml", "does not exist"),
    ],
)
def test_manifest_paths_are_confined(write, fail, line_of, entry, message):
    write("outside.yaml", NODEWRIGHT)
    path = write("b/recipe.yaml", recipe_result([entry]))
    (err,) = fail([path])
    assert message in err.message
    assert err.field == "componentRefs[1].manifestFiles[0]"
    assert str(err).startswith(f"{path}:{line_of(path, '# <- 0')}:")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: os.makedirs(d / "components" / "tuning.yaml"), "components/tuning.yaml: is a directory, not a file"),
        (lambda d: (os.makedirs(d / "components"), os.symlink("tuning.yaml", d / "components" / "tuning.yaml")),
         "components/tuning.yaml: symlink loop: too many levels of symbolic links (ELOOP)"),
        (lambda d: (os.makedirs(d / "components"), os.symlink("gone.yaml", d / "components" / "tuning.yaml")),
         "components/tuning.yaml: broken symlink: its target 'gone.yaml' does not exist"),
    ],
    ids=["directory", "symlink-loop", "broken-symlink"],
)
def test_manifest_entry_that_is_not_a_file_says_what_it_is(write, fail, line_of, tmp_path: Path, make, message):
    # it used to say "does not exist" for each of these
    make(tmp_path / "b")
    path = write("b/recipe.yaml", recipe_result(["components/tuning.yaml"]))
    (err,) = fail([path])
    assert err.message.endswith(message), err.message
    assert "does not exist" not in err.message or "broken symlink" in err.message
    assert err.field == "componentRefs[1].manifestFiles[0]"
    assert err.pos is not None and err.pos.line == line_of(path, "# <- 0")


def test_symlink_escaping_the_directory_is_rejected(write, fail, line_of, tmp_path: Path):
    outside = write("secret/tuning.yaml", NODEWRIGHT)
    os.makedirs(tmp_path / "b" / "components")
    os.symlink(outside, tmp_path / "b" / "components" / "tuning.yaml")
    path = write("b/recipe.yaml", recipe_result(["components/tuning.yaml"]))
    (err,) = fail([path])
    assert "resolves outside the RecipeResult's directory (symlink)" in err.message
    assert err.pos is not None and err.pos.line == line_of(path, "# <- 0")


def test_symlink_inside_the_directory_is_fine(write, tmp_path: Path):
    real = write(f"b/{MANIFEST}", NODEWRIGHT)
    os.symlink(real, tmp_path / "b" / "link.yaml")
    (r,) = load_inputs([write("b/recipe.yaml", recipe_result(["link.yaml"]))]).recipes
    assert r.name == "tuning"


def test_unrendered_helm_template_is_rejected(write, fail):
    manifest = write(
        f"b/{MANIFEST}",
        NODEWRIGHT.replace("accelerator: h100}", "accelerator: {{ $cust.accelerator }}}"),
    )
    rr = write("b/recipe.yaml", recipe_result([MANIFEST]))
    (err,) = fail([rr])
    assert "render it first (aicr bundle)" in err.message
    assert err.pos is not None and (err.pos.file, err.pos.line) == (manifest, 12)
    assert f"referenced at {rr}:" in err.message


def test_unrendered_template_in_inline_manifest_is_rejected(write, fail):
    inline = (
        "    manifests:\n"
        "      - apiVersion: nodewright.nvidia.com/v1alpha1\n"
        "        kind: NodeWright\n"
        "        metadata: {name: '{{ .Release.Name }}'}\n"
    )
    path = write("b/recipe.yaml", recipe_result([], extra=inline))
    (err,) = fail([path])
    assert "render it first (aicr bundle)" in err.message
    assert err.field == "metadata.name" and str(err).startswith(f"{path}:14:")


def test_known_kind_with_unknown_version_in_manifest_is_an_error(write, fail):
    write(f"b/{MANIFEST}", NODEWRIGHT.replace("nodewright.nvidia.com/v1alpha1", "nodewright.nvidia.com/v1beta1"))
    (err,) = fail([write("b/recipe.yaml", recipe_result([MANIFEST]))])
    assert "kind NodeWright needs apiVersion nodewright.nvidia.com/v1alpha1" in err.message


@pytest.mark.parametrize("api", ["aicr.nvidia.com/v1beta1", "aicr.run/v2", ""])
def test_unknown_recipe_result_version_is_rejected(write, fail, api):
    path = write("recipe.yaml", recipe_result([], api=api))
    (err,) = fail([path])
    assert "kind RecipeResult needs apiVersion aicr.run/v1alpha1 or" in err.message
    assert "regenerate it with a current aicr" in err.message
    assert err.pos is not None and err.pos.line == 2
