"""The shipped image on its documented path, against the real control plane (issue 35).

The image archive built by scripts/build-image is unpacked (tests/deploy/test_image.py's
``image`` fixture) and its own entrypoint is run the way the chart's pods run it: the command and
arguments are taken from the rendered chart (the controller Deployment, the pipeline Job), the
root file system is read-only with /tmp an emptyDir, the user is the image's non-root user, and
the API server is reached *in cluster* — ``KUBERNETES_SERVICE_HOST``/``PORT`` and the
ServiceAccount token, CA and namespace under ``/var/run/secrets/kubernetes.io/serviceaccount``,
as the kubelet projects them — with a token of the chart's ServiceAccount (exactly its RBAC).

* ``controller --once`` (the Deployment's arguments) rolls out a NodeRecipe object;
* the pipeline Job's ``apply`` rolls out a recipe file mounted at ``/inputs/recipes``;
* ``plan`` and ``status`` read the cluster.

A library or file the image lacks (a C++ runtime an extension needs, a CA bundle, a module)
fails here: the image tests of tests/deploy only run ``version``, ``validate`` and a simulated
plan, which import less.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from kubernetes import client
from kubernetes.dynamic import DynamicClient

from tests.deploy.test_image import Image, run_in_image
from tests.deploy.test_image import image as image  # the fixture, requested by name
from tests.e2e.test_chart_e2e import NS, apply, render
from tests.e2e.test_chart_e2e import chart_applied as chart_applied  # the fixture, requested by name
from tests.e2e.test_controller_e2e import GROUP, PLURAL, VERSION, _complete, _kstatus, recipe_object

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.fixture(scope="module")
def in_cluster(controlplane: Any, api: Any, request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """The environment and the ServiceAccount volume a pod of the chart gets: a token of the
    chart's ServiceAccount (TokenRequest), the cluster's CA and the namespace."""
    request.getfixturevalue("chart_applied")
    tok = client.CoreV1Api(api).create_namespaced_service_account_token(
        "node-reconciler", NS, {"spec": {"expirationSeconds": 7200}})
    sa = tmp_path_factory.mktemp("serviceaccount")
    (sa / "token").write_text(tok.status.token)
    (sa / "ca.crt").write_bytes(Path(controlplane.ca_file).read_bytes())
    (sa / "namespace").write_text(NS)
    sa.chmod(0o755)  # a bound directory keeps its mode: the image's user must enter it
    url = urlparse(controlplane.server)
    env = {"KUBERNETES_SERVICE_HOST": str(url.hostname), "KUBERNETES_SERVICE_PORT": str(url.port)}
    return env, sa


def _container(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    doc = next(d for d in docs if d["kind"] == kind)
    spec = doc["spec"]["template"]["spec"]
    return dict(spec["containers"][0])


def _run(img: Image, pod: tuple[dict[str, str], Path], container: dict[str, Any], extra: list[str] | None = None,
         *, mounts: dict[str, Path] | None = None, name: str = "") -> Any:
    """``container`` (command/args as the chart renders them, its literal env) run in the image as
    its pod would run it, plus ``extra`` arguments; prints the time taken."""
    env, sa = pod
    literal = {e["name"]: str(e["value"]) for e in container.get("env", []) if "value" in e}
    env = {**env, **literal, "POD_NAME": name or "image-e2e", "POD_NAMESPACE": NS}
    argv = [*container.get("args", []), *(extra or [])]
    t = time.monotonic()
    cp = run_in_image(img, argv, entrypoint=container.get("command"), env=env,
                      mounts={SA_DIR: sa, **(mounts or {})})
    print(f"\nimage: {' '.join((container.get('command') or ['reconciler'])[:1] + argv[:2])}... "
          f"exit {cp.returncode} in {time.monotonic() - t:.1f} s")
    return cp


def test_the_images_entrypoint_runs_the_controller_apply_plan_and_status_in_cluster(
        image: Image, in_cluster: Any, api: Any, make_nodes: Any, test_id: str, tmp_path: Path) -> None:
    dyn = DynamicClient(api)
    nodes = make_nodes(2)
    t0 = time.monotonic()
    # the controller Deployment, one pass (--once): a NodeRecipe object rolled out and Current
    controller = _container(render("--set", "controller.replicas=1"), "Deployment")
    assert controller["args"][0] == "controller" and "command" not in controller
    obj = f"img-{test_id[-4:]}"
    apply(dyn, recipe_object(obj, test_id, budget=2, runtime_required=False))
    try:
        cp = _run(image, in_cluster, controller, ["--once"], name="node-reconciler-controller-0")
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert sorted(_complete(api, nodes, obj)) == sorted(nodes), cp.stderr[-3000:]
        assert _kstatus(api, obj) == "Current"
    finally:
        with contextlib.suppress(Exception):
            client.CustomObjectsApi(api).delete_cluster_custom_object(GROUP, VERSION, PLURAL, obj)

    # the pipeline Job: `reconciler apply` on the recipe files of a mounted volume
    job = _container(render("--set", "controller.enabled=false", "--set", "recipeSource.type=directory",
                            "--set", "pipeline.mode=job", "--set", "clusterName=e2e"), "Job")
    recipes = tmp_path / "recipes"
    recipes.mkdir(mode=0o755)
    name = f"imgf-{test_id[-4:]}"
    doc = recipe_object(name, test_id, budget=2, runtime_required=False)
    doc["metadata"] = {"name": name, "version": "2026.12.1"}
    (recipes / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    mount = {"/inputs/recipes": recipes}
    cp = _run(image, in_cluster, job, mounts=mount)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-3000:]
    assert sorted(_complete(api, nodes, name)) == sorted(nodes), cp.stderr[-3000:]

    # plan and status against the cluster: nothing left to change, every node complete
    verb = {"command": None}
    cp = _run(image, in_cluster, verb, ["plan", "/inputs/recipes", "-o", "json"], mounts=mount)
    assert cp.returncode == 0, cp.stderr[-3000:]
    plan = json.loads(cp.stdout)  # one recipe: one plan document
    assert plan["summary"]["nodesChanging"] == 0 and plan["summary"]["nodes"] == len(nodes), plan["summary"]
    cp = _run(image, in_cluster, verb, ["status", "--recipe", name, "-o", "json"])
    assert cp.returncode == 0, cp.stderr[-3000:]
    status = json.dumps(json.loads(cp.stdout))
    assert name in status and all(n in status for n in nodes), cp.stdout[-2000:]
    assert status.count('"complete"') >= len(nodes), cp.stdout[-2000:]
    print(f"\nthe image's real path (controller --once, apply, plan, status): {time.monotonic() - t0:.1f} s")
