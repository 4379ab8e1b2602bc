"""The docs site (mkdocs.yml) builds in strict mode, and strict mode does fail on what it is there
for: a broken link, a link to a missing anchor, a page left out of the nav."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=root,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    r = build(ROOT, tmp_path / "site")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "site" / "how-to" / "rollback" / "index.html").is_file()


@pytest.mark.parametrize(("page", "text"), [
    pytest.param("how-to/pause.md", "[x](nowhere.md)", id="broken-link"),
    pytest.param("how-to/pause.md", "[x](rollback.md#no-such-part)", id="missing-anchor"),
    pytest.param("how-to/orphan.md", "# not in the nav", id="page-not-in-nav"),
])
def test_strict_mode_fails_on(tmp_path: Path, page: str, text: str) -> None:
    root = copy(tmp_path)
    path = root / "docs" / page
    path.write_text((path.read_text() if path.exists() else "") + "\n" + text + "\n")
    r = build(root, tmp_path / "site")
    assert r.returncode != 0, r.stdout + r.stderr
    assert "WARNING" in r.stderr and Path(page).name in r.stderr, r.stderr
