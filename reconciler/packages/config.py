"""Validate a NodeWright package: its ``config.json`` (agent schema v1) and the step files it names.

Layouts accepted by :func:`find_package` (semantics-nodewright.md §3.4):

* a package source directory: ``DIR/config.json`` with the steps under ``DIR/skyhook_dir/``;
* an unpacked image (``docker export``/``crane export`` then untar, or an unpacked OCI layer set):
  ``DIR/skyhook-package/config.json`` and ``DIR/skyhook-package/skyhook_dir/``;
* the ``config.json`` file itself (its directory is the package root).

Rules (the agent's JSON schema plus its cross-mode checks, §3.3–3.4):

* top level: ``schema_version`` = ``"v1"``; ``package_name`` a non-empty string;
  ``package_version`` a strict ``X.Y.Z[-pre][+build]`` (no ``v`` prefix, no shorthand);
  ``expected_config_files`` a list of ConfigMap keys; ``modes`` an object whose keys are step
  modes (:data:`MODES`) and whose values are lists of steps. ``root_dir`` is allowed; any other
  key is warned about (the agent ignores it).
* a step: ``name`` (``[a-zA-Z0-9_\\-.]+``), ``path``, ``arguments`` (strings), ``returncodes``
  (≥ 1 integers), ``on_host``, ``idempotence``, ``upgrade_step`` (booleans) are required, ``env``
  (string map) is optional; other keys are warned about. ``path`` must be relative, stay inside
  ``skyhook_dir`` and exist there. ``upgrade_step: true`` only in ``upgrade``/``upgrade-check``
  and without ``arguments`` (the agent passes ``<previous> <current>``).
* across modes: at least one step; at least one non-check mode with steps; every non-check mode
  with steps needs its check mode (``apply`` → ``apply-check`` …) with steps.
* warnings: a step without its ``<name>_check.<ext>`` counterpart in the paired check mode (the
  agent warns the same way), ``returncodes`` other than 0 and 1 (NodeWright's Python agent runs
  steps through a wrapper that turns any failure into exit 1, so they can never match),
  duplicate ``expected_config_files`` entries, empty modes.

Package directories may hold symlinks, but none may lead outside the package: ``config.json``,
``skyhook-package/`` and ``skyhook_dir/`` must resolve inside the directory given, and every step
file inside ``skyhook_dir/`` (resolved and compared, not just the written path); a step file must
be a regular file, at most :data:`MAX_STEP_DEPTH` directories deep.

Every problem is an :class:`~reconciler.errors.InputError` positioned at ``config.json:line:col``
with the dotted field (``modes.apply[0].path``). ``config.json`` is read with
:func:`reconciler.jsonsafe.parse_json` (bounded nesting, no NaN/Infinity, no integer beyond 64 bits,
no duplicate keys; errors keep line and column) and positions come from
:func:`reconciler.jsonsafe.json_positions`.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from reconciler.errors import InputError, InputErrors, SourcePos
from reconciler.jsonsafe import json_positions, json_type, parse_json
from reconciler.load.pathwords import path_problem
from reconciler.load.yamlsafe import YamlDoc, format_path, read_text
from reconciler.model.recipe import ENV_NAME, configmap_key_problem

#: Non-check step mode → its check mode.
CHECK_OF: dict[str, str] = {
    "apply": "apply-check",
    "config": "config-check",
    "post-interrupt": "post-interrupt-check",
    "upgrade": "upgrade-check",
    "uninstall": "uninstall-check",
}
#: Every mode a ``config.json`` may define steps for (the interrupt is not a step mode).
MODES: tuple[str, ...] = (*CHECK_OF, *CHECK_OF.values())
UPGRADE_MODES = ("upgrade", "upgrade-check")
SCHEMA_VERSIONS = ("v1",)
STEP_REQUIRED = ("name", "path", "arguments", "returncodes", "on_host", "idempotence", "upgrade_step")
STEP_KEYS = (*STEP_REQUIRED, "env")
TOP_REQUIRED = ("schema_version", "package_name", "package_version", "expected_config_files", "modes")
TOP_KEYS = (*TOP_REQUIRED, "root_dir")
STEP_NAME = re.compile(r"[a-zA-Z0-9_\-.]{1,253}")
#: A step path has at most this many directories (``a/b/c.sh`` has 2) and characters.
MAX_STEP_DEPTH = 16
MAX_STEP_PATH = 1024
_NUM = r"(?:0|[1-9][0-9]*)"
_PRE_ID = r"(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
#: The agent's ``package_version``: strict semver 2.0 ``X.Y.Z[-pre][+build]``.
STRICT_SEMVER = re.compile(
    rf"{_NUM}\.{_NUM}\.{_NUM}(?:-{_PRE_ID}(?:\.{_PRE_ID})*)?(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?"
)
IMAGE_DIR = "skyhook-package"
STEPS_DIR = "skyhook_dir"

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class Step:
    """One validated step of a mode (field names as in ``config.json``)."""

    name: str
    path: str
    arguments: tuple[str, ...]
    returncodes: tuple[int, ...]
    on_host: bool
    idempotence: bool
    upgrade_step: bool
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PackageConfig:
    """A package's ``config.json`` after validation. ``root`` is the package root (the directory
    holding ``config.json`` and ``skyhook_dir/``)."""

    schema_version: str
    package_name: str
    package_version: str
    expected_config_files: tuple[str, ...]
    modes: Mapping[str, tuple[Step, ...]]
    root: str
    config_file: str

    def steps(self, mode: str) -> tuple[Step, ...]:
        """Steps of ``mode`` (empty when the mode is not defined)."""
        return self.modes.get(mode, ())

    @property
    def defined_modes(self) -> tuple[str, ...]:
        """Modes with at least one step, in :data:`MODES` order."""
        return tuple(m for m in MODES if self.modes.get(m))

    @property
    def supports_uninstall(self) -> bool:
        """Whether the package ships ``uninstall`` steps."""
        return bool(self.modes.get("uninstall"))


@dataclass
class PackageReport:
    """Result of :func:`validate_package`: the config when it is valid, every error and warning."""

    root: str
    config_file: str
    config: PackageConfig | None = None
    errors: list[InputError] = field(default_factory=list)
    warnings: list[InputError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no error was found (warnings allowed)."""
        return not self.errors

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{ok, root, configFile, package, version, modes, errors, warnings}``;
        each problem is ``{file, line, column, field, message}``."""

        def rec(e: InputError) -> dict[str, Any]:
            p = e.pos or SourcePos(self.config_file)
            return {"file": p.file, "line": p.line, "column": p.column, "field": e.field, "message": e.message}

        c = self.config
        return {
            "ok": self.ok,
            "root": self.root,
            "configFile": self.config_file,
            "package": c.package_name if c else None,
            "version": c.package_version if c else None,
            "modes": {m: len(c.steps(m)) for m in c.defined_modes} if c else {},
            "errors": [rec(e) for e in self.errors],
            "warnings": [rec(w) for w in self.warnings],
        }


def find_package(path: str) -> tuple[str, str]:
    """Locate a package: ``(root directory, config.json path)`` for a package directory, an
    unpacked image (``<path>/skyhook-package/config.json``) or a ``config.json`` file.

    Raises:
        InputError: nothing that looks like a package at ``path``.
    """
    problem = path_problem(path)
    if problem is not None:
        raise InputError(problem, SourcePos(path))
    p = Path(path)
    if p.is_file():
        return str(p.parent), str(p)
    for root in (p, p / IMAGE_DIR):
        if (root / "config.json").is_file():
            for inner in (root, root / "config.json"):
                if not _inside(str(p), str(inner)):
                    raise InputError(
                        f"{inner.name} is a symlink to {os.path.realpath(inner)}, outside the package directory "
                        f"{path}; a package must not refer outside itself",
                        SourcePos(str(inner)),
                    )
            return str(root), str(root / "config.json")
    raise InputError(
        f"not a package: no config.json here nor in {IMAGE_DIR}/ (a package directory holds config.json and "
        f"{STEPS_DIR}/; an unpacked image holds /{IMAGE_DIR}/config.json)",
        SourcePos(path),
    )


def expected_check_path(step_path: str) -> str:
    """The check counterpart the agent looks for: ``_check`` before the file extension of the
    base name (``dir/foo.sh`` → ``dir/foo_check.sh``, ``foo`` → ``foo_check``)."""
    head, base = posixpath.split(step_path)
    stem, dot, ext = base.rpartition(".")
    name = f"{stem}_check.{ext}" if dot and stem and ext else f"{base.rstrip('.')}_check"
    return posixpath.join(head, name) if head else name


class _Checker:
    def __init__(self, file: str, doc: YamlDoc | None) -> None:
        self.file = file
        self.doc = doc
        self.errors: list[InputError] = []
        self.warnings: list[InputError] = []

    def pos(self, path: Path_) -> SourcePos:
        return self.doc.pos(path) if self.doc is not None else SourcePos(self.file)

    def error(self, path: Path_, message: str) -> None:
        self.errors.append(InputError(message, self.pos(path), format_path(path)))

    def warn(self, path: Path_, message: str) -> None:
        self.warnings.append(InputError(message, self.pos(path), format_path(path)))


def _inside(base: str, target: str) -> bool:
    """Whether ``target`` resolves (symlinks followed) to ``base`` or below it (resolved too)."""
    real_base = os.path.realpath(base)
    real = os.path.realpath(target)
    return real == real_base or os.path.commonpath([real_base, real]) == real_base


def _is_local(rel: str) -> bool:
    if not rel or rel.startswith("/") or "\\" in rel:
        return False
    norm = posixpath.normpath(rel)
    return norm != "." and norm != ".." and not norm.startswith("../")


def _check_step(c: _Checker, mode: str, i: int, raw: Any, steps_dir: str) -> Step | None:
    at: Path_ = ("modes", mode, i)
    if not isinstance(raw, dict):
        c.error(at, f"a step must be an object, not {json_type(raw)}")
        return None
    ok = True
    for k in STEP_REQUIRED:
        if k not in raw:
            c.error(at, f"missing required field {k!r}")
            ok = False
    for k in raw:
        if k not in STEP_KEYS:
            c.warn((*at, k), f"unknown step field {k!r} (the agent ignores it; known: {', '.join(STEP_KEYS)})")

    def typed(key: str, kind: type, what: str) -> bool:
        """True when ``key`` is present with a value of ``kind`` (str or list); else reports it."""
        if key not in raw:
            return False
        if not isinstance(raw[key], kind):
            c.error((*at, key), f"must be {what}, not {json_type(raw[key])}")
            return False
        return True

    name: Any = raw.get("name")
    if typed("name", str, "a string") and not STEP_NAME.fullmatch(name):
        c.error((*at, "name"), f"step name {name!r} must match {STEP_NAME.pattern}")
        ok = False
    elif "name" in raw and not isinstance(name, str):
        ok = False
    rel: Any = raw.get("path")
    if typed("path", str, "a string"):
        target = os.path.join(steps_dir, rel)
        if not _is_local(rel) or "\x00" in rel:
            c.error((*at, "path"), f"step path {rel!r} must be relative to {STEPS_DIR}/ and stay inside it")
            ok = False
        elif len(rel) > MAX_STEP_PATH or rel.count("/") >= MAX_STEP_DEPTH:
            c.error((*at, "path"), f"step path is nested too deep or too long (at most {MAX_STEP_DEPTH} "
                                   f"directories and {MAX_STEP_PATH} characters)")
            ok = False
        elif os.path.isdir(steps_dir) and not _inside(steps_dir, target):
            c.error((*at, "path"), f"step file {STEPS_DIR}/{rel} is a symlink resolving outside {STEPS_DIR}/ "
                                   f"({os.path.realpath(target)}); steps must be files of the package")
            ok = False
        elif not os.path.isfile(target):
            what = "is not a regular file" if os.path.lexists(target) else "does not exist"
            c.error((*at, "path"), f"step file {STEPS_DIR}/{rel} {what}")
            ok = False
    elif "path" in raw:
        ok = False
    args: Any = raw.get("arguments")
    if typed("arguments", list, "an array of strings"):
        for j, a in enumerate(args):
            if not isinstance(a, str):
                c.error((*at, "arguments", j), f"arguments must be strings, not {json_type(a)}")
                ok = False
    elif "arguments" in raw:
        ok = False
    codes: Any = raw.get("returncodes")
    if typed("returncodes", list, "an array of integers"):
        if not codes:
            c.error((*at, "returncodes"), "returncodes needs at least one integer (the successful exit codes)")
            ok = False
        for j, rc in enumerate(codes):
            if not isinstance(rc, int) or isinstance(rc, bool):
                c.error((*at, "returncodes", j), f"returncodes must be integers, not {json_type(rc)}")
                ok = False
            elif not 0 <= rc <= 255:  # a process exit status is 8 bits: anything else can never match
                c.error((*at, "returncodes", j), f"return code {rc} can never occur (exit codes are 0-255)")
                ok = False
        odd = sorted({rc for rc in codes if isinstance(rc, int) and not isinstance(rc, bool) and rc not in (0, 1)})
        if odd:
            c.warn(
                (*at, "returncodes"),
                f"returncodes {odd} never match under NodeWright's Python agent (its chroot wrapper reports "
                "every failing step as exit 1); node-reconciler preserves exit codes",
            )
    elif "returncodes" in raw:
        ok = False
    for key in ("on_host", "idempotence", "upgrade_step"):
        if key in raw and not isinstance(raw[key], bool):
            c.error((*at, key), f"must be a boolean, not {json_type(raw[key])}")
            ok = False
    env: Any = raw.get("env")
    if "env" in raw:
        if not isinstance(env, dict):
            c.error((*at, "env"), f"must be an object of strings, not {json_type(env)}")
            ok = False
        else:
            for k, v in env.items():
                if not ENV_NAME.fullmatch(k):
                    c.error((*at, "env", k), f"environment variable name {k[:80]!r} must match {ENV_NAME.pattern}")
                    ok = False
                if not isinstance(v, str):
                    c.error((*at, "env", k), f"env values must be strings, not {json_type(v)}")
                    ok = False
    if raw.get("upgrade_step") is True:
        if mode not in UPGRADE_MODES:
            c.error((*at, "upgrade_step"), f"upgrade_step is only allowed in {' and '.join(UPGRADE_MODES)}, not {mode}")
            ok = False
        if isinstance(args, list) and args:
            c.error((*at, "arguments"), "an upgrade_step takes no arguments (the agent passes <previous> <current>)")
            ok = False
    if not ok:
        return None
    return Step(
        name=name,
        path=rel,
        arguments=tuple(args),
        returncodes=tuple(codes),
        on_host=raw["on_host"],
        idempotence=raw["idempotence"],
        upgrade_step=raw["upgrade_step"],
        env=dict(env or {}),
    )


def check_config(data: Any, *, file: str, root: str, doc: YamlDoc | None = None) -> PackageReport:
    """Validate parsed ``config.json`` ``data`` of the package at ``root`` (pure except for the
    step-file existence checks). ``doc`` gives positions (None: errors name the file only)."""
    c = _Checker(file, doc)
    report = PackageReport(root, file)
    if not isinstance(data, dict):
        c.error((), f"config.json must hold a JSON object, not {json_type(data)}")
        report.errors = c.errors
        return report
    for k in TOP_REQUIRED:
        if k not in data:
            c.error((), f"missing required field {k!r}")
    for k in data:
        if k not in TOP_KEYS:
            c.warn((k,), f"unknown field {k!r} (the agent ignores it)")
    sv: Any = data.get("schema_version")
    if "schema_version" in data and sv not in SCHEMA_VERSIONS:
        c.error(("schema_version",),
                f"schema_version {sv!r} is not supported (supported: {', '.join(SCHEMA_VERSIONS)})")
    name: Any = data.get("package_name")
    if "package_name" in data and (not isinstance(name, str) or not name.strip()):
        c.error(("package_name",), "package_name must be a non-empty string")
    ver: Any = data.get("package_version")
    if "package_version" in data and (not isinstance(ver, str) or not STRICT_SEMVER.fullmatch(ver)):
        hint = " (no 'v' prefix)" if isinstance(ver, str) and ver.startswith("v") else ""
        c.error(("package_version",),
                f"package_version {ver!r} must be a full semantic version X.Y.Z[-pre][+build]{hint}")
    files: Any = data.get("expected_config_files")
    expected: list[str] = []
    if "expected_config_files" in data:
        if not isinstance(files, list):
            c.error(("expected_config_files",), f"must be an array of ConfigMap keys, not {json_type(files)}")
        else:
            for j, f in enumerate(files):
                if not isinstance(f, str):
                    c.error(("expected_config_files", j), f"must be a string, not {json_type(f)}")
                elif (problem := configmap_key_problem(f)) is not None:
                    c.error(("expected_config_files", j), problem)
                elif f in expected:
                    c.warn(("expected_config_files", j), f"{f!r} is listed twice")
                else:
                    expected.append(f)
    modes_raw: Any = data.get("modes")
    modes: dict[str, tuple[Step, ...]] = {}
    steps_dir = os.path.join(root, STEPS_DIR)
    if "modes" in data and not isinstance(modes_raw, dict):
        c.error(("modes",), f"modes must be an object of mode → steps, not {json_type(modes_raw)}")
    elif isinstance(modes_raw, dict):
        if os.path.isdir(steps_dir) and not _inside(root, steps_dir):
            c.error(("modes",), f"{STEPS_DIR}/ is a symlink to {os.path.realpath(steps_dir)}, outside the package "
                                "directory; a package must not refer outside itself")
            steps_dir = os.path.join(root, "\x00refused")  # no step is looked up through it
        elif not os.path.isdir(steps_dir):
            c.error(("modes",), f"the package has no {STEPS_DIR}/ directory next to config.json")
        for mode, raw_steps in modes_raw.items():
            if mode not in MODES:
                hint = (" (the interrupt is run by the operator, not defined in config.json)"
                        if mode == "interrupt" else "")
                c.error(("modes", mode), f"unknown mode {mode!r}{hint}; modes are: {', '.join(MODES)}")
                continue
            if not isinstance(raw_steps, list):
                c.error(("modes", mode), f"a mode holds an array of steps, not {json_type(raw_steps)}")
                continue
            if not raw_steps:
                c.warn(("modes", mode), f"mode {mode!r} has no steps (the agent runs it as a no-op)")
            parsed = [_check_step(c, mode, i, s, steps_dir) for i, s in enumerate(raw_steps)]
            modes[mode] = tuple(s for s in parsed if s is not None)
        _cross_mode(c, modes_raw)
    report.errors, report.warnings = c.errors, c.warnings
    if not c.errors:
        report.config = PackageConfig(
            schema_version=sv,
            package_name=name,
            package_version=ver,
            expected_config_files=tuple(expected),
            modes=modes,
            root=root,
            config_file=file,
        )
    return report


def _cross_mode(c: _Checker, modes_raw: Mapping[str, Any]) -> None:
    def n(mode: str) -> int:
        v = modes_raw.get(mode)
        return len(v) if isinstance(v, list) else 0

    if not any(n(m) for m in MODES):
        c.error(("modes",), "there are no steps in any mode")
        return
    if not any(n(m) for m in CHECK_OF):
        c.error(("modes",), f"only check modes have steps; define at least one of: {', '.join(CHECK_OF)}")
    for mode, check in CHECK_OF.items():
        if n(mode) and not n(check):
            c.error(("modes", mode), f"mode {mode!r} has steps but no {check!r} steps (missing check mode)")
    for mode, check in CHECK_OF.items():
        steps = modes_raw.get(mode)
        checks = modes_raw.get(check)
        if not isinstance(steps, list) or not n(check) or not isinstance(checks, list):
            continue
        paths = {s.get("path") for s in checks if isinstance(s, dict)}
        for i, s in enumerate(steps):
            if isinstance(s, dict) and isinstance(s.get("path"), str):
                want = expected_check_path(s["path"])
                if want not in paths:
                    c.warn(("modes", mode, i, "path"),
                           f"step {s['path']!r} has no check {want!r} in {check!r} (checks confirm the step's work)")


def validate_package(path: str) -> PackageReport:
    """Find and validate the package at ``path`` (see the module docstring). Never raises for a
    bad package: every problem is in the report; a path that holds no package at all, an
    unreadable file, a JSON syntax error or a refused JSON value (too deep, NaN, an integer beyond
    64 bits, a duplicate key; :func:`reconciler.jsonsafe.parse_json`) is the report's only error."""
    try:
        root, file = find_package(path)
    except InputError as e:
        return PackageReport(path, path, errors=[e])
    report = PackageReport(root, file)
    try:
        text = read_text(file)
        data = parse_json(text, file)
    except InputError as e:
        report.errors = [e]
        return report
    doc = YamlDoc(file, 0, data, MappingProxyType(json_positions(text)))
    return check_config(data, file=file, root=root, doc=doc)


def load_package(path: str) -> PackageConfig:
    """Validate the package at ``path`` and return its config.

    Raises:
        InputError: the first problem (``InputErrors`` with every problem when there are several).
    """
    report = validate_package(path)
    if report.config is None:
        if len(report.errors) == 1:
            raise report.errors[0]
        raise InputErrors(report.errors)
    return report.config
