"""Secrets out of everything printed: the one redaction function for URLs and messages.

Applied by the CLI's error printer, every warning, the logging record factory (so no log handler
sees a secret), and at the adapters' boundaries (git, metrics push, review hosts) when they build
an error. What is replaced by ``***``:

* in a URL (``scheme://...``, found anywhere in free text): the user-info — everything up to the
  *last* ``@`` of the authority, so a token containing ``@`` is redacted whole —, every query
  parameter value and the fragment; in an scp-like git remote (``user:token@host:path``) and an
  image reference (``user:token@registry/path``) the user-info (not ``name:tag@sha256:`` digests);
* ``Authorization: Bearer|Basic|token …`` and bare ``Bearer …`` credentials, ``PRIVATE-TOKEN:``
  and ``Private-Token:`` (GitLab) headers;
* ``key=value`` pairs whose key names a secret (``token``, ``password``, ``secret``, ``apikey``…);
* known token shapes: GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``),
  GitLab (``glpat-`` and the other ``gl*-`` prefixes), Slack (``xox?-``), AWS access key ids
  (``AKIA…``), JSON Web Tokens (``eyJ….eyJ…``).

Token prefixes are GitHub's documented formats ("About authentication to GitHub", token formats)
and GitLab's ("Token overview", token prefixes).
"""

from __future__ import annotations

import re

MASK = "***"

# Every pattern runs in linear time on hostile text (a log tail of "a-a-a-…"): each starts only
# at the beginning of its run (a negative lookbehind) and its runs are possessive (Python 3.11).
# a URL: scheme, then everything up to whitespace or a quote/bracket that ends it in prose
_URL = re.compile(r"(?<![a-zA-Z0-9+.-])(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*+://)(?P<rest>[^\s\"'<>`]*+)")
_SCP = re.compile(r"(?<![\w/:@.%+$-])(?P<user>[\w.%+$-]++):(?P<pw>[^\s/]+)@(?!sha256:)(?P<host>[\w.-]++)(?P<end>[:/])")
_AUTH_HEADER = re.compile(
    r"(?P<key>\b(?:proxy-)?authorization\s*+[:=]\s*+)(?:(?P<scheme>bearer|basic|token|digest|negotiate)\s++)?"
    r"(?P<cred>[^\s,;\"']++)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<key>\b(?:bearer|basic)\s++)(?P<cred>[A-Za-z0-9._~+/=-]{8,}+)", re.IGNORECASE)
_TOKEN_HEADER = re.compile(r"(?P<key>\b(?:private|job|deploy)-token\s*+[:=]\s*+)(?P<cred>[^\s,;\"']++)",
                           re.IGNORECASE)
# key=value whose key ends in a secret's name, wherever it is, inside another pair's value too
# (``url='/?access_token=…'``: urllib3's retry log quotes a request path without its scheme). The
# key starts only at the start of its word and grows lazily to the secret's name: linear time.
_SECRET_PAIR = re.compile(
    r"(?<![\w.-])(?P<key>[\w.-]*?(?:token|passw(?:or)?d|secret|api[_-]?key|access[_-]?key|credentials?|"
    r"sig(?:nature)?))(?P<sep>[\"']?\s*+=\s*+[\"']?)(?P<cred>[^\s&,;\"'<>()]++)",
    re.IGNORECASE,
)
_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{16,}+|github_pat_[A-Za-z0-9_]{16,}+|"
    r"gl(?:pat|dt|rt|cbt|ptt|oas|ft|imt|agent|soat)-[A-Za-z0-9_-]{8,}+|xox[abprs]-[A-Za-z0-9-]{8,}+|"
    r"AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{6,}+\.eyJ[A-Za-z0-9_-]{6,}+(?:\.[A-Za-z0-9_-]*+)?)"
)


def redact_url(url: str) -> str:
    """``url`` with user-info, query values and fragment masked (see the module docstring).

    ``https://user:t@k@host:8443/p?token=x&a=1#f`` → ``https://***@host:8443/p?token=***&a=***#***``.
    Text that is not a URL is returned unchanged.
    """
    return _URL.sub(_url_sub, url)


def _url_sub(m: re.Match[str]) -> str:
    rest = m["rest"]
    slash = rest.find("/")
    slash = len(rest) if slash == -1 else slash
    at = rest.rfind("@", 0, slash)  # user-info ends at the last "@" of the authority
    if at == -1:
        # a "/" inside an unencoded token ends the RFC 3986 authority early: "user:se/cret@host"
        auth = rest[:slash]
        colon = auth.find(":")
        if colon != -1 and not auth[colon + 1:].isdigit() and "@" in rest[slash:]:
            at = rest.find("@", slash)
    if at != -1:
        rest = MASK + rest[at:]
    start = len(MASK) + 1 if at != -1 else 0
    hash_at = rest.find("#", start)
    end = len(rest)
    if hash_at != -1:
        rest = rest[: hash_at + 1] + MASK
        end = hash_at
    q = rest.find("?", start, end)
    if q != -1:
        query = rest[q + 1: end]
        masked = "&".join(
            (part.split("=", 1)[0] + "=" + MASK) if "=" in part else (MASK if part else part)
            for part in query.split("&")
        )
        rest = rest[: q + 1] + masked + rest[end:]
    return m["scheme"] + rest


def redact_image(ref: str) -> str:
    """An image reference with any user-info masked: everything before an ``@`` that starts no
    ``sha256:`` digest (``tok@ghcr.io/x`` → ``***@ghcr.io/x``), then :func:`redact`. For messages
    naming an image, where even a bare token before ``@`` is a credential."""
    head, at, tail = ref.rpartition("@")
    if at and not tail.startswith("sha256:"):
        ref = MASK + at + tail
    elif at and "@" in head:  # user@registry/path@sha256:…
        ref = MASK + ref[ref.find("@"):]
    return redact(ref)


def redact(text: object) -> str:
    """``str(text)`` with every secret this module knows masked (URLs first, then headers,
    ``key=value`` secrets and token shapes). Idempotent; cheap when there is nothing to mask."""
    s = text if isinstance(text, str) else str(text)
    if "://" in s:
        s = _URL.sub(_url_sub, s)
    if "@" in s:
        s = _SCP.sub(lambda m: f"{MASK}@{m['host']}{m['end']}", s)
    s = _AUTH_HEADER.sub(lambda m: f"{m['key']}{m['scheme'] + ' ' if m['scheme'] else ''}{MASK}", s)
    s = _BEARER.sub(lambda m: f"{m['key']}{MASK}", s)
    s = _TOKEN_HEADER.sub(lambda m: f"{m['key']}{MASK}", s)
    if "=" in s:
        s = _SECRET_PAIR.sub(lambda m: f"{m['key']}{m['sep']}{MASK}", s)
    return _SHAPES.sub(MASK, s)
