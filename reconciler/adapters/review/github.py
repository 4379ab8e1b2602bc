"""GitHub review host (GitHub REST API v3, ``X-GitHub-Api-Version: 2022-11-28``).

* Sticky comment: list the PR's issue comments (``GET /repos/{owner}/{repo}/issues/{n}/comments``,
  ``per_page=100``, following the ``Link: <…>; rel="next"`` header), find the one whose body starts
  with the hidden marker, then ``PATCH /repos/{owner}/{repo}/issues/comments/{id}`` with
  ``{"body"}``, or ``POST /repos/{owner}/{repo}/issues/{n}/comments`` when there is none.
* Commit status: ``POST /repos/{owner}/{repo}/statuses/{sha}`` with ``{"state", "context",
  "description", "target_url"}`` (states ``success|failure|error|pending``; description ≤ 140).

Auth: ``Authorization: Bearer <token>`` (a ``GITHUB_TOKEN`` or app/PAT token), never logged.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Literal

from reconciler.adapters.review.http import JsonClient, ReviewHostError

API_VERSION = "2022-11-28"
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')

Upserted = Literal["created", "updated", "unchanged"]


class GitHubHost:
    """One repository ``owner/name`` on GitHub (or GitHub Enterprise via ``api_url``)."""

    def __init__(
        self, repo: str, token: str, *, api_url: str = "https://api.github.com", client: JsonClient | None = None
    ):
        owner, _, name = repo.partition("/")
        if not owner or not name or "/" in name:
            raise ValueError(f"GitHub repository must be OWNER/NAME, got {repo!r}")
        self.repo = f"{urllib.parse.quote(owner, safe='')}/{urllib.parse.quote(name, safe='')}"
        self.client = client or JsonClient(
            api_url,
            {
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
            },
            host="GitHub",
        )

    def find_marked(self, pr: int, marker: str) -> tuple[int, str] | None:
        """(id, body) of the first comment whose body starts with ``marker`` (the same for
        GitHub and GitLab: :meth:`find_comment`)."""
        return self.find_comment(pr, marker)

    def find_comment(self, pr: int, marker: str) -> tuple[int, str] | None:
        """(id, body) of the first comment on PR ``pr`` whose body starts with ``marker``."""
        url: str | None = self.client.url(f"/repos/{self.repo}/issues/{pr}/comments", {"per_page": 100, "page": 1})
        pages = 0
        while url and pages < 100:
            resp = self.client.request("GET", url)
            pages += 1
            if not isinstance(resp.data, list):
                raise ReviewHostError("GitHub API: comment list is not a JSON array")
            for c in resp.data:
                body = str(c.get("body") or "")
                if body.lstrip().startswith(marker):
                    return int(c["id"]), body
            m = _NEXT.search(resp.headers.get("link", ""))
            url = m.group(1) if m else None
        return None

    def upsert_comment(self, pr: int, marker: str, body: str) -> Upserted:
        """Create the marked comment or update it in place (no request when unchanged).

        Raises:
            ReviewHostError: the API refused (401/403/404/422…) or did not answer.
        """
        if not body.startswith(marker):
            raise ValueError("the comment body must start with its marker")
        found = self.find_comment(pr, marker)
        if found is None:
            self.client.request("POST", self.client.url(f"/repos/{self.repo}/issues/{pr}/comments"), {"body": body})
            return "created"
        cid, old = found
        if old == body:
            return "unchanged"
        self.client.request("PATCH", self.client.url(f"/repos/{self.repo}/issues/comments/{cid}"), {"body": body})
        return "updated"

    def set_status(self, sha: str, state: str, description: str, context: str, target_url: str = "") -> None:
        """Set the commit status ``context`` on ``sha``.

        Raises:
            ReviewHostError: the API refused or did not answer.
        """
        if state not in ("success", "failure", "error", "pending"):
            raise ValueError(f"GitHub status state {state!r}")
        body = {"state": state, "context": context, "description": description[:140]}
        if target_url:
            body["target_url"] = target_url
        self.client.request("POST", self.client.url(f"/repos/{self.repo}/statuses/{sha}"), body)
