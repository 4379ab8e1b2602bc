"""Packaging facts the deploy surfaces rely on: the license, extras named by install commands
exist, one image reference (at the package version) everywhere, the reusable workflow installs
node-reconciler by version instead of from the caller's checkout."""

from __future__ import annotations

import re
import tomllib

import pytest
from ruamel.yaml import YAML

from tests.deploy.conftest import ROOT, VERSION

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
IMAGE_REPO = "ghcr.io/nodewright/node-reconciler"
#: files that tell users how to install or deploy node-reconciler
SURFACES = sorted(
    [*ROOT.joinpath(".github").rglob("*.yml"), *ROOT.joinpath("examples").rglob("*.y*ml"),
     *ROOT.joinpath("charts").rglob("*.yaml"), *ROOT.joinpath("docs").rglob("*.md"),
     ROOT / "README.md", ROOT / "Containerfile", ROOT / ".ci" / "run", ROOT / "scripts" / "test"],
    key=str,
)


def test_license_is_the_apache_2_0_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 190
    assert PYPROJECT["project"]["license"] == {"text": "Apache-2.0"}


_PIP_EXTRA = re.compile(r"pip install[^\n]*?(?:node-reconciler|['\"]?\.|-e\s+['\"]?\.)\[([a-z0-9,_-]+)\]")


def test_every_extra_an_install_command_names_exists() -> None:
    extras = set(PYPROJECT["project"].get("optional-dependencies", {}))
    seen = []
    for path in SURFACES:
        for m in _PIP_EXTRA.finditer(path.read_text()):
            for extra in m.group(1).split(","):
                seen.append(extra)
                assert extra in extras, f"{path.relative_to(ROOT)} installs extra [{extra}], pyproject has {extras}"
    assert "dev" in seen  # the pattern finds the README's own install line


def test_one_image_reference_at_the_package_version() -> None:
    refs: dict[str, set[str]] = {}
    for path in SURFACES:
        text = path.read_text()
        assert "ghcr.io/example/node-reconciler" not in text, f"placeholder image in {path.relative_to(ROOT)}"
        # registry references (a host with a dot, not a URL, not a GitHub repository)
        for m in re.finditer(r"(?<![\w./:-])(?!github\.com/)[\w-]+\.[\w.-]+(?:/[\w.-]+)*/node-reconciler"
                             r"(?=[:@\s\"'\\;)]|$)[:@]?[\w.:-]*", text, re.M):
            refs.setdefault(m.group(0), set()).add(str(path.relative_to(ROOT)))
    assert refs, "no image reference found"
    for ref, where in refs.items():
        repo, _, tag = ref.partition(":") if "@" not in ref else (ref.split("@")[0], "", "")
        assert repo == IMAGE_REPO, (ref, where)
        if tag and tag not in ("", "<version>"):
            assert tag == VERSION, (ref, where)


@pytest.mark.parametrize("path", ["examples/github/apply.yml", ".github/workflows/plan-comment.yml"])
def test_workflows_install_node_reconciler_by_version(path: str) -> None:
    text = (ROOT / path).read_text()
    doc = YAML(typ="safe").load(text)
    runs = "\n".join(s.get("run", "") for job in doc["jobs"].values() for s in job.get("steps", []))
    installs = [line.strip() for line in runs.splitlines() if "pip install" in line]
    assert installs, path
    by_version = [i for i in installs if "git+https://github.com/" in i]
    assert by_version, f"{path} does not install node-reconciler by version: {installs}"
    if path.endswith("plan-comment.yml"):
        inputs = (doc.get("on") or doc[True])["workflow_call"]["inputs"]
        assert inputs["version"]["default"] == f"v{VERSION}"
        assert inputs["from-checkout"]["default"] is False
        # the caller's checkout is installed only when asked (this repository's pr-plan.yml)
        assert re.search(r'if \[ "\$FROM_CHECKOUT" = "true" \]; then\s+python -m pip install \.\s', runs)
    else:
        assert f"@v{VERSION}'" in by_version[0]


def test_the_image_lock_pins_every_runtime_dependency() -> None:
    """Every dependency in pyproject's [project] dependencies has a hashed wheel in
    image/requirements.lock (the image installs with --require-hashes: a dependency missing there
    is an image whose entrypoint fails on its first import)."""
    root = ROOT
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    wanted = {norm(re.split(r"[\s<>=!~;\[]", d, maxsplit=1)[0]) for d in deps}
    locked = {norm(line.split("==")[0]) for line in (root / "image" / "requirements.lock").read_text().splitlines()
              if "==" in line and not line.startswith("#")}
    assert wanted <= locked, sorted(wanted - locked)
