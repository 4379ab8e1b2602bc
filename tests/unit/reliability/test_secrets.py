"""Secrets never leak (issue #6 §5): planted git/PR tokens and kubeconfig credentials appear in no
output (stdout, stderr, debug logs), no error, no PR comment or commit status, no status commit.

The review host is a local HTTP server standing in for the GitHub REST API (loopback only); the
status repository is a local bare git repository. The real-cluster side (ServiceAccount token,
objects written under least-privilege RBAC) is tested in tests/e2e/test_reliability_e2e.py.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node
from tests.httpfake import QuietHandler, serving

GITHUB_TOKEN = "ghp_PLANTEDgithubTOKENabcdefghij0123456789"
GITLAB_TOKEN = "glpat-PLANTEDgitlabTOKEN987"
URL_TOKEN = "PLANTEDurlTOKEN-in-a-remote-url"
KUBE_TOKEN = "PLANTEDkubeTOKEN.eyJhbGciOi.planted"
SECRETS = (GITHUB_TOKEN, GITLAB_TOKEN, URL_TOKEN, KUBE_TOKEN)
SHA = "sha256:" + "c" * 64


def recipe(version: str) -> str:
    return f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: secret-check}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 1}}
  packages:
    base: {{version: {version}, image: ghcr.io/example/base, containerSHA: "{SHA}",
            env: [{{name: MODE, value: strict}}]}}
"""


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens in the environment, as CI provides them."""
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    monkeypatch.setenv("GITLAB_TOKEN", GITLAB_TOKEN)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    f = tmp_path / "fleet.yaml"
    buf = io.StringIO()
    YAML(typ="safe", pure=True).dump(
        {"apiVersion": "v1", "kind": "List", "items": [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)]}, buf)
    f.write_text(buf.getvalue())
    return f


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A git repository with the recipe at 1.0.0 (base) and 1.0.1 (head)."""
    r = tmp_path / "gitops"
    (r / "recipes").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "user.email", "t@example.com")
    git(r, "config", "user.name", "t")
    (r / "recipes" / "r.yaml").write_text(recipe("1.0.0"))
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "base")
    base = git(r, "rev-parse", "HEAD")
    (r / "recipes" / "r.yaml").write_text(recipe("1.0.1"))
    git(r, "commit", "-q", "-am", "head")
    return r, base, git(r, "rev-parse", "HEAD")


class FakeGitHub:
    """A local stand-in for the GitHub REST API: records every request; ``echo_auth`` makes it
    answer 401 with the Authorization header in its message (a hostile or broken proxy)."""

    def __init__(self, echo_auth: bool = False) -> None:
        self.requests: list[dict[str, Any]] = []
        self.echo_auth = echo_auth
        outer = self

        class Handler(QuietHandler):

            def _handle(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                outer.requests.append({"method": self.command, "path": self.path, "body": body,
                                       "auth": self.headers.get("Authorization", "")})
                if outer.echo_auth:
                    self.send_json(401, {"message": f"Bad credentials: {self.headers.get('Authorization')}"})
                elif self.command == "GET":
                    self.send_json(200, [])
                else:
                    self.send_json(201, {"id": 1})

            do_GET = do_POST = do_PATCH = _handle


        self.url = ""
        self._serving = serving(Handler)

    def __enter__(self) -> FakeGitHub:
        self.url = self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)


def assert_clean(label: str, *texts: str) -> None:
    for text in texts:
        for s in SECRETS:
            assert s not in text, f"{label}: a planted secret leaked: ...{text[max(0, text.find(s) - 80):][:200]}"


def _plan_comment(repo: tuple[Path, str, str], fleet: Path, api_url: str) -> list[str]:
    r, base, head = repo
    return ["-vv", "plan", "--repo", str(r), "--base", base, "--head", head, "--cluster", f"sim:{fleet}",
            "--comment", "github", "--pr", "7", "--github-repo", "acme/gitops", "--api-url", api_url]


def test_pr_comment_and_commit_status_carry_no_token(env: None, repo: tuple[Path, str, str], fleet: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     caplog: pytest.LogCaptureFixture) -> None:
    with FakeGitHub() as gh:
        rc = main(_plan_comment(repo, fleet, gh.url))
    out = capsys.readouterr()
    assert rc in (0, 3), out.err
    posted = [q for q in gh.requests if q["method"] in ("POST", "PATCH")]
    assert any("/issues/7/comments" in q["path"] for q in posted) and any("/statuses/" in q["path"] for q in posted)
    assert all(q["auth"] == f"Bearer {GITHUB_TOKEN}" for q in gh.requests)  # the token was used...
    assert "1.0.1" in " ".join(q["body"] for q in posted)
    assert_clean("PR comment / commit status", *(q["body"] for q in posted))  # ...and went nowhere else
    assert_clean("plan output", out.out, out.err, caplog.text)


