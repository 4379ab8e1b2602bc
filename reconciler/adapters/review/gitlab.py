"""GitLab review host (GitLab REST API v4): merge request notes and commit statuses.

* Sticky comment: list the merge request's notes (``GET /projects/:id/merge_requests/:iid/notes``,
  ``per_page=100``, ``sort=asc``, ``order_by=created_at``, following ``X-Next-Page``), skip system
  notes, find the one whose body starts with the marker, then ``PUT …/notes/:note_id`` with
  ``{"body"}``, or ``POST …/notes`` when there is none.
* Commit status: ``POST /projects/:id/statuses/:sha`` with ``{"state", "name", "description",
  "target_url"}``; states ``pending|running|success|failed|canceled`` (our ``failure``/``error``
  → ``failed``).

``:id`` is the numeric project id or the URL-encoded ``group/project`` path. Auth header
``PRIVATE-TOKEN: <token>`` (personal, project or group access token), never logged.
"""

from __future__ import annotations

import urllib.parse
from typing import Literal

from reconciler.adapters.review.http import JsonClient, ReviewHostError

_STATE = {"success": "success", "failure": "failed", "error": "failed", "pending": "pending"}

Upserted = Literal["created", "updated", "unchanged"]


class GitLabHost:
    """One GitLab project (id or ``group/project`` path) on ``api_url`` (…/api/v4)."""

    def __init__(
        self, project: str, token: str, *, api_url: str = "https://gitlab.com/api/v4", client: JsonClient | None = None
    ):
        if not project:
            raise ValueError("GitLab project id or path is empty")
        self.project = urllib.parse.quote(str(project), safe="")
        self.client = client or JsonClient(api_url, {"PRIVATE-TOKEN": token}, host="GitLab")

    def _notes(self, mr: int) -> str:
        return f"/projects/{self.project}/merge_requests/{mr}/notes"

    def find_marked(self, pr: int, marker: str) -> tuple[int, str] | None:
        """(id, body) of the first comment whose body starts with ``marker`` (the same for
        GitHub and GitLab: :meth:`find_note`)."""
        return self.find_note(pr, marker)

    def find_note(self, mr: int, marker: str) -> tuple[int, str] | None:
        """(id, body) of the first non-system note on MR ``mr`` whose body starts with ``marker``."""
        page: str | None = "1"
        pages = 0
        while page and pages < 100:
            q = {"per_page": 100, "page": page, "sort": "asc", "order_by": "created_at"}
            resp = self.client.request("GET", self.client.url(self._notes(mr), q))
            pages += 1
            if not isinstance(resp.data, list):
                raise ReviewHostError("GitLab API: note list is not a JSON array")
            for n in resp.data:
                body = str(n.get("body") or "")
                if not n.get("system") and body.lstrip().startswith(marker):
                    return int(n["id"]), body
            page = resp.headers.get("x-next-page", "").strip() or None
        return None

    def upsert_comment(self, mr: int, marker: str, body: str) -> Upserted:
        """Create the marked note or update it in place (no request when unchanged).

        Raises:
            ReviewHostError: the API refused or did not answer.
        """
        if not body.startswith(marker):
            raise ValueError("the note body must start with its marker")
        found = self.find_note(mr, marker)
        if found is None:
            self.client.request("POST", self.client.url(self._notes(mr)), {"body": body})
            return "created"
        nid, old = found
        if old == body:
            return "unchanged"
        self.client.request("PUT", self.client.url(f"{self._notes(mr)}/{nid}"), {"body": body})
        return "updated"

    def set_status(self, sha: str, state: str, description: str, context: str, target_url: str = "") -> None:
        """Set the commit status ``context`` (GitLab ``name``) on ``sha``.

        Raises:
            ReviewHostError: the API refused or did not answer.
        """
        if state not in _STATE:
            raise ValueError(f"status state {state!r}")
        body = {"state": _STATE[state], "name": context, "description": description[:255]}
        if target_url:
            body["target_url"] = target_url
        self.client.request("POST", self.client.url(f"/projects/{self.project}/statuses/{sha}"), body)
