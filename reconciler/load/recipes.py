"""Our ``reconciler.nodewright.dev/v1alpha1`` ``NodeRecipe`` documents → :class:`Recipe`.

Format: architecture.md §3.1. Also holds the conversion shared with the NodeWright/Skyhook
loader (:mod:`reconciler.load.compat`): packages (NodeWright admission rules 4-6 and 9,
semantics-nodewright.md §1.1, plus decision (g): cycles are rejected and named), the recipe
model itself, and locked mode.

Every function here appends :class:`~reconciler.errors.InputError` objects to an ``errors`` list
instead of raising, so one run reports every problem of every file.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import ValidationError

from reconciler.errors import InputError, SourcePos, suggestion
from reconciler.jsonsafe import json_type
from reconciler.load.yamlsafe import PathKey, YamlDoc, format_path, validation_errors
from reconciler.model.graph import find_cycle
from reconciler.model.recipe import MAX_RECIPE_NAME, OBJECT_NAME, Package, Recipe, parse_duration
from reconciler.model.redact import redact, redact_image
from reconciler.model.selector import check_label_key, check_label_value
from reconciler.model.versions import is_exact

API_VERSION = "reconciler.nodewright.dev/v1alpha1"
KIND = "NodeRecipe"

#: ``spec`` fields of a NodeRecipe (= :class:`Recipe` fields, less name/origin/source).
SPEC_FIELDS = (
    "version",
    "nodeSelector",
    "podNonInterruptLabels",
    "deploymentPolicy",
    "interruptionBudget",
    "runtimeRequired",
    "autoTaintNewNodes",
    "priority",
    "sequencing",
    "additionalTolerations",
    "drain",
    "timeouts",
    "readinessGate",
    "packages",
)
#: ``status`` is the controller's (an object saved with ``kubectl get -o yaml`` carries it): read, never checked.
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec", "status")
_META_KEYS = ("name", "version", "labels", "annotations")
#: ObjectMeta fields the API server sets, or that mean nothing to a recipe (k8s.io/apimachinery
#: ``ObjectMeta``): accepted and ignored, so an object saved as ``kubectl get -o yaml`` prints it
#: (``uid``, ``generation``, ``managedFields`` …) is a recipe file as it stands. ``namespace``:
#: the API server clears it on a cluster-scoped object.
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName", "namespace",
                   "finalizers", "ownerReferences")

Origin = Literal["NodeRecipe", "NodeWright", "Skyhook"]

#: The verb that rewrites recipe files into today's form (:mod:`reconciler.cli.convert`), named
#: by every deprecation warning.
CONVERT_HINT = "reconciler convert --write PATH..."

#: Deprecated forms a NodeRecipe is still read in, with what each warning says of it. Read for a
#: deprecation period (so a fleet of recipe files keeps working on upgrade), each with a warning
#: naming :data:`CONVERT_HINT`.
DEPRECATED_FORMS = {
    "metadata.version": "the release in metadata.version (no ObjectMeta field: the API server refuses the file)",
    "annotation": "the release in the annotation reconciler.nodewright.dev/version",
}


@dataclass(frozen=True)
class Deprecated:
    """A deprecated form (a key of :data:`DEPRECATED_FORMS`) found at ``pos``."""

    form: str
    pos: SourcePos


@dataclass(frozen=True)
class LoadedRecipe:
    """A converted recipe with the document it came from (for positions in later messages).

    ``reset_batch_state`` is a NodeWright/Skyhook ``deploymentPolicyOptions.
    resetBatchStateOnCompletion`` override (None: not set). ``deprecated``: the deprecated forms
    the document used.
    """

    recipe: Recipe
    doc: YamlDoc
    reset_batch_state: bool | None = None
    deprecated: tuple[Deprecated, ...] = ()


def check_keys(
    doc: YamlDoc, path: PathKey, allowed: Collection[str], errors: list[InputError], where: str,
    *, ignored: Collection[str] = (),
) -> bool:
    """Report each key of the mapping at ``path`` that is not in ``allowed`` ("did you mean").

    Returns False when something was reported. ``where`` names the mapping in the message.
    ``ignored``: keys accepted too but not offered in the message (server-set fields).
    """
    value = doc.get(path)
    if not isinstance(value, dict):
        return True
    ok = True
    for key in value:
        if key not in allowed and key not in ignored:
            ok = False
            msg = f"unknown field {key!r} in {where}{suggestion(key, allowed)} (accepted: {', '.join(allowed)})"
            errors.append(doc.error((*path, key), msg))
    return ok


def require_mapping(doc: YamlDoc, path: PathKey, errors: list[InputError], *, required: bool) -> bool:
    """Check that ``path`` holds a mapping (or is absent/null when not ``required``)."""
    value = doc.get(path)
    if value is None and not required:
        return True
    if not isinstance(value, dict):
        if doc.has(path):
            errors.append(doc.error(path, f"must be a mapping, found a {_kind_of(value)}"))
        else:
            errors.append(doc.error(path, "is missing (a mapping is required)"))
        return False
    return True


#: YAML's words for the JSON types of :func:`~reconciler.jsonsafe.json_type` that differ.
_YAML_WORDS = {"object": "mapping", "array": "list", "integer": "number"}


def _kind_of(value: Any) -> str:
    """What a YAML value is, in YAML's words (``mapping``, ``list``, ``number``, ``boolean``,
    ``string``, ``null``): :func:`~reconciler.jsonsafe.json_type`, renamed; a scalar of another
    type (a YAML timestamp) is a ``string``."""
    kind = json_type(value)
    if kind == "null" and value is not None:
        return "string"
    return _YAML_WORDS.get(kind, kind)


def object_name(doc: YamlDoc, errors: list[InputError], what: str) -> str | None:
    """``metadata.name``, checked against :data:`OBJECT_NAME`; None (and an error) when unusable."""
    if not require_mapping(doc, ("metadata",), errors, required=True):
        return None
    name = doc.get(("metadata", "name"))
    path = ("metadata", "name")
    if name is None:
        errors.append(doc.error(path, f"a {what} needs metadata.name"))
        return None
    if not isinstance(name, str) or not OBJECT_NAME.fullmatch(name):
        errors.append(
            doc.error(
                path,
                f"{what} name {name[:100]!r} must be lower-case letters, digits, '-' or '.' (a DNS-1123 "
                "subdomain: each dot-separated part starts and ends with a letter or digit), at most 63 "
                "characters" if isinstance(name, str) else f"{what} name must be a string",
            )
        )
        return None
    if what != "policy" and len(name) > MAX_RECIPE_NAME:
        errors.append(doc.error(path, f"{what} name {name!r} is {len(name)} characters; at most {MAX_RECIPE_NAME}: "
                                      f"it is the end of node annotation keys such as "
                                      f"reconciler.nodewright.dev/nodeState_<name>, whose name part is at most 63"))
        return None
    return name


#: Kubernetes' cap on all annotations of one object (``TotalAnnotationSizeLimitB``), in bytes.
MAX_ANNOTATION_BYTES = 256 * 1024


def check_metadata(doc: YamlDoc, errors: list[InputError]) -> None:
    """``metadata.labels`` and ``metadata.annotations`` as the Kubernetes API validates them
    (``ValidateLabels``, ``ValidateAnnotations``): mappings of strings; label keys and annotation
    keys are qualified names (:func:`~reconciler.model.selector.check_label_key`), label values
    valid label values, all annotations together at most :data:`MAX_ANNOTATION_BYTES`; and the
    estimate annotations (:func:`check_estimate_annotations`)."""
    for field in ("labels", "annotations"):
        path = ("metadata", field)
        value = doc.get(path)
        if value is None:
            continue
        if not isinstance(value, dict):
            errors.append(doc.error(path, f"metadata.{field} must be a mapping of strings, found a {_kind_of(value)}"))
            continue
        size = 0
        for k, v in value.items():
            where = (*path, k)
            if not isinstance(v, str):
                errors.append(doc.error(where, f"{field} values must be strings, found a {_kind_of(v)} (quote it)"))
                continue
            try:
                check_label_key(k)
                if field == "labels":
                    check_label_value(v)
            except ValueError as e:
                errors.append(doc.error(where, str(e)))
            size += len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass"))
        if field == "annotations" and size > MAX_ANNOTATION_BYTES:
            errors.append(doc.error(path, f"annotations hold {size} bytes; Kubernetes allows {MAX_ANNOTATION_BYTES}"))
    check_estimate_annotations(doc, errors)


#: Recipe annotations that set the assumptions of the simulated duration estimate (Go durations,
#: e.g. ``45s``, ``8m``): the time one stage takes and the time a reboot takes until the node is
#: Ready again. Read by :mod:`reconciler.cli.estimate`; checked at load (:func:`check_estimate_annotations`),
#: so a bad value fails ``validate`` and ``plan`` alike, not only a run that estimates.
STAGE_ESTIMATE_ANNOTATION = "reconciler.nodewright.dev/estimate-stage-duration"
REBOOT_ESTIMATE_ANNOTATION = "reconciler.nodewright.dev/estimate-reboot-duration"
#: Every estimate annotation, with what it sets (for messages).
ESTIMATE_ANNOTATIONS = {STAGE_ESTIMATE_ANNOTATION: "the stage time", REBOOT_ESTIMATE_ANNOTATION: "the reboot time"}
#: Longest stage or reboot time the annotations (and ``--stage-time``/``--reboot-time``) accept: one week.
MAX_ESTIMATE_SECONDS = 7 * 24 * 3600.0


def estimate_seconds(value: str) -> float:
    """An estimate annotation's value (a Go duration of at most :data:`MAX_ESTIMATE_SECONDS`) in seconds.

    Raises:
        ValueError: not a Go duration, or too long (the message quotes at most 80 characters of it).
    """
    return parse_duration(value, maximum=MAX_ESTIMATE_SECONDS)


def estimate_annotation(doc: YamlDoc, key: str) -> float | None:
    """Seconds of the estimate annotation ``key`` (one of :data:`ESTIMATE_ANNOTATIONS`) in
    ``doc``'s ``metadata.annotations``; None when it is absent or not a string (a non-string value
    is :func:`check_metadata`'s to report).

    Raises:
        InputError: not a Go duration the estimate accepts (:func:`estimate_seconds`), at the
            annotation's value, naming it.
    """
    notes = doc.get(("metadata", "annotations"))
    value = notes.get(key) if isinstance(notes, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return estimate_seconds(value)
    except ValueError as e:
        what = ESTIMATE_ANNOTATIONS.get(key, "a time")
        raise doc.error(("metadata", "annotations", key), f"{what} the simulated estimate assumes: {e}") from None


def check_estimate_annotations(doc: YamlDoc, errors: list[InputError]) -> None:
    """Each of :data:`ESTIMATE_ANNOTATIONS` present in ``metadata.annotations`` must be a Go
    duration the estimate accepts (:func:`estimate_annotation`); errors are appended."""
    for key in ESTIMATE_ANNOTATIONS:
        try:
            estimate_annotation(doc, key)
        except InputError as e:
            errors.append(e)


def split_image(image: str, version: Any) -> tuple[str, str | None]:
    """Strip a tag equal to ``version`` from ``image``; returns ``(image, problem)``.

    Only text after the *last* ``/`` can be a tag, so ``localhost:5000/org/pkg`` has none
    (NodeWright PR #280). A digest (``@sha256:…``) in ``image`` is refused: it goes in
    ``containerSHA``.
    """
    if not image.strip():
        return image, "image must not be empty"
    if "://" in image:  # a URL (perhaps with user-info, whose "@" is no digest): not an image reference
        return image, (f"image {redact(image)!r} is a URL; give the repository without a scheme or credentials "
                       "(ghcr.io/org/pkg; pull credentials go in an image pull secret)")
    if "@" in image and not image.rpartition("@")[2].startswith("sha256:"):  # user[:token]@registry/path
        return image, (f"image {redact_image(image)!r} carries credentials before '@'; give the repository "
                       "without them (pull credentials go in an image pull secret)")
    if "@" in image:
        return image, f"image {image!r} carries a digest; put it in containerSHA and the image without it"
    head, sep, last = image.rpartition("/")
    if ":" not in last:
        return image, None
    base, tag = last.split(":", 1)
    if not isinstance(version, str):
        return image, None  # the version itself is reported
    if tag != version:
        return image, (
            f"image tag {tag!r} does not match version {version!r}; leave the tag out "
            "(the version is the tag) or make them equal"
        )
    return head + sep + base, None


def convert_package(
    doc: YamlDoc, path: PathKey, key: str, errors: list[InputError], *, locked: bool
) -> Package | None:
    """Validate the package at ``path`` (map key ``key``) into a :class:`Package`.

    Rules (NodeWright admission, semantics §1.1): ``name`` optional and equal to the key; image tag
    equal to ``version`` and stripped; every ``configInterrupts`` key is a ``configMap`` key or a
    ``*`` glob matching at least one (``fnmatch.fnmatchcase``). ``resources`` quantities written as
    YAML numbers (``cpuLimit: 4``, as rendered AICR manifests do) become strings. Locked mode:
    ``containerSHA`` required and ``version`` an exact ``X.Y.Z`` (also each ``dependsOn`` version).
    Returns None when the package has errors (they are appended to ``errors``).
    """
    raw = doc.get(path)
    if not isinstance(raw, dict):
        errors.append(
            doc.error(path, f"package {key!r} must be a mapping with at least version and image")
        )
        return None
    before = len(errors)
    data = dict(raw)
    if "name" in data:
        if data["name"] != key:
            errors.append(
                doc.error((*path, "name"), f"package name {data['name']!r} must equal its key {key!r}")
            )
    else:
        data["name"] = key
    resources = data.get("resources")
    if isinstance(resources, dict):  # quantities may be YAML numbers (cpuLimit: 4), as in Kubernetes
        data["resources"] = {
            k: str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v
            for k, v in resources.items()
        }
    image = data.get("image")
    if isinstance(image, str):
        data["image"], problem = split_image(image, data.get("version"))
        if problem:
            errors.append(doc.error((*path, "image"), problem))
    cmap = data.get("configMap")
    cints = data.get("configInterrupts")
    if isinstance(cints, dict):
        keys = sorted(str(k) for k in cmap) if isinstance(cmap, dict) else []
        for pattern in cints:
            if pattern in keys or ("*" in pattern and any(fnmatchcase(k, pattern) for k in keys)):
                continue
            have = ", ".join(keys) if keys else "nothing"
            kind = "glob" if "*" in pattern else "key"
            errors.append(
                doc.error(
                    (*path, "configInterrupts", pattern),
                    f"configInterrupts {kind} {pattern!r} matches no configMap key (configMap has: {have})",
                )
            )
    if locked:
        if data.get("containerSHA") is None:
            errors.append(
                doc.error(
                    path, f"package {key!r} has no containerSHA; locked mode (the default) needs every image pinned by "
                    "digest (--no-locked allows it)"
                )
            )
        version = data.get("version")
        if isinstance(version, str) and not is_exact(version):
            errors.append(
                doc.error(
                    (*path, "version"),
                    f"package {key!r} version {version!r} is not exact; --locked needs X.Y.Z",
                )
            )
        deps = data.get("dependsOn")
        if isinstance(deps, dict):
            for dep, ver in deps.items():
                if isinstance(ver, str) and ver and not is_exact(ver):
                    errors.append(
                        doc.error(
                            (*path, "dependsOn", dep),
                            f"dependsOn version {ver!r} is not exact; --locked needs X.Y.Z",
                        )
                    )
    try:
        pkg = Package.model_validate(data)
    except ValidationError as exc:
        errors.extend(validation_errors(exc, doc, lambda loc: (*path, *loc), root=path))
        return None
    return pkg if len(errors) == before else None


def _same_version(a: str, b: str) -> bool:
    """Exactly the same version (NodeWright: "at exactly that version"); a leading ``v`` is optional."""
    return a.removeprefix("v") == b.removeprefix("v")


def check_dependencies(
    doc: YamlDoc,
    path: PathKey,
    raw_packages: Mapping[str, Any],
    packages: Mapping[str, Package],
    errors: list[InputError],
) -> None:
    """``dependsOn`` rules over the raw package map at ``path`` (so packages with other errors are
    still checked): each entry names a package of the recipe at exactly its version (compared
    when both packages are valid), and there is no cycle (decision (g); the message names it)."""
    names = list(raw_packages)
    listing = ", ".join(sorted(names))
    graph: dict[str, list[str]] = {}
    for pname, raw in raw_packages.items():
        deps = raw.get("dependsOn") if isinstance(raw, dict) else None
        if not isinstance(deps, dict):
            graph[pname] = []
            continue
        graph[pname] = [str(d) for d in deps]
        for dep, ver in deps.items():
            where = (*path, pname, "dependsOn", dep)
            if dep not in raw_packages:
                msg = f"dependsOn names {dep!r}, which is not a package of this recipe (packages: {listing})"
                errors.append(doc.error(where, msg))
                continue
            have = packages.get(dep)
            if have is not None and have.uninstall is not None and have.uninstall.apply:
                # NodeWright blocks dependents of an uninstalled package (DependencyUninstalled);
                # we refuse the recipe instead of leaving a node half-built
                errors.append(doc.error(
                    where,
                    f"{pname} depends on {dep}, which this recipe uninstalls (uninstall.apply: true); "
                    f"uninstall {pname} first or drop the dependency",
                ))
                continue
            if have is not None and isinstance(ver, str) and ver and not _same_version(ver, have.version):
                errors.append(
                    doc.error(
                        where,
                        f"dependsOn {dep} {ver}, but this recipe has {dep} at {have.version}",
                    )
                )
    cycle = find_cycle(graph)
    if cycle:
        errors.append(
            doc.error((*path, cycle[0], "dependsOn", cycle[1]), "dependsOn cycle: " + " -> ".join(cycle))
        )


def build_recipe(
    doc: YamlDoc,
    *,
    name: str,
    version: str,
    origin: Origin,
    fields: Mapping[str, PathKey],
    packages_path: PathKey,
    errors: list[InputError],
    locked: bool,
) -> Recipe | None:
    """Build a :class:`Recipe` from ``doc``.

    ``fields`` maps each present :class:`Recipe` field (other than name, version, origin, source,
    packages) to the path of its value in ``doc``; packages are read from ``packages_path``.
    Model errors are positioned through ``fields``; errors of the whole model (e.g. both
    ``deploymentPolicy`` and ``interruptionBudget``) at ``spec.deploymentPolicy``. Returns None
    when anything in the recipe is wrong.
    """
    before = len(errors)
    packages: dict[str, Package] = {}
    raw_pkgs = doc.get(packages_path)
    if raw_pkgs is not None and not isinstance(raw_pkgs, dict):
        errors.append(doc.error(packages_path, "packages must be a mapping of package name to package"))
    elif isinstance(raw_pkgs, dict):
        for key in raw_pkgs:
            pkg = convert_package(doc, (*packages_path, key), key, errors, locked=locked)
            if pkg is not None:
                packages[key] = pkg
        check_dependencies(doc, packages_path, raw_pkgs, packages, errors)
    kwargs: dict[str, Any] = {f: doc.get(p) for f, p in fields.items() if doc.get(p) is not None}
    kwargs.update(name=name, version=version, origin=origin, source=doc.file, packages=packages)

    def to_path(loc: Sequence[str | int]) -> PathKey:
        head = loc[0]
        if isinstance(head, str) and head in fields:
            return (*fields[head], *loc[1:])
        if head == "name":
            return ("metadata", "name", *loc[1:])
        if head == "version":
            return ("metadata", "version", *loc[1:])
        if head == "packages":
            return (*packages_path, *loc[1:])
        return tuple(loc)

    root = fields.get("deploymentPolicy", ("spec",))
    try:
        recipe = Recipe.model_validate(kwargs)
    except ValidationError as exc:
        errors.extend(validation_errors(exc, doc, to_path, root=root))
        return None
    return recipe if len(errors) == before else None


#: The release annotation: NodeWright/Skyhook resources (whose spec has no field for it) give their
#: release here (reconciler.load.compat); a NodeRecipe's is ``spec.version``, and this annotation
#: on a NodeRecipe is a deprecated form (:data:`DEPRECATED_FORMS`).
VERSION_ANNOTATION = "reconciler.nodewright.dev/version"

#: Where a NodeRecipe's release may be written: today's field, then the deprecated forms.
_RELEASE_PATHS: tuple[tuple[str, PathKey], ...] = (
    ("spec.version", ("spec", "version")),
    ("metadata.version", ("metadata", "version")),
    ("annotation", ("metadata", "annotations", VERSION_ANNOTATION)),
)


def release_of(doc: YamlDoc, errors: list[InputError]) -> tuple[str, PathKey | None, tuple[Deprecated, ...]]:
    """A NodeRecipe's release: ``(version, path it was read at, deprecated forms used)``.

    ``spec.version`` is the field; ``metadata.version`` and the :data:`VERSION_ANNOTATION`
    annotation are read too, as deprecated forms. Each given must be a string; given more than
    once with different values is an error at the second. ``("", None, ())`` when none is given.
    """
    version, where = "", None
    used: list[Deprecated] = []
    for form, path in _RELEASE_PATHS:
        if not doc.has(path):
            continue
        value = doc.get(path)
        if not isinstance(value, str):
            if form != "annotation":  # check_metadata reports a non-string annotation value
                hint = f" (YAML read {value!r} as a number: quote it)" if isinstance(value, int | float) else ""
                errors.append(doc.error(path, f"{form} must be a string{hint}"))
            continue
        if form in DEPRECATED_FORMS:
            used.append(Deprecated(form, doc.pos(path)))
        if where is None:
            version, where = value, path
        elif value != version:
            errors.append(doc.error(path, f"{format_path(path)} ({value!r}) and {format_path(where)} ({version!r}) "
                                          "disagree; give the release once, in spec.version"))
    return version, where, tuple(used)


def load_node_recipe(doc: YamlDoc, errors: list[InputError], *, locked: bool) -> LoadedRecipe | None:
    """Convert a ``NodeRecipe`` document (architecture.md §3.1).

    Top level: ``apiVersion``, ``kind``, ``metadata`` {``name`` (required), ``labels``,
    ``annotations``; server-set fields ignored}, ``spec`` (fields :data:`SPEC_FIELDS`; unknown
    ones are errors), ``status`` (ignored). The release is ``spec.version``
    (:func:`release_of`: the deprecated forms are read too, and listed in the result).
    """
    before = len(errors)
    check_keys(doc, (), _TOP_KEYS, errors, "a NodeRecipe")
    name = object_name(doc, errors, "recipe")
    check_keys(doc, ("metadata",), _META_KEYS, errors, "metadata", ignored=SERVER_METADATA)
    check_metadata(doc, errors)
    if not require_mapping(doc, ("spec",), errors, required=True):
        return None
    version, where, deprecated = release_of(doc, errors)
    check_keys(doc, ("spec",), SPEC_FIELDS, errors, "spec")
    fields: dict[str, PathKey] = {f: ("spec", f) for f in SPEC_FIELDS
                                  if f not in ("packages", "version") and doc.has(("spec", f))}
    if where is not None:
        fields["version"] = where
    recipe = build_recipe(
        doc,
        name=name or "invalid",
        version=version,
        origin="NodeRecipe",
        fields=fields,
        packages_path=("spec", "packages"),
        errors=errors,
        locked=locked,
    )
    if recipe is None or name is None or len(errors) != before:
        return None
    return LoadedRecipe(recipe, doc, deprecated=deprecated)
