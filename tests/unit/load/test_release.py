"""A NodeRecipe's release is spec.version, in files and objects alike (issue 38); the old
places (metadata.version, the reconciler.nodewright.dev/version annotation) are still read, with
one warning per form naming the converter."""

from __future__ import annotations

import pytest

from reconciler.errors import InputError
from reconciler.load import InputPaths, load_inputs, load_objects

HEAD = "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\n"
PKG = "  packages:\n    tools: {version: 1.0.0, image: ghcr.io/example/tools}\n"


def recipe(name: str, meta: str = "", spec: str = "") -> str:
    return f"{HEAD}metadata:\n  name: {name}\n{meta}spec:\n{spec}{PKG}"


def test_the_release_is_spec_version_with_no_warning(write):
    path = write("r.yaml", recipe("r", spec="  version: 2026.11.2   # <-\n"))
    inputs = load_inputs([path])
    assert inputs.recipes[0].version == "2026.11.2" and inputs.warnings == ()


@pytest.mark.parametrize(("meta", "form", "at"), [
    ("  version: 2026.11.2\n", "metadata.version", ":5:3"),
    ("  annotations: {reconciler.nodewright.dev/version: 2026.11.2}\n",
     "the annotation reconciler.nodewright.dev/version", ":5:17"),
], ids=["metadata.version", "annotation"])
def test_a_deprecated_place_is_read_with_a_warning_naming_the_converter(write, meta, form, at):
    paths = InputPaths([write("a.yaml", recipe("a", meta=meta)), write("b.yaml", recipe("b", meta=meta))])
    told: list[str] = []
    paths.warn = told.append
    inputs = load_inputs(paths)
    assert [r.version for r in inputs.recipes] == ["2026.11.2", "2026.11.2"]
    (line,) = told
    assert line == inputs.warnings[0]
    assert line.startswith(f"2 recipes give the release in {form}")
    assert f"a.yaml{at}" in line and f"b.yaml{at}" in line
    assert line.endswith("move it to spec.version with reconciler convert --write PATH...")


def test_a_warning_lists_three_places_and_counts_the_rest(write):
    paths = [write(f"r{i}.yaml", recipe(f"r{i}", meta="  version: '1'\n")) for i in range(5)]
    (line,) = load_inputs(paths).warnings
    assert line.startswith("5 recipes give") and line.count(".yaml:") == 3 and "and 2 more" in line


def test_the_same_release_given_twice_is_read_and_different_ones_are_an_error(write, fail):
    same = write("same.yaml", recipe("s", meta="  version: '1'\n", spec="  version: '1'\n"))
    assert load_inputs([same]).recipes[0].version == "1"
    path = write("twice.yaml", recipe("t", meta="  version: '1'\n", spec="  version: '2'   # <-\n"))
    (err,) = fail([path])
    assert err.field == "metadata.version" and "disagree; give the release once, in spec.version" in err.message


def test_a_release_that_is_no_string_is_refused_at_its_line(write, fail, line_of):
    path = write("n.yaml", recipe("n", spec="  version: 1.0   # <-\n"))
    (err,) = fail([path])
    assert err.field == "spec.version" and "quote it" in err.message
    assert err.pos is not None and err.pos.line == line_of(path)


def test_a_bad_release_in_spec_is_reported_at_spec_version(write, fail, line_of):
    path = write("c.yaml", recipe("c", spec="  version: \"a\\tb\"   # <-\n"))
    (err,) = fail([path])
    assert err.field == "spec.version" and err.pos is not None and err.pos.line == line_of(path)


def test_an_object_gives_its_release_in_spec_version_too():
    obj = {"apiVersion": "reconciler.nodewright.dev/v1alpha1", "kind": "NodeRecipe",
           "metadata": {"name": "o", "uid": "u", "generation": 3},
           "spec": {"version": "7", "packages": {"tools": {"version": "1.0.0", "image": "ghcr.io/example/tools"}}},
           "status": {"observedGeneration": 2}}
    inputs = load_objects([obj])
    assert inputs.recipes[0].version == "7" and inputs.warnings == ()
    obj["spec"].pop("version")
    obj["metadata"]["annotations"] = {"reconciler.nodewright.dev/version": "7"}
    inputs = load_objects([obj])
    assert inputs.recipes[0].version == "7"
    assert inputs.warnings[0].startswith("1 recipe gives the release in the annotation") and "NodeRecipe/o" in \
        inputs.warnings[0]


def test_the_spec_version_is_a_crd_field():
    from reconciler.load.crd import noderecipe_crd

    spec = noderecipe_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["version"]["type"] == "string"


def test_an_error_is_still_an_error_and_no_warning_is_printed(write):
    paths = InputPaths([write("x.yaml", recipe("x", meta="  version: '1'\n", spec="  priority: high\n"))])
    told: list[str] = []
    paths.warn = told.append
    with pytest.raises(InputError):
        load_inputs(paths)
    assert told == []