def test_review_host_echoing_the_token_in_an_error_does_not_leak_it(env: None, repo: tuple[Path, str, str],
                                                                    fleet: Path, capsys: pytest.CaptureFixture[str],
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    with FakeGitHub(echo_auth=True) as gh:
        rc = main(_plan_comment(repo, fleet, gh.url))
    out = capsys.readouterr()
    assert rc == 4
    err = [x for x in out.err.splitlines() if x.startswith("error: ")]
    assert len(err) == 1 and "HTTP 401" in err[0] and "Bad credentials" in err[0]
    assert_clean("error from a host echoing the token", out.out, out.err, caplog.text)


def test_token_in_a_status_repository_url_is_redacted(env: None, fleet: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    r = tmp_path / "r.yaml"
    r.write_text(recipe("1.0.0"))
    url = f"https://x-access-token:{URL_TOKEN}@127.0.0.1:9/acme/status.git"
    rc = main(["-vv", "apply", str(r), "--cluster", f"sim:{fleet}", "--status-repo", url, "--cluster-name", "prod"])
    out = capsys.readouterr()
    assert rc != 0 and "127.0.0.1" in out.err  # the push failed and says where
    assert_clean("apply with a credential in --status-repo", out.out, out.err, caplog.text)


def test_status_commit_carries_no_token(env: None, fleet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        caplog: pytest.LogCaptureFixture) -> None:
    bare = tmp_path / "status.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    r = tmp_path / "r.yaml"
    r.write_text(recipe("1.0.0"))
    rc = main(["-vv", "apply", str(r), "--cluster", f"sim:{fleet}", "--status-repo", str(bare),
               "--cluster-name", "prod", "-o", "json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    log = git(bare, "log", "--all", "-p", "--format=%H%n%an <%ae>%n%B")
    assert "secret-check" in log  # a status commit was made
    assert_clean("status commit", log, out.out, out.err, caplog.text)


def test_kubeconfig_credentials_never_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A kubeconfig with a token (and a broken one) for a server that is not there: the error names
    the problem, never the credentials."""
    r = tmp_path / "r.yaml"
    r.write_text(recipe("1.0.0"))
    good = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": KUBE_TOKEN}}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    broken = {**good, "users": [{"name": "u", "user": {"token": KUBE_TOKEN, "exec": "not-a-mapping"}}]}
    for label, doc in (("unreachable server", good), ("invalid kubeconfig", broken)):
        kc = tmp_path / f"{label.replace(' ', '-')}.kubeconfig"
        kc.write_text(json.dumps(doc))
        rc = main(["-vv", "apply", str(r), "--kubeconfig", str(kc)])
        out = capsys.readouterr()
        assert rc == 4, (label, out.err)
        assert out.err.strip().splitlines()[-1].startswith("error: ")
        assert_clean(label, out.out, out.err, caplog.text)


def test_stage_pods_carry_only_what_the_recipe_declares() -> None:
    """The stage pod has the recipe's env plus the agent's fixed variables, no service account
    token, no secret references, nothing from the reconciler's own environment."""
    import os

    from reconciler.adapters.kube.stagepod import build_stage_pod
    from reconciler.load.recipes import load_node_recipe
    from reconciler.load.yamlsafe import parse_documents

    errors: list[Any] = []
    (doc,) = parse_documents(recipe("1.0.0"), "r.yaml")
    loaded = load_node_recipe(doc, errors, locked=True)
    assert loaded is not None and not errors
    pkg = loaded.recipe.packages["base"]
    from reconciler.ports import StageSpec

    os.environ["GITHUB_TOKEN"] = GITHUB_TOKEN
    try:
        spec = StageSpec(recipe="secret-check", node="n1", package="base", version="1.0.0", stage="apply",
                         pull_ref=pkg.pull_ref, run_id="run-x", env=pkg.env)
        pod = build_stage_pod(spec)
    finally:
        del os.environ["GITHUB_TOKEN"]
    text = json.dumps(pod)
    assert_clean("stage pod", text)
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in pod["spec"]
    assert not any(k in text for k in ("secretKeyRef", "secretRef", "imagePullSecrets", '"secret"'))
    for c in pod["spec"]["initContainers"][1:]:
        names = [e["name"] for e in c["env"]]
        assert names == ["MODE", "SKYHOOK_LOG_DIR", "SKYHOOK_ROOT_DIR", "COPY_RESOLV", "SKYHOOK_RESOURCE_ID"]
        assert not any("valueFrom" in e for e in c["env"])
