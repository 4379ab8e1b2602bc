"""The one redaction function (reconciler.report.redact): a table of secrets in URLs and messages."""

from __future__ import annotations

import pytest

from reconciler.report.redact import redact

TOKEN = "S3cr3tTok"


@pytest.mark.parametrize(("text", "expected"), [
    # user-info, also when the token holds "@", "/", "?" or "#"
    ("https://x-access-token:S3cr3tTok@github.com/acme/s.git", "https://***@github.com/acme/s.git"),
    ("https://user:S3cr@tTok@github.com/acme/s.git", "https://***@github.com/acme/s.git"),
    ("https://S3cr3tTok@host", "https://***@host"),
    ("https://u:S3c@r@3t@Tok@host:8443/p", "https://***@host:8443/p"),
    ("https://u:S3cr/3tTok@host/p", "https://***@host/p"),
    ("http://u:S3cr#3tTok@host/p", "http://***@host/p"),
    ("ssh://git:S3cr3tTok@example.org:22/repo", "ssh://***@example.org:22/repo"),
    # query values and fragments
    ("http://pg:9091/?token=S3cr3tTok", "http://pg:9091/?token=***"),
    ("http://pg:9091/p?a=1&access_token=S3cr3tTok&flag", "http://pg:9091/p?a=***&access_token=***&***"),
    ("https://host/p#S3cr3tTok", "https://host/p#***"),
    ("https://host/p?x=S3cr3tTok#frag", "https://host/p?x=***#***"),
    # URLs inside free text
    ("git fetch https://x:S3cr3tTok@h/r.git failed: fatal", "git fetch https://***@h/r.git failed: fatal"),
    ("error: 'https://a:S3cr3tTok@h/x' unreachable", "error: 'https://***@h/x' unreachable"),
    ("see <https://h/x?sig=S3cr3tTok>", "see <https://h/x?sig=***>"),
    # scp-like git remotes
    ("user:S3cr3tTok@gitlab.com:org/repo.git", "***@gitlab.com:org/repo.git"),
    ("user:S3cr@3tTok@gitlab.com:org/repo.git", "***@gitlab.com:org/repo.git"),
    # credentials in an image reference (a Skyhook record's image, a recipe's image)
    ("user:S3cr3tTok@ghcr.io/acme/pkg", "***@ghcr.io/acme/pkg"),
    ("image 'robot$x:S3cr3tTok@registry.local:5000/pkg' carries a digest",
     "image '***@registry.local:5000/pkg' carries a digest"),
    # headers and command lines
    ("Authorization: Bearer S3cr3tTok", "Authorization: Bearer ***"),
    ("authorization=token S3cr3tTok", "authorization=token ***"),
    ("-H 'Authorization: Basic S3cr3tTok=='", "-H 'Authorization: Basic ***'"),
    ("got bearer S3cr3tTokLonger back", "got bearer *** back"),
    ("PRIVATE-TOKEN: S3cr3tTok", "PRIVATE-TOKEN: ***"),
    ("git -c http.extraHeader=Authorization:S3cr3tTok", "git -c http.extraHeader=Authorization:***"),
    ("--password=S3cr3tTok --api-key=S3cr3tTok", "--password=*** --api-key=***"),
    ("client_secret='S3cr3tTok'", "client_secret='***'"),
    # a pair inside another pair's value (urllib3's retry log quotes the path without its scheme)
    ("Incremented Retry for (url='/?access_token=S3cr3tTok/version/')",
     "Incremented Retry for (url='/?access_token=***')"),
    ("a=b=password=S3cr3tTok", "a=b=password=***"),
    # known token shapes, anywhere
    ("token ghp_S3cr3tTokS3cr3tTokS3cr3tTok12 here", "token *** here"),
    ("github_pat_11ABCDEFG0S3cr3tTok_abcdefgh", "***"),
    ("glpat-S3cr3tTok1234", "***"),
    ("xoxb-1234-S3cr3tTok", "***"),
    ("AKIAABCDEFGHIJKLMNOP", "***"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature", "***"),
])
def test_redacts(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(redact(text)) == expected  # idempotent


@pytest.mark.parametrize("text", [
    "https://github.com/acme/gitops.git",
    "http://127.0.0.1:9091/metrics/job/node-reconciler/recipe/gpu",
    "https://registry.npmjs.org/@scope/pkg",
    "git@github.com:acme/gitops.git",
    "ghcr.io/acme/pkg:1.0.0@sha256:" + "a" * 64,
    "pkg:1.0.0@sha256:" + "a" * 64,
    "--comment github: GITHUB_TOKEN is not set in the environment",
    "recipes/a.yaml:12:7: spec.packages.x.version: not semver",
    "status/prod/gpu.json: committed 0123456789ab on reconciler-status",
    "node gpu-a-001 failed: exit 3 (stage apply)",
    "host:8443",
])
def test_leaves_plain_text_alone(text: str) -> None:
    assert redact(text) == text


def test_accepts_any_object() -> None:
    assert redact(ValueError(f"https://u:{TOKEN}@h/")) == "https://***@h/"
