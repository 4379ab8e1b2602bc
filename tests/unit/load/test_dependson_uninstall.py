"""A package that is being uninstalled cannot be depended on (issue #8 §3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.load import load_inputs

RECIPE = """\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {name: r}
spec:
  packages:
    base:
      version: 1.0.0
      image: ghcr.io/x/base
      uninstall: {enabled: true, apply: true}
    app:
      version: 1.0.0
      image: ghcr.io/x/app
      dependsOn: {base: 1.0.0}
"""


def test_dependent_of_an_uninstalled_package_is_refused_with_its_line(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text(RECIPE)
    with pytest.raises(InputError) as e:
        load_inputs([str(f)])
    assert f"{f}:13:" in str(e.value)
    assert "app depends on base, which this recipe uninstalls" in str(e.value)


def test_a_single_recipe_file_finds_the_policies_directory_next_to_its_folder() -> None:
    from reconciler.load import policy_for

    inputs = load_inputs(["recipes/gpu-training-tuning.yaml"])
    recipe = inputs.recipes[0]
    assert policy_for(recipe, inputs).name == recipe.deploymentPolicy == "gpu-rollout"
