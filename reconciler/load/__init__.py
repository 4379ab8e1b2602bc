"""The ``load`` layer: recipe and policy files → validated, frozen models (pure: no network).

Public API: :func:`load_inputs`, :func:`load_objects` (NodeRecipe objects from the cluster),
:class:`Inputs`, :func:`policy_for`.

Accepted documents (any file may hold several, separated by ``---``):

=============================================  ==================  ==========================
apiVersion                                     kind                becomes
=============================================  ==================  ==========================
``reconciler.nodewright.dev/v1alpha1``         ``NodeRecipe``      Recipe (origin NodeRecipe)
``nodewright.nvidia.com/v1alpha1``             ``NodeWright``      Recipe (origin NodeWright)
``skyhook.nvidia.com/v1alpha1``                ``Skyhook``         Recipe (origin Skyhook)
any of the three groups above, ``v1alpha1``    ``DeploymentPolicy``  DeploymentPolicy
``aicr.run/{v1alpha1,v1alpha2,v1alpha3,``      ``RecipeResult``    the Recipes (and policies)
``v1beta1,v1beta2,v1}``, ``aicr.nvidia.com/``                      of its
``v1alpha1``                                                       ``nodewright-customizations``
``v1``                                         ``List``            each of its ``items``
=============================================  ==================  ==========================

Objects as the API server returns them (``kubectl get -o yaml``: ``uid``, ``generation``,
``managedFields`` … in ``metadata``, a ``status``) are read as the files they came from.

Anything else at top level is an error naming the accepted kinds. Files referenced as manifests
by a RecipeResult are loaded only through it (so a directory holding both loads them once).

Errors: every problem of every file is collected and raised together as
:class:`~reconciler.errors.InputErrors` (one :class:`~reconciler.errors.InputError` when there is
only one), each with ``file:line:column`` and a dotted field path; no pydantic or ruamel
exception leaves this package.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType

from reconciler.errors import InputError, InputErrors, SourcePos, clip
from reconciler.load import compat, policies, recipes
from reconciler.load.pathwords import inside, path_problem
from reconciler.load.yamlsafe import YamlDoc, load_file
from reconciler.model.policy import DeploymentPolicy
from reconciler.model.recipe import Recipe

__all__ = ["InputPaths", "Inputs", "expand_paths", "load_inputs", "load_objects", "policy_for"]

#: Directory next to a recipes directory searched for policies when none are given.
POLICY_DIR = "policies"

LEGACY_POLICY = "legacy"
"""Name of the synthetic policy of a recipe without ``deploymentPolicy`` (NodeWright's metric label)."""


class InputPaths(list[str]):
    """Recipe paths as the command line gave them, carrying whether an empty set of recipes is
    intended (``--allow-empty``) and where warnings go (``warn``, called with each line of
    :attr:`Inputs.warnings`), so every verb that passes its paths to :func:`load_inputs` honours
    both. A plain list means "not intended" and no one to tell."""

    allow_empty: bool = False
    warn: Callable[[str], None] | None = None


EMPTY_HINT = "pass --allow-empty if an empty set is intended"


@dataclass(frozen=True)
class Inputs:
    """Everything loaded in one run.

    ``recipes`` are sorted by ``(priority, name)`` (NodeWright's order: lower priority first).
    ``policies`` maps policy name → policy. ``files`` lists every file read, in reading order
    (AICR manifest files included). ``recipe_docs`` / ``policy_docs`` keep each object's source
    document so later layers can point at a line (:meth:`locate`); ``reset_overrides`` holds
    NodeWright ``deploymentPolicyOptions.resetBatchStateOnCompletion`` per recipe name.
    ``warnings``: one line per deprecated form the inputs use (:func:`deprecation_warnings`).
    """

    recipes: tuple[Recipe, ...]
    policies: Mapping[str, DeploymentPolicy]
    files: tuple[str, ...]
    recipe_docs: Mapping[str, YamlDoc] = field(default_factory=dict, compare=False, repr=False)
    policy_docs: Mapping[str, YamlDoc] = field(default_factory=dict, compare=False, repr=False)
    reset_overrides: Mapping[str, bool] = field(default_factory=dict, compare=False, repr=False)
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @cached_property
    def resolved(self) -> Mapping[str, DeploymentPolicy | InputError]:
        """Each recipe's deployment policy by recipe name, or the :class:`InputError` saying why it
        has none (:func:`policy_for`), resolved once on first use for every later reader of these
        inputs: the plan, the apply, the controller's pass, the CLI's outputs."""
        out: dict[str, DeploymentPolicy | InputError] = {}
        for r in self.recipes:
            try:
                out[r.name] = _resolve(r, self)
            except InputError as e:
                out[r.name] = e
        return MappingProxyType(out)

    def only(self, names: Collection[str]) -> Inputs:
        """These inputs with only the recipes called ``names``, their policies as resolved here."""
        out = replace(self, recipes=tuple(r for r in self.recipes if r.name in names))
        out.__dict__["resolved"] = MappingProxyType({n: p for n, p in self.resolved.items() if n in names})
        return out

    def recipe(self, name: str) -> Recipe:
        """The recipe called ``name``.

        Raises:
            KeyError: no such recipe.
        """
        for r in self.recipes:
            if r.name == name:
                return r
        raise KeyError(name)

    def locate(self, recipe_name: str, path: Sequence[str | int] = ()) -> SourcePos:
        """Position of ``path`` (document path, e.g. ``("spec", "packages", "x", "version")``) in
        the file recipe ``recipe_name`` came from; the nearest existing ancestor when absent."""
        doc = self.recipe_docs.get(recipe_name)
        if doc is None:
            source = next((r.source for r in self.recipes if r.name == recipe_name), "")
            return SourcePos(source or "<unknown>")
        return doc.pos(path)


#: How many positions a deprecation warning lists before "and N more".
WARN_POSITIONS = 3


def deprecation_warnings(found: Sequence[recipes.Deprecated]) -> tuple[str, ...]:
    """One line per deprecated form (:data:`~reconciler.load.recipes.DEPRECATED_FORMS`) in
    ``found``: how many recipes use it, the first :data:`WARN_POSITIONS` positions, and the verb
    that converts the files, e.g. ``2 recipes give the release in metadata.version (...),
    deprecated: a.yaml:4:3, b.yaml:4:3; move it to spec.version with reconciler convert --write
    PATH...``."""
    out = []
    for form, what in recipes.DEPRECATED_FORMS.items():
        where = [str(d.pos) for d in found if d.form == form]
        if not where:
            continue
        shown = ", ".join(where[:WARN_POSITIONS]) + (f" and {len(where) - WARN_POSITIONS} more"
                                                     if len(where) > WARN_POSITIONS else "")
        count = f"{len(where)} recipe{'s give' if len(where) > 1 else ' gives'}"
        out.append(f"{count} {what}, deprecated: {shown}; move it to spec.version with {recipes.CONVERT_HINT}")
    return tuple(out)


def policy_for(recipe: Recipe, inputs: Inputs) -> DeploymentPolicy:
    """The deployment policy of ``recipe``: as :attr:`Inputs.resolved` holds it when ``recipe``
    is one of ``inputs``' recipes (resolved once), else resolved now.

    A recipe without ``deploymentPolicy`` gets :meth:`DeploymentPolicy.legacy` (one ``__default__``
    compartment, its ``interruptionBudget`` or 100 %; semantics §1.2.6), named
    :data:`LEGACY_POLICY`. A NodeWright ``deploymentPolicyOptions.resetBatchStateOnCompletion``
    on the recipe overrides the policy's flag (semantics §1.2.5).

    Raises:
        InputError: the named policy was not loaded; positioned at the recipe's
            ``spec.deploymentPolicy``.
    """
    got = inputs.resolved.get(recipe.name)
    if got is None or not any(r is recipe for r in inputs.recipes):
        got = _resolve(recipe, inputs)
    if isinstance(got, InputError):
        raise got
    return got


def _resolve(recipe: Recipe, inputs: Inputs) -> DeploymentPolicy:
    if recipe.deploymentPolicy is None:
        policy = DeploymentPolicy.legacy(LEGACY_POLICY, recipe.interruptionBudget).model_copy(
            update={"source": recipe.source}
        )
    else:
        found = inputs.policies.get(recipe.deploymentPolicy)
        if found is None:
            raise _missing_policy(recipe, inputs)
        policy = found
    override = inputs.reset_overrides.get(recipe.name)
    if override is not None and override != policy.resetBatchStateOnCompletion:
        policy = policy.model_copy(update={"resetBatchStateOnCompletion": override})
    return policy


def _missing_policy(recipe: Recipe, inputs: Inputs) -> InputError:
    known = ", ".join(sorted(inputs.policies)) or "none"
    hint = "" if inputs.policies else f"; pass --policy FILE or put it in {POLICY_DIR}/ next to the recipes"
    doc = inputs.recipe_docs.get(recipe.name)
    if doc is not None and doc.file == recipe.source:
        pos = doc.pos(("spec", "deploymentPolicy"))
    else:  # a recipe built elsewhere: name its file at least
        pos = SourcePos(recipe.source or "<unknown>")
    return InputError(
        f"deploymentPolicy {recipe.deploymentPolicy!r} is not defined (loaded policies: {known}){hint}",
        pos,
        "spec.deploymentPolicy",
    )


def _accepted() -> str:
    aicr = ", ".join(compat.AICR_API_VERSIONS)
    return (
        f"accepted: {recipes.KIND} ({recipes.API_VERSION}), "
        + ", ".join(f"{k} ({v})" for k, v in compat.CR_KINDS.items())
        + f", {policies.KIND} ({', '.join(policies.API_VERSIONS)}), {compat.AICR_KIND} ({aicr}), "
        "and a List (v1) of them"
    )


def expand_paths(paths: Sequence[str], errors: list[InputError], *, optional: bool = False) -> list[str]:
    """Files of ``paths``: files as given, directories → every ``*.yaml``/``*.yml`` below them
    (recursively, hidden directories skipped, sorted by path)."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found: list[str] = []
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                found.extend(
                    os.path.join(dirpath, f) for f in filenames if f.lower().endswith((".yaml", ".yml"))
                )
            if not found and not optional:
                errors.append(InputError("directory holds no *.yaml or *.yml file", SourcePos(p)))
            out.extend(sorted(found))
        elif (problem := path_problem(p)) is None:
            out.append(p)
        else:
            errors.append(InputError(problem, SourcePos(p)))
    return out


def _confined(files: list[str], confine: tuple[str, str], errors: list[InputError]) -> list[str]:
    """``files`` that resolve inside ``confine[0]``; each other one is an error (a symlink out)."""
    root, what = confine
    out = []
    for f in files:
        if inside(root, f):
            out.append(f)
        else:
            errors.append(InputError(f"a symlink leading outside {what} (to {clip(os.path.realpath(f), 120)}); "
                                     "refused, not read", SourcePos(f)))
    return out


def _sibling_policies(paths: Sequence[str]) -> list[str]:
    """``policies/`` next to each directory in ``paths`` (``recipes/`` → ``policies/``), or next to
    the directory of each file (``recipes/a.yaml`` → ``policies/``)."""
    out: list[str] = []
    for p in paths:
        base = p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))
        sib = os.path.join(os.path.dirname(os.path.normpath(base)), POLICY_DIR)
        if os.path.isdir(sib) and os.path.realpath(sib) != os.path.realpath(p) and sib not in out:
            out.append(sib)
    return out


class _Run:
    """The state of one :func:`load_inputs` call."""

    def __init__(self, locked: bool) -> None:
        self.locked = locked
        self.errors: list[InputError] = []
        self.files: list[str] = []
        self.recipes: list[recipes.LoadedRecipe] = []
        self.policies: list[policies.LoadedPolicy] = []
        self.claimed: set[str] = set()  # real paths of files read as AICR manifests
        # policies that could not be loaded (by metadata.name), and whether a file could not be read
        # at all: a recipe naming such a policy is not told it "is not defined" (the policy's own
        # error is the one to fix; the check runs again once it loads)
        self.broken_policies: set[str] = set()
        self.unreadable = False

    def add_file(self, path: str) -> None:
        if path not in self.files:
            self.files.append(path)

    def dispatch(self, doc: YamlDoc, *, policy_only: bool) -> None:
        data = doc.data
        if not isinstance(data, dict):
            found = "list" if isinstance(data, list) else "scalar"
            self.errors.append(
                doc.error((), f"a document must be a mapping with apiVersion and kind, found a {found}")
            )
            return
        api, kind = data.get("apiVersion"), data.get("kind")
        if api == "v1" and kind == "List":
            self.dispatch_list(doc, policy_only=policy_only)
            return
        if policy_only and kind != policies.KIND:
            self.errors.append(
                doc.error(
                    ("kind",), f"a policy file may only hold DeploymentPolicy resources (found kind {kind!r})"
                )
            )
            return
        if kind == recipes.KIND and api == recipes.API_VERSION:
            rec = recipes.load_node_recipe(doc, self.errors, locked=self.locked)
            if rec is not None:
                self.recipes.append(rec)
        elif isinstance(kind, str) and kind in compat.CR_KINDS and api == compat.CR_KINDS[kind]:
            rec = compat.load_custom_resource(doc, self.errors, locked=self.locked)
            if rec is not None:
                self.recipes.append(rec)
        elif kind == policies.KIND and api in policies.API_VERSIONS:
            pol = policies.load_policy(doc, self.errors)
            if pol is not None:
                self.policies.append(pol)
            else:
                meta = doc.data.get("metadata") if isinstance(doc.data, dict) else None
                name = meta.get("name") if isinstance(meta, dict) else None
                self.broken_policies.add(name if isinstance(name, str) else "")
        elif kind == compat.AICR_KIND and api in compat.AICR_API_VERSIONS:
            out = compat.load_recipe_result(doc, self.errors, locked=self.locked)
            for f in out.files:
                self.add_file(f)
                self.claimed.add(os.path.realpath(f))
            self.recipes.extend(out.recipes)
            self.policies.extend(out.policies)
        else:
            self.errors.append(self._unknown(doc, api, kind))

    def dispatch_list(self, doc: YamlDoc, *, policy_only: bool) -> None:
        """A ``v1`` ``List`` (what ``kubectl get -o yaml`` prints for several objects): each of its
        ``items`` is read as a document of its own (positions kept)."""
        items = doc.get(("items",))
        if not isinstance(items, list):
            self.errors.append(doc.error(("items",), "a List needs items: a list of objects"))
            return
        for i in range(len(items)):
            self.dispatch(doc.sub(("items", i)), policy_only=policy_only)

    @staticmethod
    def _unknown(doc: YamlDoc, api: object, kind: object) -> InputError:
        wanted = {
            recipes.KIND: (recipes.API_VERSION,),
            policies.KIND: policies.API_VERSIONS,
            compat.AICR_KIND: compat.AICR_API_VERSIONS,
            **{k: (v,) for k, v in compat.CR_KINDS.items()},
        }
        if isinstance(kind, str) and kind in wanted:
            regen = " (regenerate it with a current aicr)" if kind == compat.AICR_KIND else ""
            return doc.error(
                ("apiVersion",),
                f"kind {kind} needs apiVersion {' or '.join(wanted[kind])}, found {api!r}{regen}",
            )
        if api is None or kind is None:
            missing = " and ".join(k for k, v in (("apiVersion", api), ("kind", kind)) if v is None)
            return doc.error((), f"missing {missing}; {_accepted()}")
        return doc.error(("kind",), f"unknown apiVersion/kind {api!r}/{kind!r}; {_accepted()}")

    def check_names(self) -> None:
        """Recipe names and policy names are unique across all files."""
        first: dict[str, SourcePos] = {}
        for r in self.recipes:
            pos = r.doc.pos(("metadata", "name"))
            if r.recipe.name in first:
                self.errors.append(
                    r.doc.error(
                        ("metadata", "name"),
                        f"recipe name {r.recipe.name!r} is already used by {first[r.recipe.name]}",
                    )
                )
            else:
                first[r.recipe.name] = pos
        pfirst: dict[str, SourcePos] = {}
        for p in self.policies:
            pos = p.doc.pos(("metadata", "name"))
            if p.policy.name in pfirst:
                self.errors.append(
                    p.doc.error(
                        ("metadata", "name"),
                        f"policy name {p.policy.name!r} is already used by {pfirst[p.policy.name]}",
                    )
                )
            else:
                pfirst[p.policy.name] = pos

    def assemble(self, *, check_policies: bool) -> Inputs:
        """The :class:`Inputs` of what was read (recipes in (priority, name) order); with
        ``check_policies`` (policies were given or found) a recipe naming an unknown policy is
        an error added to ``errors``."""
        run = self
        order = {f: i for i, f in enumerate(run.files)}
        run.recipes.sort(key=lambda r: (order.get(r.doc.file, len(order)), r.doc.index))
        run.policies.sort(key=lambda p: (order.get(p.doc.file, len(order)), p.doc.index))
        run.check_names()

        policy_map = {p.policy.name: p.policy for p in run.policies}
        recipe_docs = {r.recipe.name: r.doc for r in run.recipes}
        inputs = Inputs(
            recipes=tuple(sorted((r.recipe for r in run.recipes), key=lambda r: (r.priority, r.name))),
            policies=MappingProxyType(policy_map),
            files=tuple(run.files),
            recipe_docs=MappingProxyType(recipe_docs),
            policy_docs=MappingProxyType({p.policy.name: p.doc for p in run.policies}),
            reset_overrides=MappingProxyType(
                {r.recipe.name: r.reset_batch_state for r in run.recipes if r.reset_batch_state is not None}
            ),
            warnings=deprecation_warnings([d for r in run.recipes for d in r.deprecated]),
        )
        if policy_map or check_policies:
            for r in run.recipes:
                name = r.recipe.deploymentPolicy
                if name is not None and name not in policy_map and not self._maybe_broken(name):
                    run.errors.append(_missing_policy(r.recipe, inputs))
        return inputs

    def _maybe_broken(self, policy: str) -> bool:
        """True when ``policy`` may be one that failed to load (a policy document of that name, or
        with no readable name, was refused; or some file could not be read at all)."""
        return self.unreadable or policy in self.broken_policies or "" in self.broken_policies

    def sort_key(self, e: InputError) -> tuple[int, int, int]:
        pos = e.pos or SourcePos("")
        idx = self.files.index(pos.file) if pos.file in self.files else len(self.files)
        return (idx, pos.line, pos.column)


def load_inputs(
    paths: Sequence[str], policy_paths: Sequence[str] = (), *, locked: bool = False, allow_empty: bool | None = None,
    confine: tuple[str, str] | None = None,
) -> Inputs:
    """Load recipes and policies from files and directories.

    ``paths``: files or directories (directories: every ``*.yaml``/``*.yml`` below, recursively,
    sorted; hidden directories skipped); they may hold any accepted kind. ``policy_paths``: files or
    directories holding only ``DeploymentPolicy`` resources. When ``policy_paths`` is empty, a
    ``policies/`` directory *next to* a directory in ``paths`` (``recipes/`` → ``policies/``) is
    used if it exists. A file reached twice is read once.

    ``locked``: every package needs ``containerSHA`` and an exact ``X.Y.Z`` version.

    ``confine``: ``(root, what)``: every file read must resolve (symlinks followed) inside the
    directory ``root`` (``what`` names it: "the fetched commit"); a file that leads out is an error
    and is not read, and a ``policies/`` directory next to the paths is looked for only inside it.
    For inputs the reconciler did not choose (a git commit's tree).

    When any policy was loaded (or policy paths were given or found), every recipe's
    ``deploymentPolicy`` must name one of them.

    Empty input is an error unless ``allow_empty`` (None: ``paths.allow_empty`` when ``paths`` is
    an :class:`InputPaths`, as every CLI verb passes them, else True for library callers such as
    revision comparison, where one side may rightly hold nothing): a file holding no document
    (empty, only comments, only null documents) is reported at its ``file:1:1``, and so is a set
    of inputs holding no recipe at all (at the first file, or the first path): "0/0 recipes
    succeeded" is never a success by accident.

    Raises:
        InputError: exactly one problem.
        InputErrors: several problems (``errors`` holds each, sorted by file and line).
    """
    if isinstance(paths, str):
        paths = [paths]
    if isinstance(policy_paths, str):
        policy_paths = [policy_paths]
    if allow_empty is None:
        allow_empty = paths.allow_empty if isinstance(paths, InputPaths) else True
    run = _Run(locked)
    recipe_files = expand_paths(paths, run.errors, optional=allow_empty)  # an empty directory is an empty set too
    pol_paths = list(policy_paths) or _sibling_policies(paths)
    if confine is not None:
        pol_paths = [p for p in pol_paths if p in policy_paths or inside(confine[0], p)]
    before = len(run.errors)
    # an empty policy directory is no policy (an optional ConfigMap volume that is absent mounts
    # one): a recipe naming a policy is still refused, naming it, and the others load
    policy_files = expand_paths(pol_paths, run.errors, optional=True)
    if confine is not None:
        recipe_files = _confined(recipe_files, confine, run.errors)
        policy_files = _confined(policy_files, confine, run.errors)
    run.unreadable = len(run.errors) > before  # a --policy path that cannot be read: its error first

    parsed: list[tuple[YamlDoc, bool]] = []
    seen: set[str] = set()
    for f, policy_only in [(f, False) for f in recipe_files] + [(f, True) for f in policy_files]:
        real = os.path.realpath(f)
        if real in seen:
            continue
        seen.add(real)
        run.add_file(f)
        try:
            docs = load_file(f)
        except InputError as e:
            run.errors.append(e)
            run.unreadable = True
            continue
        if not docs and not allow_empty:
            run.errors.append(InputError(
                f"the file holds no document (it is empty, or only comments or null documents); {EMPTY_HINT}",
                SourcePos(f, 1, 1),
            ))
        parsed.extend((doc, policy_only) for doc in docs)

    # RecipeResults first: the manifest files they claim are then not loaded a second time.
    def is_aicr(doc: YamlDoc, policy_only: bool) -> bool:
        return not policy_only and isinstance(doc.data, dict) and doc.data.get("kind") == compat.AICR_KIND

    for doc, policy_only in parsed:
        if is_aicr(doc, policy_only):
            run.dispatch(doc, policy_only=False)
    for doc, policy_only in parsed:
        if not is_aicr(doc, policy_only) and os.path.realpath(doc.file) not in run.claimed:
            run.dispatch(doc, policy_only=policy_only)

    inputs = run.assemble(check_policies=bool(policy_paths or pol_paths))

    if not run.recipes and not run.errors and not allow_empty:
        where = SourcePos(recipe_files[0], 1, 1) if recipe_files else SourcePos(paths[0] if paths else "<none>")
        found = f" (only {len(run.policies)} policies)" if run.policies else ""
        run.errors.append(InputError(f"no recipe found in {', '.join(paths)}{found}; {EMPTY_HINT}", where))

    if run.errors:
        unique: dict[str, InputError] = {}
        for err in sorted(run.errors, key=run.sort_key):
            unique.setdefault(str(err), err)
        errs = list(unique.values())
        raise errs[0] if len(errs) == 1 else InputErrors(errs)
    warn = getattr(paths, "warn", None)
    if warn is not None:
        for line in inputs.warnings:
            warn(line)
    return inputs


def load_objects(
    objects: Sequence[Mapping[str, object]], policy_paths: Sequence[str] = (), *, locked: bool = False
) -> Inputs:
    """Load ``NodeRecipe`` objects as the API server returns them (``reconciler controller
    --source crd``), with policies from files.

    Each object is reduced to its document form first (:func:`reconciler.load.crform.document_of`:
    server-set metadata and ``status`` dropped) and then checked exactly as a file would be; an
    error names the object (``NodeRecipe/<name>``) and the field, without a line (there is no file).

    Raises:
        InputError / InputErrors: as :func:`load_inputs`.
    """
    from reconciler.load.crform import document_of

    if isinstance(policy_paths, str):
        policy_paths = [policy_paths]
    run = _Run(locked)
    policy_files = expand_paths(policy_paths, run.errors, optional=True)  # an empty directory is no policy
    for i, obj in enumerate(objects):
        doc = document_of(obj, i)
        run.add_file(doc.file)
        run.dispatch(doc, policy_only=False)
    for f in policy_files:
        run.add_file(f)
        try:
            docs = load_file(f)
        except InputError as e:
            run.errors.append(e)
            continue
        for doc in docs:
            run.dispatch(doc, policy_only=True)
    inputs = run.assemble(check_policies=bool(policy_paths))
    if run.errors:
        unique: dict[str, InputError] = {}
        for err in sorted(run.errors, key=run.sort_key):
            unique.setdefault(str(err), err)
        errs = list(unique.values())
        raise errs[0] if len(errs) == 1 else InputErrors(errs)
    return inputs
