"""Package format (issue #8 item 1): config.json schema v1, step files, check modes, file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.errors import InputError, InputErrors
from reconciler.packages.config import (
    MODES,
    expected_check_path,
    find_package,
    load_package,
    validate_package,
)
from tests.unit.ops.conftest import RunCli

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "packages" / "sysctl-shell"


def step(name: str, path: str, **kw: object) -> dict[str, object]:
    base: dict[str, object] = {"name": name, "path": path, "arguments": [], "returncodes": [0],
                               "on_host": True, "idempotence": False, "upgrade_step": False}
    base.update(kw)
    return base


def make_package(root: Path, modes: dict[str, list[dict[str, object]]], files: tuple[str, ...] = (),
                 text: str | None = None, **top: object) -> Path:
    """A package directory: config.json (one key per line, so lines are predictable) and step files."""
    (root / "skyhook_dir").mkdir(parents=True, exist_ok=True)
    for f in files:
        p = root / "skyhook_dir" / f
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\nexit 0\n")
    doc: dict[str, object] = {"schema_version": "v1", "package_name": "demo", "package_version": "1.2.3",
                              "expected_config_files": [], "modes": modes}
    doc.update(top)
    (root / "config.json").write_text(text if text is not None else json.dumps(doc, indent=2))
    return root


def line_of(path: Path, needle: str, nth: int = 1) -> int:
    hits = [i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]
    return hits[nth - 1]


def test_example_package_is_clean() -> None:
    rep = validate_package(str(EXAMPLE))
    assert rep.ok and not rep.warnings, [str(e) for e in rep.errors + rep.warnings]
    cfg = rep.config
    assert cfg is not None and (cfg.package_name, cfg.package_version) == ("sysctl-shell", "1.0.0")
    assert set(cfg.defined_modes) == {"apply", "apply-check", "config", "config-check", "post-interrupt",
                                      "post-interrupt-check", "uninstall", "uninstall-check"}
    assert cfg.supports_uninstall
    assert cfg.steps("apply")[0].arguments == ("apply",)


def test_unpacked_image_layout_and_config_file_are_found(tmp_path: Path) -> None:
    make_package(tmp_path / "rootfs" / "skyhook-package",
                 {"apply": [step("a", "a.sh")], "apply-check": [step("a-check", "a_check.sh")]},
                 files=("a.sh", "a_check.sh"))
    root, cfg = find_package(str(tmp_path / "rootfs"))
    assert root == str(tmp_path / "rootfs" / "skyhook-package") and cfg.endswith("skyhook-package/config.json")
    assert find_package(cfg) == (root, cfg)
    assert load_package(str(tmp_path / "rootfs")).modes["apply"][0].path == "a.sh"
    with pytest.raises(InputError, match="not a package"):
        find_package(str(tmp_path))


def test_missing_check_mode_is_an_error_at_the_mode_line(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"apply": [step("a", "a.sh")], "apply-check": [step("c", "a_check.sh")],
                                   "config": [step("cfg", "cfg.sh")]},
                        files=("a.sh", "a_check.sh", "cfg.sh"))
    rep = validate_package(str(root))
    assert not rep.ok and rep.config is None
    (err,) = rep.errors
    assert err.field == "modes.config" and "no 'config-check' steps" in err.message
    assert err.pos is not None and err.pos.line == line_of(root / "config.json", '"config": [')
    assert not rep.warnings  # apply has its a_check.sh; config's missing check is already the error


def test_step_without_its_check_counterpart_is_a_warning(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"config": [step("cfg", "sub/cfg.sh")], "config-check": [step("c", "other.sh")]},
                        files=("sub/cfg.sh", "other.sh"))
    rep = validate_package(str(root))
    assert rep.ok and rep.config is not None
    (w,) = rep.warnings
    assert w.field == "modes.config[0].path" and "'sub/cfg_check.sh'" in w.message


def test_bad_steps_are_reported_with_file_line_and_field(tmp_path: Path) -> None:
    bad = step("do it", "missing.sh", arguments=[1], returncodes=[0, 2], on_host="yes", upgrade_step=True)
    esc = step("esc", "../outside.sh", returncodes=[])
    del esc["idempotence"]
    root = make_package(tmp_path, {"apply": [bad, esc], "apply-check": [step("ok", "a_check.sh")]},
                        files=("a_check.sh",))
    rep = validate_package(str(root))
    cfg = root / "config.json"
    got = {e.field: e for e in rep.errors}
    assert got["modes.apply[0].name"].pos.line == line_of(cfg, '"do it"')  # type: ignore[union-attr]
    assert "does not exist" in got["modes.apply[0].path"].message
    assert got["modes.apply[0].path"].pos.line == line_of(cfg, '"missing.sh"')  # type: ignore[union-attr]
    assert "must be strings, not integer" in got["modes.apply[0].arguments[0]"].message
    assert "must be a boolean, not string" in got["modes.apply[0].on_host"].message
    assert "only allowed in upgrade" in got["modes.apply[0].upgrade_step"].message
    assert "takes no arguments" in got["modes.apply[0].arguments"].message
    assert "stay inside" in got["modes.apply[1].path"].message
    assert "at least one integer" in got["modes.apply[1].returncodes"].message
    assert any(e.field == "modes.apply[1]" and "'idempotence'" in e.message for e in rep.errors)
    assert any("returncodes [2] never match" in w.message for w in rep.warnings)
    assert all(str(e).startswith(f"{cfg}:") for e in rep.errors)


def test_top_level_rules(tmp_path: Path) -> None:
    root = make_package(tmp_path, {"interrupt": [], "apply-check": [step("c", "c.sh")]}, files=("c.sh",),
                        schema_version="v2", package_version="v1.0", expected_config_files=["a.conf", "bad key"],
                        extra_field=1)
    rep = validate_package(str(root))
    fields = {e.field: e.message for e in rep.errors}
    assert "not supported" in fields["schema_version"]
    assert "no 'v' prefix" in fields["package_version"]
    assert "not a valid ConfigMap key" in fields["expected_config_files[1]"]
    assert "unknown mode 'interrupt'" in fields["modes.interrupt"]
    assert "only check modes have steps" in fields["modes"]
    assert any(w.field == "extra_field" for w in rep.warnings)


def test_upgrade_step_allowed_in_upgrade_modes_and_empty_package_rejected(tmp_path: Path) -> None:
    root = make_package(tmp_path / "up", {"upgrade": [step("u", "u.sh", upgrade_step=True)],
                                          "upgrade-check": [step("uc", "u_check.sh", upgrade_step=True)]},
                        files=("u.sh", "u_check.sh"))
    cfg = load_package(str(root))
    assert cfg.steps("upgrade")[0].upgrade_step
    empty = make_package(tmp_path / "empty", {})
    assert [e.message for e in validate_package(str(empty)).errors] == ["there are no steps in any mode"]
    with pytest.raises(InputErrors):
        load_package(str(make_package(tmp_path / "two", {"apply": [step("x", "x.sh")]}, package_version="1")))


def test_json_syntax_error_keeps_line_and_column(tmp_path: Path) -> None:
    root = make_package(tmp_path, {}, text='{\n  "schema_version": "v1",\n  "modes": {,}\n}\n')
    (err,) = validate_package(str(root)).errors
    assert "JSON syntax error" in err.message and err.pos is not None and (err.pos.line, err.pos.column) == (3, 13)


def test_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    text = '{\n  "schema_version": "v1",\n  "schema_version": "v1"\n}\n'
    (err,) = validate_package(str(make_package(tmp_path, {}, text=text))).errors
    assert "duplicate key 'schema_version'" in err.message and err.pos is not None and err.pos.line == 3
    assert "line 2" in err.message


def test_expected_check_path() -> None:
    assert expected_check_path("apply.sh") == "apply_check.sh"
    assert expected_check_path("dir.v1/run") == "dir.v1/run_check"
    assert expected_check_path("a/b.tar.gz") == "a/b.tar_check.gz"
    assert set(MODES) >= {"apply", "uninstall-check"} and "interrupt" not in MODES


def test_cli_package_validate(tmp_path: Path, cli: RunCli) -> None:
    rc, out, err = cli("package", "validate", str(EXAMPLE))
    assert rc == 0 and out.startswith("ok: sysctl-shell 1.0.0") and not err
    bad = make_package(tmp_path, {"apply": [step("a", "a.sh")]}, files=("a.sh",))
    rc, out, err = cli("package", "validate", str(bad))
    assert rc == 2 and f"{bad / 'config.json'}:" in err and "missing check mode" in err
    rc, out, _ = cli("package", "validate", str(EXAMPLE), str(bad), "-o", "json")
    doc = json.loads(out)
    assert rc == 2 and not doc["ok"] and [p["ok"] for p in doc["packages"]] == [True, False]
    assert doc["packages"][1]["errors"][0]["line"] > 0
    warn = make_package(tmp_path / "w", {"apply": [step("a", "a.sh")], "apply-check": [step("c", "other.sh")]},
                        files=("a.sh", "other.sh"))
    assert cli("package", "validate", str(warn))[0] == 0
    assert cli("package", "validate", "--strict", str(warn))[0] == 2
