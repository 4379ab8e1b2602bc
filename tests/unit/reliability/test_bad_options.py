"""Bad options and hostile option values (issue #14): every case of ``tests/data/bad/options/cases.yaml``
fails before any work — exit 2 (or the case's documented code), a message naming the option,
no traceback, the simulated fleet file and the status repository untouched, nothing created in the
scratch directory (no ``--sim-save``, no metrics file, no file made by an injected command), and
no planted secret in stdout or stderr. See the header of the table for its placeholders.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node, write_fleet

_DATA = Path(__file__).resolve().parents[2] / "data"
TABLE = _DATA / "bad" / "options" / "cases.yaml"
TOKEN = "PLANTEDoptionTOKEN"
SHA = "sha256:" + "9" * 64
RECIPE = f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: secret-free}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  packages:
    base: {{version: 1.0.0, image: ghcr.io/example/base, containerSHA: "{SHA}"}}
"""


def load_cases() -> list[dict[str, Any]]:
    cases = YAML(typ="safe").load(TABLE.read_text(encoding="utf-8"))
    assert isinstance(cases, list)
    return cases


CASES = load_cases()


def git(*args: str) -> str:
    env = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    return subprocess.run(["git", *env, *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Inputs shared by every case (never written by a correct run)."""
    d = tmp_path_factory.mktemp("inputs")
    fleet = d / "fleet.yaml"
    write_fleet(fleet, [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)])
    recipe = d / "recipe.yaml"
    recipe.write_text(RECIPE)
    repo = d / "status.git"
    git("init", "-q", "--bare", str(repo))
    gitrepo = d / "gitops"
    (gitrepo / "recipes").mkdir(parents=True)
    git("init", "-q", "-b", "main", str(gitrepo))
    (gitrepo / "recipes" / "r.yaml").write_text(RECIPE)
    git("-C", str(gitrepo), "add", ".")
    git("-C", str(gitrepo), "commit", "-qm", "base")
    (gitrepo / "recipes" / "r.yaml").write_text(RECIPE.replace("1.0.0", "1.0.1"))
    git("-C", str(gitrepo), "commit", "-qam", "head")
    directory = d / "a-directory"
    directory.mkdir()
    regular = d / "a-file.txt"
    regular.write_text("not json, not a repository\n")
    plans = {
        "plan_deep": "[" * 100_000 + "]" * 100_000,
        "plan_list": "[1, 2, 3]",
        "plan_plans_scalar": '{"plans": 5}',
        "plan_hash_number": '{"planHash": 5, "recipe": {"name": "secret-free"}}',
        "plan_hash_short": '{"planHash": "abc", "recipe": {"name": "secret-free"}}',
        "plan_no_name": '{"planHash": "' + "a" * 64 + '", "recipe": {"version": "1"}}',
    }
    out = {"fleet": fleet, "recipe": recipe, "repo": repo, "gitrepo": gitrepo, "dir": directory, "file": regular}
    for key, text in plans.items():
        out[key] = d / f"{key}.json"
        out[key].write_text(text)
    out["plan_binary"] = d / "plan_binary.json"
    out["plan_binary"].write_bytes(b'{"planHash": "\xff\xfe"}')
    return out


def _state(world: dict[str, Path]) -> tuple[str, str, list[str]]:
    repo = world["repo"]
    refs = subprocess.run(["git", "--git-dir", str(repo), "for-each-ref"], capture_output=True, text=True,
                          check=True).stdout
    objects = sorted(str(p.relative_to(repo)) for p in (repo / "objects").rglob("*") if p.is_file())
    return hashlib.sha256(world["fleet"].read_bytes()).hexdigest(), refs, objects


def test_the_table_is_big_and_every_case_says_what_it_expects() -> None:
    assert len(CASES) >= 50
    ids = [c["id"] for c in CASES]
    assert len(set(ids)) == len(ids), "duplicate case ids"
    for c in CASES:
        assert c.get("argv") and c.get("option") and c.get("fragment"), c["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_option_fails_first_names_the_option_and_changes_nothing(
        case: dict[str, Any], world: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GITLAB_TOKEN", raising=False)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    values = {k: str(v) for k, v in world.items()} | {"tmp": str(scratch), "token": TOKEN}
    argv = [fill(str(a), values) for a in case["argv"]]
    before = _state(world)
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse usage errors
        rc = int(e.code or 0)
    out = capsys.readouterr()
    both = out.out + out.err
    assert rc == case.get("code", 2), f"{case['id']}: exit {rc}\n{both}"
    assert "Traceback" not in both, both
    assert case["option"] in out.err, f"{case['id']}: the message does not name {case['option']!r}: {out.err}"
    assert case["fragment"].lower() in out.err.lower(), f"{case['id']}: no {case['fragment']!r} in: {out.err}"
    assert TOKEN not in both and "PLANTED" not in both, f"{case['id']}: the planted secret leaked: {both}"
    assert "\x1b" not in both, f"{case['id']}: a raw escape sequence reached the output"
    assert "stage-start" not in out.out, f"{case['id']}: the rollout ran before the option was checked"
    assert _state(world) == before, f"{case['id']}: the fleet file or the status repository changed"
    assert list(scratch.iterdir()) == [], f"{case['id']}: something was written: {list(scratch.iterdir())}"


def fill(arg: str, values: dict[str, str]) -> str:
    """``arg`` with ``{name}`` placeholders replaced; unknown names (a template's) are kept."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m[1], m[0]), arg)


def test_placeholders_are_filled_and_templates_kept() -> None:
    assert [fill(a, {"tmp": "/t"}) for a in ["{tmp}/x", "status {nope}", "status {", "a\0b"]] == [
        "/t/x", "status {nope}", "status {", "a\0b"]
