"""Where the controller's desired state comes from: NodeRecipe objects, or a mounted directory.

* :class:`ObjectSource` (``--source crd``): the NodeRecipe objects a watch keeps current
  (:meth:`ObjectSource.observe` is its event handler), plus policies from files (``--policy``).
  Each object is loaded as a recipe file would be (:func:`reconciler.load.load_objects`); an
  object the loader refuses is left out of the pass and reported (its status says Stalled,
  InvalidSpec) — one bad object does not stop the others.
* :class:`DirectorySource` (``--source directory``): files under ``--recipes`` (and ``--policy``),
  read again at the start of every pass (a ConfigMap volume is updated in place by the kubelet);
  a directory the loader refuses stops every pass until it is fixed, as ``apply`` would.

Both give a :class:`Desired`: the inputs of the pass, the refused objects, and the objects'
generations (for their status).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconciler.errors import InputError, InputErrors
from reconciler.load import Inputs, load_inputs, load_objects
from reconciler.load.pathwords import confined
from reconciler.model.selector import LabelSelector


@dataclass(frozen=True)
class Desired:
    """The desired state of one pass. ``invalid``: object name → why the loader refused it."""

    inputs: Inputs
    invalid: Mapping[str, str] = field(default_factory=dict)
    revision: str = ""


class DesiredState(Protocol):
    """A source of the desired state."""

    def current(self) -> Desired:
        """The inputs of the next pass. Raises InputError when nothing can be loaded."""
        ...

    def selectors(self) -> list[LabelSelector]:
        """The node selectors of the recipes last loaded (for the node triggers)."""
        ...


log = logging.getLogger(__name__)


def _empty() -> Inputs:
    return Inputs(recipes=(), policies={}, files=())


class _Warned:
    """Logs each warning of the inputs (a deprecated recipe form) once: every pass loads the
    inputs again, and the same line every pass would bury the log."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, inputs: Inputs) -> Inputs:
        for line in inputs.warnings:
            if line not in self._seen:
                self._seen.add(line)
                log.warning("%s", line)
        return inputs


class DirectorySource:
    """Recipe files under ``recipes`` and policies under ``policies`` (see the module docstring)."""

    def __init__(self, recipes: Sequence[str], policies: Sequence[str] = (), *, locked: bool = True) -> None:
        self.recipes, self.policies, self.locked = list(recipes), list(policies), locked
        self._last: Inputs = _empty()
        self._warned = _Warned()

    def current(self) -> Desired:
        """Read the files again. Raises InputError / InputErrors (positions name file:line:column)."""
        self._last = self._warned(load_inputs(self.recipes, self.policies, locked=self.locked, allow_empty=True))
        return Desired(self._last, revision=f"directory {', '.join(self.recipes)}")

    def selectors(self) -> list[LabelSelector]:
        """Selectors of the recipes last read."""
        return [r.nodeSelector for r in self._last.recipes]


class RepoFetcher(Protocol):
    """A git branch or tag fetched on demand (:class:`reconciler.adapters.git.source.GitMirror`)."""

    def fetch(self) -> str:
        """The commit SHA the ref names now. Raises a ReconcilerError when the fetch fails."""
        ...

    def checkout(self, commit: str, prefixes: Sequence[str]) -> str:
        """A directory holding the files of ``commit`` under ``prefixes``."""
        ...


class GitSource:
    """Recipes at ``path`` and policies at ``policy_path`` of a git ref (``--source git``).

    :meth:`refresh` (called at ``--git-interval`` by the controller's fetch thread, and before the
    first pass) fetches the ref and, when it names a new commit, lays its files out and returns
    the reason for a pass; :meth:`current` loads the last commit laid out, as
    :class:`DirectorySource` does."""

    def __init__(self, fetcher: RepoFetcher, path: str = "", policy_path: str = "", *, locked: bool = True) -> None:
        self.fetcher, self.locked = fetcher, locked
        self.path, self.policy_path = path.strip("/"), policy_path.strip("/")
        self.commit = ""
        self._dir = ""
        self._mutex = threading.Lock()
        self._last: Inputs = _empty()
        self._warned = _Warned()

    def refresh(self) -> str:
        """Fetch; ``"git: new commit <sha>"`` when the ref moved (``""`` when not). Raises on a failed fetch."""
        commit = self.fetcher.fetch()
        with self._mutex:
            if commit == self.commit:
                return ""
        tree = self.fetcher.checkout(commit, [p for p in (self.path, self.policy_path) if p] or [""])
        with self._mutex:
            self.commit, self._dir = commit, tree
        return f"git: new commit {commit[:12]}"

    def current(self) -> Desired:
        """Load the files of the last commit fetched (fetching first when none was)."""
        if not self.commit:
            self.refresh()
        with self._mutex:
            base, commit = self._dir, self.commit
        recipes = [confined(base, self.path, "--git-path")]  # a symlink in the commit may not lead out
        policies = [confined(base, self.policy_path, "--git-policy-path")] if self.policy_path else []
        self._last = self._warned(load_inputs(recipes, policies, locked=self.locked, allow_empty=True,
                                              confine=(base, "the fetched commit")))
        return Desired(self._last, revision=f"git {commit[:12]}")

    def selectors(self) -> list[LabelSelector]:
        """Selectors of the recipes last loaded."""
        return [r.nodeSelector for r in self._last.recipes]


