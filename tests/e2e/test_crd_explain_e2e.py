"""``kubectl explain noderecipe.spec.packages`` answers from the real API server (issue 39): the
NodeRecipe CRD, installed for real, publishes every recipe field's description in the OpenAPI v3
document of its group — the document ``kubectl explain`` renders (it reads
``/openapi/v3/apis/<group>/<version>``) — and each description is the one of the recipe model."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.load import recipes as recipe_loader
from reconciler.model.recipe import DrainOptions, Package, Recipe
from tests.controlplane.cluster import ControlPlane, binaries_dir

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "charts" / "node-reconciler" / "crds" / "noderecipes.yaml"
GROUP_PATH = "apis/reconciler.nodewright.dev/v1alpha1"


def _get(api: Any, path: str) -> Any:
    """GET a server path with the admin client's credentials; the JSON body."""
    method, url, headers, body, post = api.param_serialize("GET", path, header_params={"Accept": "application/json"},
                                                          auth_settings=["BearerToken"])
    r = api.call_api(method, url, header_params=headers, body=body, post_params=post)
    r.read()
    assert r.status == 200, (path, r.status)
    return json.loads(r.data)


@pytest.fixture(scope="module")
def schema(api: Any) -> dict[str, Any]:
    """Install the NodeRecipe CRD for real and return its NodeRecipe schema as the server
    publishes it in OpenAPI v3 (published asynchronously after Established: polled)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    doc = next(d for d in YAML(typ="safe").load_all(CRD.read_text()) if d)
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(doc)
    except ApiException as e:
        if e.status != 409:
            raise
        ext.patch_custom_resource_definition(doc["metadata"]["name"], doc)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        paths = _get(api, "/openapi/v3")["paths"]
        if GROUP_PATH in paths:
            published = _get(api, paths[GROUP_PATH]["serverRelativeURL"])
            for name, s in published["components"]["schemas"].items():
                if name.endswith(".NodeRecipe") and "packages" in str(s.get("properties", {}).get("spec", {})):
                    return dict(s)
        time.sleep(0.5)
    pytest.fail("the NodeRecipe schema was not published in /openapi/v3 within 60 s")


def test_explain_noderecipe_spec_packages_prints_every_field_description(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]
    packages = spec["properties"]["packages"]
    # kubectl explain noderecipe.spec.packages: the field's description, then each package field's
    assert packages["description"] == Recipe.model_fields["packages"].description
    fields = packages["additionalProperties"]["properties"]
    assert set(fields) == set(Package.model_fields) - {"name"}
    for name, sub in fields.items():
        assert sub.get("description") and sub["description"] == Package.model_fields[name].description, name


def test_explain_noderecipe_spec_describes_every_spec_field(schema: dict[str, Any]) -> None:
    spec = schema["properties"]["spec"]
    assert set(spec["properties"]) == set(recipe_loader.SPEC_FIELDS)
    for name in recipe_loader.SPEC_FIELDS:
        described = spec["properties"][name].get("description")
        assert described and described == Recipe.model_fields[name].description, name
    drain = spec["properties"]["drain"]["properties"]
    for name, field in DrainOptions.model_fields.items():
        assert drain[name].get("description") and drain[name]["description"] == field.description, name


def test_kubectl_explain_prints_the_package_field_descriptions(schema: dict[str, Any],
                                                               controlplane: ControlPlane) -> None:
    """The literal command: ``kubectl explain noderecipe.spec.packages`` (kubectl built with the
    control plane) prints the field's description and each package field with its own."""
    out = subprocess.run(
        [str(binaries_dir() / "kubectl"), "--kubeconfig", str(controlplane.kubeconfig), "explain",
         "noderecipe.spec.packages"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    head, _, fields = out.stdout.partition("\nFIELDS:\n")
    assert " ".join(str(Recipe.model_fields["packages"].description).split()) in " ".join(head.split())
    # kubectl's layout: "  <name>\t<<type>>" then the description wrapped, indented by four
    blocks = {m.group(1): " ".join(m.group(2).split())
              for m in re.finditer(r"^  (\w+)\t<[^\n]*>[^\n]*\n((?:    [^\n]*\n?)*)", fields, re.M)}
    assert set(blocks) == set(Package.model_fields) - {"name"}
    for name, text in blocks.items():
        assert text == " ".join(str(Package.model_fields[name].description).split()), name
