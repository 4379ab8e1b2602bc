"""load_inputs across files and directories, cross-file rules, and policy_for."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.errors import InputError, InputErrors
from reconciler.load import Inputs, load_inputs, policy_for
from reconciler.model.policy import DEFAULT_COMPARTMENT, Budget
from reconciler.model.recipe import Recipe


def noderecipe(name: str, *, priority: int = 200, policy: str | None = None, budget: str | None = None) -> str:
    spec = f"  priority: {priority}\n"
    if policy:
        spec += f"  deploymentPolicy: {policy}  # <- policy\n"
    if budget:
        spec += f"  interruptionBudget: {budget}\n"
    return (
        "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\n"
        f"metadata:\n  name: {name}  # <- name\nspec:\n{spec}"
        "  packages:\n    tools: {version: 1.0.0, image: ghcr.io/x/shellscript}\n"
    )


def policy(name: str) -> str:
    return (
        "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: DeploymentPolicy\n"
        f"metadata:\n  name: {name}\nspec:\n  default: {{budget: {{count: 1}}}}\n"
    )


def test_directory_is_scanned_recursively_sorted_and_hidden_dirs_skipped(write, tmp_path: Path):
    b = write("repo/recipes/b.yaml", noderecipe("bravo"))
    a = write("repo/recipes/a.yml", noderecipe("alpha"))
    c = write("repo/recipes/team/c.yaml", noderecipe("charlie", priority=10))
    write("repo/recipes/.git/x.yaml", "not: [valid")
    write("repo/recipes/README.md", "# not yaml")
    inputs = load_inputs([str(tmp_path / "repo" / "recipes")])
    assert inputs.files == (a, b, c)
    assert [r.name for r in inputs.recipes] == ["charlie", "alpha", "bravo"]  # (priority, name)


def test_sibling_policies_directory_is_used_when_no_policy_paths(write, tmp_path: Path):
    write("repo/recipes/r.yaml", noderecipe("r", policy="gpu-rollout"))
    pol = write("repo/policies/gpu-rollout.yaml", policy("gpu-rollout"))
    inputs = load_inputs([str(tmp_path / "repo" / "recipes")])
    assert list(inputs.policies) == ["gpu-rollout"] and pol in inputs.files
    (r,) = inputs.recipes
    assert policy_for(r, inputs) is inputs.policies["gpu-rollout"]


def test_explicit_policy_paths_replace_the_sibling_directory(write, tmp_path: Path):
    write("repo/recipes/r.yaml", noderecipe("r", policy="other"))
    write("repo/policies/gpu-rollout.yaml", policy("gpu-rollout"))
    other = write("elsewhere/other.yaml", policy("other"))
    inputs = load_inputs([str(tmp_path / "repo" / "recipes")], [other])
    assert list(inputs.policies) == ["other"]


def test_missing_policy_is_reported_at_the_recipe_line(write, fail, line_of):
    r = write("r.yaml", noderecipe("r", policy="nope"))
    p = write("p.yaml", policy("gpu-rollout"))
    (err,) = fail([r], [p])
    assert err.field == "spec.deploymentPolicy"
    assert "deploymentPolicy 'nope' is not defined (loaded policies: gpu-rollout)" in err.message
    assert str(err).startswith(f"{r}:{line_of(r, '# <- policy')}:")


@pytest.mark.parametrize("broken", [
    policy("gpu-rollout").replace("{budget: {count: 1}}", "{budget: {count: 1}, strategy: {fixd: {}}}"),
    "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: [x]}\nspec: {}\n",
    "::: [\n",  # not YAML at all: it may have held the policy
])
def test_a_policy_that_fails_to_load_is_the_error_not_the_recipe_naming_it(write, fail, broken):
    """The recipe was told its policy "is not defined (loaded policies: none)", listed first, while
    the policy's own error (an unknown field) came second or not at all."""
    r = write("r.yaml", noderecipe("r", policy="gpu-rollout"))
    p = write("p.yaml", broken)
    errs = fail([r], [p])
    assert errs and all(e.pos is not None and e.pos.file == p for e in errs)
    assert not any("is not defined" in e.message for e in errs)


def test_a_policy_path_that_cannot_be_read_is_the_error(write, fail, tmp_path: Path):
    r = write("r.yaml", noderecipe("r", policy="gpu-rollout"))
    errs = fail([r], [str(tmp_path / "missing.yaml")])
    assert [e.pos.file if e.pos else None for e in errs] == [str(tmp_path / "missing.yaml")]


def test_a_broken_policy_of_another_name_still_leaves_the_reference_checked(write, fail):
    r = write("r.yaml", noderecipe("r", policy="nope"))
    p = write("p.yaml", policy("gpu-rollout").replace("{budget: {count: 1}}", "{budget: {count: 0.5}}"))
    errs = fail([r], [p])
    assert any("deploymentPolicy 'nope' is not defined" in e.message for e in errs)


