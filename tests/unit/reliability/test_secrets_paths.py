"""Secrets in option URLs are never printed (issue #14): a token in the user-info (also one holding
``@``), in a query parameter or a fragment of ``--pushgateway`` or ``--status-repo`` appears in no
warning, error, log line or output, on every path that can carry the URL: argparse's usage error,
the option pre-checks, the git adapter's errors, the metrics push (unreachable, and a server that
echoes the credentials back), the central error printer and the logging records.
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from reconciler.adapters.git.push import StatusPusher
from reconciler.adapters.git.repo import GitError
from reconciler.adapters.metrics.pushgateway import push
from reconciler.cli.main import main
from reconciler.report.metrics import MetricsError, MetricSet
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.httpfake import QuietHandler, serving

TOKEN = "PLANTEDtok3n"
AT_TOKEN = "PLANTED@half@tok3n"  # a token holding "@": must be redacted whole
SECRETS = (TOKEN, AT_TOKEN, "PLANTED", "tok3n")
SHA = "sha256:" + "e" * 64


def assert_clean(label: str, *texts: str) -> None:
    for text in texts:
        for s in SECRETS:
            assert s not in text, f"{label}: secret {s!r} leaked: {text[max(0, text.find(s) - 80):][:200]!r}"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    fleet = tmp_path / "fleet.yaml"
    write_fleet(fleet, [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)])
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: secret-paths}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  packages:
    base: {{version: 1.0.0, image: ghcr.io/example/base, containerSHA: "{SHA}"}}
""")
    return {"fleet": fleet, "recipe": recipe}


class EchoServer:
    """A Pushgateway stand-in that answers 401 and echoes the Authorization header it got."""

    def __init__(self) -> None:
        self.auth: list[str] = []
        outer = self

        class Handler(QuietHandler):
            def do_PUT(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                auth = self.headers.get("Authorization", "")
                outer.auth.append(auth)
                body = f"unauthorized: you sent Authorization: {auth} to {self.path}".encode()
                self.send_response(401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)


        self.port = 0
        self._serving = serving(Handler)

    def __enter__(self) -> EchoServer:
        self.port = int(self._serving.__enter__().rsplit(":", 1)[1])
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)


URLS_BAD = [
    f"ftp://user:{TOKEN}@127.0.0.1:9/",
    f"http://user:{AT_TOKEN}@127.0.0.1:99999/",
    f"http://127.0.0.1:9091/?token={TOKEN}",
    f"http://127.0.0.1:9091/#{TOKEN}",
    f"http://user:{TOKEN}@/nohost",
    f"http://u:{TOKEN}@127.0.0.1:9091/\x1b[31m",
]


