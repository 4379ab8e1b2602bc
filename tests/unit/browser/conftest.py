"""Headless Chromium for the picture tests (Debian's ``chromium`` package; ``.ci/run`` installs it)
and mermaid.js (npm, cached outside the repository in ``~/.cache/reconciler-mermaid/<version>``).

Missing locally: the tests are skipped with the reason. In CI (``CI=true``) or with
``RECONCILER_REQUIRE_BROWSER=1`` a missing browser or mermaid.js is a failure.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: mermaid.js pinned for the Gantt test (what GitHub renders is a recent 11.x).
MERMAID_VERSION = "11.17.2"
MERMAID_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "reconciler-mermaid" / MERMAID_VERSION


def _required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("RECONCILER_REQUIRE_BROWSER") == "1"


def _missing(reason: str) -> None:
    if _required():
        pytest.fail(f"{reason} (required: CI=true or RECONCILER_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


class Browser:
    """``chromium --headless`` one page at a time: a screenshot or the DOM after scripts ran."""

    def __init__(self, exe: str, tmp: Path) -> None:
        self.exe, self.tmp = exe, tmp

    def _run(self, page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        args = [self.exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--allow-file-access-from-files", f"--user-data-dir={self.tmp / 'profile'}",
                "--virtual-time-budget=15000", *extra, page.resolve().as_uri()]
        return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)

    def screenshot(self, page: Path, size: tuple[int, int] = (1280, 1600)) -> bytes:
        out = self.tmp / (page.stem + ".png")
        r = self._run(page, f"--window-size={size[0]},{size[1]}", f"--screenshot={out}")
        assert out.exists(), r.stderr[-2000:]
        return out.read_bytes()

    def dom(self, page: Path) -> str:
        r = self._run(page, "--dump-dom")
        assert r.returncode == 0 and r.stdout, r.stderr[-2000:]
        return r.stdout


@pytest.fixture
def browser(tmp_path: Path) -> Browser:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        _missing("chromium is not installed (apt-get install chromium; .ci/run installs it)")
    assert exe is not None
    return Browser(exe, tmp_path)


@pytest.fixture(scope="session")
def mermaid_js() -> Path:
    js = MERMAID_CACHE / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    if not js.exists():
        npm = shutil.which("npm")
        if npm is None:
            _missing("npm is not installed: cannot fetch mermaid.js for the Gantt test")
        MERMAID_CACHE.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([str(npm), "install", "--no-audit", "--no-fund", "--prefix", str(MERMAID_CACHE),
                            f"mermaid@{MERMAID_VERSION}"], capture_output=True, text=True, timeout=600, check=False)
        if r.returncode != 0 or not js.exists():
            _missing(f"npm install mermaid@{MERMAID_VERSION} failed: {r.stderr.strip()[-500:]}")
    return js


def colours(png: bytes) -> tuple[tuple[int, int], dict[tuple[int, int, int], int]]:
    """((width, height), pixel count per RGB colour) of a screenshot (Pillow)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    counts = img.getcolors(maxcolors=img.width * img.height) or []
    return img.size, {rgb: n for n, rgb in counts}


def near(counts: dict[tuple[int, int, int], int], hex_rgb: str, tolerance: int = 6) -> int:
    """Pixels within ``tolerance`` (per channel) of ``#rrggbb``."""
    want = tuple(int(hex_rgb[i : i + 2], 16) for i in (1, 3, 5))
    return sum(n for rgb, n in counts.items() if all(abs(rgb[k] - want[k]) <= tolerance for k in range(3)))