class ObjectSource:
    """NodeRecipe objects fed by a watch (thread-safe), policies from ``policies`` files."""

    def __init__(self, policies: Sequence[str] = (), *, locked: bool = True) -> None:
        self.policies, self.locked = list(policies), locked
        self._objects: dict[str, dict[str, Any]] = {}
        self._mutex = threading.Lock()
        self._last: Inputs = _empty()
        self._warned = _Warned()

    def observe(self, event: str, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        """A watch event of a NodeRecipe; returns the object as it was before (None: new)."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        with self._mutex:
            old = self._objects.get(name)
            if event == "DELETED":
                self._objects.pop(name, None)
            elif name:
                self._objects[name] = dict(obj)
            return old

    def replace(self, objects: Sequence[Mapping[str, Any]]) -> None:
        """Every object at once (after a fresh LIST)."""
        with self._mutex:
            self._objects = {str((o.get("metadata") or {}).get("name")): dict(o) for o in objects}

    def get(self, name: str) -> dict[str, Any] | None:
        """Object ``name`` as last seen (a copy), or None."""
        with self._mutex:
            obj = self._objects.get(name)
        return dict(obj) if obj is not None else None

    def generation(self, name: str) -> int | None:
        """``metadata.generation`` of object ``name`` (None: no such object)."""
        with self._mutex:
            obj = self._objects.get(name)
        if obj is None:
            return None
        gen = (obj.get("metadata") or {}).get("generation")
        return gen if isinstance(gen, int) else 0

    def uid(self, name: str) -> str | None:
        """``metadata.uid`` of object ``name`` (None: no such object)."""
        with self._mutex:
            obj = self._objects.get(name)
        uid = (obj.get("metadata") or {}).get("uid") if obj is not None else None
        return uid if isinstance(uid, str) and uid else None

    def conditions(self, name: str) -> list[Mapping[str, Any]]:
        """``status.conditions`` of object ``name`` as last seen."""
        with self._mutex:
            obj = self._objects.get(name) or {}
        conds = (obj.get("status") or {}).get("conditions")
        return [c for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []

    def current(self) -> Desired:
        """Load every object; the ones refused are left out and listed in ``invalid``.

        Raises InputError when the policy files themselves cannot be loaded."""
        with self._mutex:
            objects = [self._objects[k] for k in sorted(self._objects)]
        invalid: dict[str, str] = {}
        try:
            inputs = load_objects(objects, self.policies, locked=self.locked)
        except (InputError, InputErrors):
            good = []
            for obj in objects:
                name = str(obj["metadata"]["name"])
                try:
                    load_objects([obj], self.policies, locked=self.locked)
                    good.append(obj)
                except (InputError, InputErrors) as e:
                    invalid[name] = str(e)
            inputs = load_objects(good, self.policies, locked=self.locked)
        self._last = self._warned(inputs)
        gens = ",".join(f"{r.name}@{self.generation(r.name)}" for r in inputs.recipes)
        return Desired(inputs, invalid, revision=f"NodeRecipe objects {gens}"[:200])

    def selectors(self) -> list[LabelSelector]:
        """Selectors of the recipes last loaded."""
        return [r.nodeSelector for r in self._last.recipes]


def files_fingerprint(paths: Sequence[str]) -> str:
    """sha256 over the names and contents of every file under ``paths`` (files or directories,
    followed through symlinks, as a ConfigMap volume's ``..data`` link is; hidden ``..``
    entries skipped so each file counts once); a missing or unreadable path, or one that is not a
    regular file (a FIFO is never opened for reading: it would block the loop), counts as its
    error. What the controller compares to notice that mounted recipes or policies changed."""
    from reconciler.fileio.reading import read_input
    from reconciler.load.yamlsafe import MAX_FILE_BYTES

    h = hashlib.sha256()
    for top in sorted(paths):
        if os.path.isdir(top):
            files = []
            visited: set[str] = set()
            for root, dirs, names in os.walk(top, followlinks=True):
                real = os.path.realpath(root)
                if real in visited:  # a symlink loop: each directory once
                    dirs[:] = []
                    continue
                visited.add(real)
                dirs[:] = sorted(d for d in dirs if not d.startswith(".."))
                files += [os.path.join(root, n) for n in names if not n.startswith("..")]
        else:
            files = [top]
        for f in sorted(files):
            h.update(f.encode("utf-8", "surrogateescape") + b"\0")
            try:
                h.update(read_input(f, MAX_FILE_BYTES))
            except InputError as e:
                h.update(f"error {e.message}".encode())
            h.update(b"\0")
    return h.hexdigest()

