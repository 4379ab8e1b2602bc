"""GitHub and GitLab review hosts against a local HTTP server that checks requests the way the
real REST APIs define them (paths, methods, query, JSON bodies, auth headers), and
``plan --comment`` end to end (sticky comment created once, then updated in place)."""

from __future__ import annotations

import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from reconciler.adapters.review.github import GitHubHost
from reconciler.adapters.review.gitlab import GitLabHost
from reconciler.adapters.review.http import ReviewHostError
from reconciler.cli.main import main
from tests.httpfake import QuietHandler

TOKEN = "ghp_TEST_SECRET_0123456789"


class FakeHost:
    """State of the fake server: comments per PR/MR, statuses, and every request seen."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.comments: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str, dict[str, list[str]], Any]] = []
        self.next_id = 100
        self.url = ""
        self.refuse_writes = 0  # an HTTP status every comment or status write gets (0: none)

    def add(self, body: str, **extra: Any) -> int:
        self.next_id += 1
        self.comments.append({"id": self.next_id, "body": body, **extra})
        return self.next_id


def _handler(host: FakeHost) -> type[BaseHTTPRequestHandler]:
    class H(QuietHandler):
        def _auth_ok(self) -> bool:
            if host.kind == "github":
                return (
                    self.headers.get("Authorization") == f"Bearer {TOKEN}"
                    and self.headers.get("Accept") == "application/vnd.github+json"
                    and self.headers.get("X-GitHub-Api-Version") == "2022-11-28"
                    and bool(self.headers.get("User-Agent"))
                )
            return self.headers.get("PRIVATE-TOKEN") == TOKEN and "Authorization" not in self.headers

        def _send(self, code: int, doc: Any, headers: dict[str, str] | None = None) -> None:
            raw = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _handle(self, method: str) -> None:
            u = urlsplit(self.path)
            q = parse_qs(u.query)
            body = None
            if method in ("POST", "PATCH", "PUT"):
                assert self.headers.get("Content-Type") == "application/json"
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            host.requests.append((method, u.path, q, body))
            if not self._auth_ok():
                self._send(401, {"message": "Bad credentials"})
                return
            if host.refuse_writes and method != "GET":
                self._send(host.refuse_writes, {"message": "Resource not accessible by integration"})
                return
            if host.kind == "github":
                self._github(method, u.path, q, body)
            else:
                self._gitlab(method, u.path, q, body)

        def _page(self, q: dict[str, list[str]]) -> tuple[list[dict[str, Any]], bool]:
            per, page = int(q["per_page"][0]), int(q["page"][0])
            assert per == 100
            size = 2  # the fake pages by 2 so that pagination is exercised
            chunk = host.comments[(page - 1) * size : page * size]
            return chunk, page * size < len(host.comments)

        def _github(self, method: str, path: str, q: dict[str, list[str]], body: Any) -> None:
            base = "/repos/org/fleet"
            if method == "GET" and path == f"{base}/issues/7/comments":
                chunk, more = self._page(q)
                link = {}
                if more:
                    nxt = int(q["page"][0]) + 1
                    link = {"Link": f'<{host.url}{path}?per_page=100&page={nxt}>; rel="next"'}
                self._send(200, chunk, link)
            elif method == "POST" and path == f"{base}/issues/7/comments":
                assert set(body) == {"body"} and len(body["body"]) <= 65536
                self._send(201, {"id": host.add(body["body"]), "body": body["body"]})
            elif method == "PATCH" and path.startswith(f"{base}/issues/comments/"):
                cid = int(path.rsplit("/", 1)[1])
                assert set(body) == {"body"}
                c = next(c for c in host.comments if c["id"] == cid)
                c["body"] = body["body"]
                self._send(200, c)
            elif method == "POST" and path.startswith(f"{base}/statuses/"):
                assert body["state"] in ("success", "failure", "error", "pending") and len(body["description"]) <= 140
                host.statuses.append({"sha": path.rsplit("/", 1)[1], **body})
                self._send(201, body)
            else:
                self._send(404, {"message": "Not Found"})

        def _gitlab(self, method: str, path: str, q: dict[str, list[str]], body: Any) -> None:
            base = "/api/v4/projects/group%2Ffleet"
            notes = f"{base}/merge_requests/7/notes"
            if method == "GET" and path == notes:
                assert q["sort"] == ["asc"] and q["order_by"] == ["created_at"]
                chunk, more = self._page(q)
                self._send(200, chunk, {"X-Next-Page": str(int(q["page"][0]) + 1) if more else ""})
            elif method == "POST" and path == notes:
                self._send(201, {"id": host.add(body["body"]), "body": body["body"]})
            elif method == "PUT" and path.startswith(notes + "/"):
                c = next(c for c in host.comments if c["id"] == int(path.rsplit("/", 1)[1]))
                c["body"] = body["body"]
                self._send(200, c)
            elif method == "POST" and path.startswith(f"{base}/statuses/"):
                assert body["state"] in ("pending", "running", "success", "failed", "canceled")
                host.statuses.append({"sha": path.rsplit("/", 1)[1], **body})
                self._send(201, body)
            else:
                self._send(404, {"message": "404 Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_PUT(self) -> None:
            self._handle("PUT")

    return H


@pytest.fixture(params=["github", "gitlab"])
def server(request: pytest.FixtureRequest, http_server: Callable[[type[BaseHTTPRequestHandler]], str]) -> FakeHost:
    host = FakeHost(request.param)
    host.url = http_server(_handler(host))
    return host


def make(host: FakeHost, token: str = TOKEN) -> GitHubHost | GitLabHost:
    if host.kind == "github":
        return GitHubHost("org/fleet", token, api_url=host.url)
    return GitLabHost("group/fleet", token, api_url=host.url + "/api/v4")


MARK = "<!-- reconciler:pr-plan recipe=tuning -->"


def test_sticky_comment_found_on_a_later_page_is_updated_in_place(server: FakeHost) -> None:
    for i in range(3):
        server.add(f"unrelated {i}")
    if server.kind == "gitlab":
        server.add(MARK + "\nsystem note that must be ignored", system=True)
    target = server.add(MARK + "\nold plan")
    h = make(server)
    assert h.upsert_comment(7, MARK, MARK + "\nnew plan") == "updated"
    assert next(c for c in server.comments if c["id"] == target)["body"] == MARK + "\nnew plan"
    assert h.upsert_comment(7, MARK, MARK + "\nnew plan") == "unchanged"
    methods = [r[0] for r in server.requests]
    assert methods.count("POST") == 0 and methods.count("PATCH" if server.kind == "github" else "PUT") == 1
    pages = [r[2]["page"][0] for r in server.requests if r[0] == "GET"]
    first = ["1", "2"] if server.kind == "github" else ["1", "2", "3"]  # target on the last page
    assert pages == first + first


def test_no_marked_comment_creates_one_and_sets_a_commit_status(server: FakeHost) -> None:
    server.add("<!-- reconciler:pr-plan recipe=other -->\nanother recipe's comment")
    h = make(server)
    assert h.upsert_comment(7, MARK, MARK + "\nplan") == "created"
    assert [c["body"] for c in server.comments][-1] == MARK + "\nplan"
    h.set_status("abc123", "failure", "x" * 300, "reconciler/plan", "https://ci.example/run/1")
    (st,) = server.statuses
    assert st["sha"] == "abc123" and st["target_url"] == "https://ci.example/run/1"
    if server.kind == "github":
        assert st["state"] == "failure" and st["context"] == "reconciler/plan" and len(st["description"]) == 140
    else:
        assert st["state"] == "failed" and st["name"] == "reconciler/plan"


def test_bad_token_is_a_clear_error_without_the_token(server: FakeHost) -> None:
    h = make(server, token="wrong-token-value")
    with pytest.raises(ReviewHostError) as e:
        h.upsert_comment(7, MARK, MARK + "\nplan")
    assert e.value.status == 401 and "wrong-token-value" not in str(e.value)
    assert "HTTP 401" in str(e.value) and "?" not in str(e.value)


ROOT = Path(__file__).resolve().parents[3]
FLEET = ROOT / "examples" / "fleets" / "gpu-24.yaml"


def test_plan_comment_end_to_end(
    server: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil
    import subprocess

    r = tmp_path / "repo"
    r.mkdir()

    def git(*a: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *a], cwd=r, check=True, capture_output=True)

    git("init", "-q")
    shutil.copytree(ROOT / "recipes", r / "recipes")
    shutil.copytree(ROOT / "policies", r / "policies")
    git("add", "-A")
    git("commit", "-qm", "base")
    f = r / "recipes" / "gpu-training-tuning.yaml"
    f.write_text(f.read_text().replace("version: 0.3.2", "version: 0.3.3"))
    git("commit", "-qam", "head")
    flag = (
        ["--github-repo", "org/fleet", "--api-url", server.url]
        if server.kind == "github"
        else ["--gitlab-project", "group/fleet", "--api-url", server.url + "/api/v4"]
    )
    argv = [
        "plan",
        "--repo",
        str(r),
        "--base",
        "HEAD~1",
        "--head",
        "HEAD",
        "--cluster",
        f"sim:{FLEET}",
        "--comment",
        server.kind,
        "--pr",
        "7",
        *flag,
        "-o",
        "markdown",
    ]
    env = "GITHUB_TOKEN" if server.kind == "github" else "GITLAB_TOKEN"
    monkeypatch.delenv(env, raising=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{env} is not set" in err and not server.requests  # nothing was posted

    monkeypatch.setenv(env, TOKEN)
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert main(argv) == 0
    out2, err2 = capsys.readouterr()
    assert TOKEN not in out + err + out2 + err2
    (comment,) = server.comments  # created once, then updated in place
    assert comment["body"].startswith("<!-- reconciler:pr-plan recipe=gpu-training-tuning -->")
    assert "nvidia\\-tuned" in comment["body"] or "nvidia-tuned" in comment["body"]
    assert len(comment["body"]) <= 60_000
    assert "created comment" in err and "unchanged comment" in err2
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=r, capture_output=True, text=True).stdout.strip()
    assert [s["sha"] for s in server.statuses] == [head, head]


def test_invalid_head_replaces_the_comment_fails_the_status_and_annotates(
    server: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A head that does not load: the sticky plan comment of the recipe becomes an error comment
    naming file:line, a PR-level error comment is posted, the status fails, Actions gets
    ``::error file=…,line=…`` lines; a fixed head brings the plan back in the same comments."""
    import shutil
    import subprocess

    r = tmp_path / "repo"
    r.mkdir()

    def git(*a: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *a], cwd=r, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    shutil.copytree(ROOT / "recipes", r / "recipes")
    shutil.copytree(ROOT / "policies", r / "policies")
    git("add", "-A")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD")
    f = r / "recipes" / "gpu-training-tuning.yaml"
    good = f.read_text()
    f.write_text(good.replace("version: 0.3.2", "version: 0.3.3"))
    git("commit", "-qam", "head 1")
    flag = (
        ["--github-repo", "org/fleet", "--api-url", server.url]
        if server.kind == "github"
        else ["--gitlab-project", "group/fleet", "--api-url", server.url + "/api/v4"]
    )
    argv = ["plan", "--repo", str(r), "--base", base, "--head", "HEAD", "--cluster", f"sim:{FLEET}",
            "--comment", server.kind, "--pr", "7", *flag]
    monkeypatch.setenv("GITHUB_TOKEN" if server.kind == "github" else "GITLAB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert main(argv) == 0
    capsys.readouterr()
    (plan_comment,) = server.comments
    assert "0.3.2 → 0.3.3" in plan_comment["body"]

    # head 2 breaks the recipe: a version that is not semver
    f.write_text(good.replace("version: 0.3.2", "version: 0.3.x"))
    git("commit", "-qam", "head 2")
    head2 = git("rev-parse", "HEAD")
    bad_line = next(i for i, t in enumerate(f.read_text().splitlines(), 1) if "0.3.x" in t)
    assert main(argv) == 2
    err = capsys.readouterr().err
    where = f"recipes/gpu-training-tuning.yaml:{bad_line}"
    assert f"error: {head2[:12]}:{where}" in err
    assert f"::error file=recipes/gpu-training-tuning.yaml,line={bad_line}," in err
    assert TOKEN not in err
    by_marker = {c["body"].split("\n", 1)[0]: c["body"] for c in server.comments}
    assert set(by_marker) == {MARK.replace("tuning", "gpu-training-tuning"), "<!-- reconciler:pr-plan-error -->"}
    replaced = by_marker[MARK.replace("tuning", "gpu-training-tuning")]
    first = replaced.split("\n")[1]
    assert first.startswith(f"❌ **Cannot plan: recipe gpu-training-tuning: head `{head2[:12]}` does not load**")
    assert where in first and "0.3.2 → 0.3.3" not in replaced  # the stale plan is gone
    assert where in by_marker["<!-- reconciler:pr-plan-error -->"]
    st = server.statuses[-1]
    assert st["sha"] == head2 and st["state"] == ("failure" if server.kind == "github" else "failed")
    assert where in st["description"] and len(st["description"]) <= 140

    # head 3 fixes it: the plan is back in the recipe's comment, the error comment says so
    f.write_text(good.replace("version: 0.3.2", "version: 0.3.4"))
    git("commit", "-qam", "head 3")
    assert main(argv) == 0
    capsys.readouterr()
    assert len(server.comments) == 2
    by_marker = {c["body"].split("\n", 1)[0]: c["body"] for c in server.comments}
    assert "0.3.2 → 0.3.4" in by_marker[MARK.replace("tuning", "gpu-training-tuning")]
    assert "loads again" in by_marker["<!-- reconciler:pr-plan-error -->"]
    assert server.statuses[-1]["state"] == "success"


def test_error_comment_that_cannot_be_posted_still_prints_the_heads_error(
    server: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: a head that does not load while the review host refuses the error comment (a
    token without write access): the head's own ``file:line`` error is printed, and its
    annotation, the refusal is named as a second error, and the exit code is 2 (bad input), not
    4: what the author must fix is the recipe."""
    import shutil
    import subprocess

    r = tmp_path / "repo"
    r.mkdir()

    def git(*a: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@e", *a], cwd=r, check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    shutil.copytree(ROOT / "recipes", r / "recipes")
    shutil.copytree(ROOT / "policies", r / "policies")
    git("add", "-A")
    git("commit", "-qm", "base")
    base = git("rev-parse", "HEAD")
    f = r / "recipes" / "gpu-training-tuning.yaml"
    f.write_text(f.read_text().replace("version: 0.3.2", "version: 0.3.x"))
    git("commit", "-qam", "head")
    head = git("rev-parse", "HEAD")
    bad_line = next(i for i, t in enumerate(f.read_text().splitlines(), 1) if "0.3.x" in t)
    flag = (
        ["--github-repo", "org/fleet", "--api-url", server.url]
        if server.kind == "github"
        else ["--gitlab-project", "group/fleet", "--api-url", server.url + "/api/v4"]
    )
    monkeypatch.setenv("GITHUB_TOKEN" if server.kind == "github" else "GITLAB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    server.refuse_writes = 403
    rc = main(["plan", "--repo", str(r), "--base", base, "--head", "HEAD", "--cluster", f"sim:{FLEET}",
               "--comment", server.kind, "--pr", "7", *flag])
    err = capsys.readouterr().err
    where = f"recipes/gpu-training-tuning.yaml:{bad_line}"
    assert rc == 2, err
    assert f"error: {head[:12]}:{where}" in err
    assert f"::error file=recipes/gpu-training-tuning.yaml,line={bad_line}," in err
    assert "error: could not post the error comment" in err and "HTTP 403" in err
    assert server.comments == [] and server.statuses == []
    assert TOKEN not in err