def test_policy_reference_unchecked_when_no_policies_given_but_policy_for_raises(write, line_of):
    r = write("r.yaml", noderecipe("r", policy="gpu-rollout"))
    inputs = load_inputs([r])
    (recipe,) = inputs.recipes
    with pytest.raises(InputError) as info:
        policy_for(recipe, inputs)
    err = info.value
    assert str(err).startswith(f"{r}:{line_of(r, '# <- policy')}:3: spec.deploymentPolicy:")
    assert "pass --policy FILE" in err.message


def test_policy_for_legacy_budget(write):
    r = write("r.yaml", noderecipe("r", budget="{percent: 30}"))
    inputs = load_inputs([r])
    pol = policy_for(inputs.recipes[0], inputs)
    assert pol.name == "legacy" and pol.source == r and pol.compartments == ()
    assert pol.default.budget == Budget(percent=30) and pol.default.strategy is None
    assert DEFAULT_COMPARTMENT == "__default__"


def test_policy_for_recipe_not_from_inputs():
    rec = Recipe(name="adhoc", source="x.yaml", deploymentPolicy="p")
    with pytest.raises(InputError) as info:
        policy_for(rec, Inputs(recipes=(), policies={}, files=()))
    assert str(info.value).startswith("x.yaml: spec.deploymentPolicy: deploymentPolicy 'p' is not defined")


def test_duplicate_recipe_names_across_files(write, fail, line_of):
    first = write("a.yaml", noderecipe("same"))
    second = write("b.yaml", noderecipe("same"))
    (err,) = fail([first, second])
    line = line_of(second, "# <- name")
    assert str(err).startswith(f"{second}:{line}:3: metadata.name:")
    assert f"recipe name 'same' is already used by {first}:{line}:3" in err.message


def test_duplicate_policy_names_across_files(write, fail):
    a = write("p/a.yaml", policy("gpu"))
    b = write("p/b.yaml", policy("gpu"))
    (err,) = fail([a], [b])
    assert err.pos is not None and err.pos.file == b
    assert "policy name 'gpu' is already used by" in err.message


def test_same_file_given_twice_is_read_once(write, tmp_path: Path):
    r = write("recipes/r.yaml", noderecipe("r"))
    inputs = load_inputs([str(tmp_path / "recipes"), r])
    assert inputs.files == (r,) and len(inputs.recipes) == 1


def test_policy_paths_only_hold_policies(write, fail):
    r = write("r.yaml", noderecipe("r"))
    (err,) = fail([r], [write("p.yaml", noderecipe("x"))])
    assert "a policy file may only hold DeploymentPolicy resources (found kind 'NodeRecipe')" in err.message


def test_policies_may_also_come_from_recipe_paths(write):
    path = write("all.yaml", noderecipe("r", policy="p") + "---\n" + policy("p"))
    inputs = load_inputs([path])
    assert [r.name for r in inputs.recipes] == ["r"] and list(inputs.policies) == ["p"]


def test_errors_of_all_files_are_collected_in_file_and_line_order(write, fail):
    a = write("a.yaml", noderecipe("a").replace("version: 1.0.0", "version: x"))
    b = write("b.yaml", "broken: [\n")
    c = write("c.yaml", noderecipe("c").replace("priority: 200", "priority: 0"))
    errors = fail([c, b, a])
    assert [e.pos.file for e in errors if e.pos] == [c, b, a]
    with pytest.raises(InputErrors) as info:
        load_inputs([c, b, a])
    assert "(and 2 more)" in str(info.value)


def test_empty_directory_and_missing_path(write, fail, tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as info:
        load_inputs([str(tmp_path / "empty"), str(tmp_path / "missing")], allow_empty=False)
    errors = info.value.errors if isinstance(info.value, InputErrors) else [info.value]
    assert [e.message for e in errors] == ["directory holds no *.yaml or *.yml file", "no such file or directory"]
    # an empty set allowed (--allow-empty, or a library caller): the directory is that empty set
    assert [e.message for e in fail([str(tmp_path / "empty"), str(tmp_path / "missing")])] == [
        "no such file or directory"]


def test_a_single_string_path_is_accepted(write):
    assert len(load_inputs(write("r.yaml", noderecipe("r"))).recipes) == 1  # type: ignore[arg-type]


def test_inputs_locate_points_into_source(write, line_of):
    r = write("r.yaml", noderecipe("r"))
    inputs = load_inputs([r])
    assert inputs.locate("r", ("metadata", "name")).line == line_of(r, "# <- name")
    assert inputs.recipe("r").name == "r"
    with pytest.raises(KeyError):
        inputs.recipe("nope")