@pytest.mark.parametrize("url", URLS_BAD)
def test_bad_pushgateway_url_is_refused_without_echoing_its_secret(url: str, files: dict[str, Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}", "--pushgateway", url])
    out = capsys.readouterr()
    assert e.value.code == 2 and "--pushgateway" in out.err, out.err
    assert_clean(url, out.out, out.err)


@pytest.mark.parametrize("token", [TOKEN, AT_TOKEN])
def test_unreachable_pushgateway_warning_carries_no_token(token: str, files: dict[str, Path],
                                                          capsys: pytest.CaptureFixture[str],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    rc = main(["-vv", "apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}",
               "--pushgateway", f"http://user:{token}@127.0.0.1:9/"])
    out = capsys.readouterr()
    assert rc == 0, out.err  # a failed push never fails the run
    assert "warning: metrics not exported" in out.err and "127.0.0.1:9" in out.err
    assert_clean("unreachable pushgateway", out.out, out.err, caplog.text)


@pytest.mark.parametrize("token", [TOKEN, AT_TOKEN])
def test_pushgateway_echoing_the_credentials_does_not_leak_them(token: str, files: dict[str, Path],
                                                                capsys: pytest.CaptureFixture[str],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    with EchoServer() as pg:
        quoted = token.replace("@", "%40")
        rc = main(["-vv", "apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}",
                   "--pushgateway", f"http://pusher:{quoted}@127.0.0.1:{pg.port}"])
        out = capsys.readouterr()
        rc_metrics = main(["metrics", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}",
                           "--pushgateway", f"http://pusher:{quoted}@127.0.0.1:{pg.port}"])
        out2 = capsys.readouterr()
    assert rc == 0 and "HTTP 401" in out.err, out.err
    assert rc_metrics == 1 and out2.err.startswith("error: pushgateway http://127.0.0.1"), out2.err
    expected = "Basic " + base64.b64encode(f"pusher:{token}".encode()).decode()
    assert pg.auth and all(a == expected for a in pg.auth)  # the credentials were used as basic auth...
    assert_clean("pushgateway echo", out.out, out.err, out2.out, out2.err, caplog.text)  # ...and shown nowhere
    assert expected.split()[1] not in out.err + out2.err + caplog.text


@pytest.mark.parametrize("url", [
    f"https://x-access-token:{TOKEN}@127.0.0.1:9/acme/status.git",
    f"https://x-access-token:{AT_TOKEN}@127.0.0.1:9/acme/status.git",
    f"https://127.0.0.1:9/acme/status.git?private_token={TOKEN}",
    f"https://user:{TOKEN}@127.0.0.1:9/acme/status.git#{TOKEN}",
])
def test_status_repo_with_a_token_fails_before_the_run_and_never_shows_it(url: str, files: dict[str, Path],
                                                                          tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str],
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    saved = tmp_path / "saved.yaml"
    before = files["fleet"].read_bytes()
    rc = main(["-vv", "apply", str(files["recipe"]), "--cluster", f"sim:{files['fleet']}", "--status-repo", url,
               "--cluster-name", "prod", "--sim-save", str(saved)])
    out = capsys.readouterr()
    assert rc == 2, out.err
    err = [x for x in out.err.splitlines() if x.startswith("error: ")]
    assert len(err) == 1 and "--status-repo" in err[0] and "127.0.0.1" in err[0], out.err
    assert not saved.exists() and files["fleet"].read_bytes() == before  # checked before the run
    assert "stage-start" not in out.out
    assert_clean("status repo pre-check", out.out, out.err, caplog.text)


@pytest.mark.parametrize("token", [TOKEN, AT_TOKEN])
def test_git_adapter_errors_are_redacted(token: str, tmp_path: Path) -> None:
    pusher = StatusPusher(f"https://x:{token}@127.0.0.1:9/s.git", "reconciler-status")
    with pytest.raises(GitError) as e:
        pusher.check_reachable(timeout=20)
    assert "127.0.0.1" in str(e.value)
    assert_clean("check_reachable", str(e.value))
    with pytest.raises(GitError) as e:
        pusher.write({"status/x.json": b"{}"}, "m")
    assert_clean("write", str(e.value))


def test_metrics_push_errors_are_redacted() -> None:
    with pytest.raises(MetricsError) as e:
        push(f"http://u:{TOKEN}@127.0.0.1:9", MetricSet(), grouping={"recipe": "r"})
    assert "http://127.0.0.1:9/metrics/job/" in str(e.value)  # the credentials are not part of the URL shown
    assert_clean("push", str(e.value))


def test_log_records_are_redacted_when_created(caplog: pytest.LogCaptureFixture,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from reconciler.cli.safeio import install_log_redaction

    install_log_redaction()
    log = logging.getLogger("reconciler.test")
    with caplog.at_level(logging.DEBUG):
        log.warning("fetch %s failed", f"https://x:{AT_TOKEN}@h/r.git")
        log.info("header Authorization: Bearer %s", TOKEN)
        log.debug("url=%r", f"http://pg/?token={TOKEN}")
    assert len(caplog.records) == 3
    assert "https://***@h/r.git" in caplog.text
    assert_clean("log records", caplog.text, *(r.getMessage() for r in caplog.records))
