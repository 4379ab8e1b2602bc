"""Terminal output never interprets what it prints (issue #14): node names, labels, failure
messages and stage log tails from the cluster are shown literally — no rich markup is applied
(``[/etc/x]`` used to crash the summary, ``[error]`` vanished, ``n2[/x]`` crashed ``apply`` at its
first event), no emoji code is replaced, and no control character (ESC, CSI, C1, DEL, bidi
override) reaches the terminal raw: each is shown as a visible escape.

The fleet is built in memory and handed to ``apply`` through ``SimFleet.from_file``, so the test
holds whatever the snapshot loader accepts: the output side must be safe on its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.sim import fleet as sim_adapter
from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli import clusters
from reconciler.cli.main import main
from reconciler.load.snapshotfile import read_snapshot
from reconciler.report.safetext import markup, visible
from reconciler.testing.fleetgen import make_node

SHA = "sha256:" + "d" * 64
ESC = "\x1b"
RAW_CONTROLS = [ESC, "\x9b", "\x07", "\x7f", "\u202e", "\u2066", "\r", "\x00"]

#: hostile node names (markup, closing tags, ANSI, bidi, emoji code, C1 CSI)
NODES = ["n1[/x]", "n2[bold]red[/bold]", "n3\x1b[31mred\x1b[0m", "n4\u202eevil", "n5:warning:", "n6\x9b2J"]
#: a stage log tail: rich tags, an unknown closing tag, ANSI screen clear, an OSC title, bidi
LOG_TAIL = "open [/etc/shadow] failed [error] code 3\x1b[2J\x1b]0;pwned\x07 \u202edone :thumbs_up: \\"
LABEL = "[/label]\x1b[5m"


def recipe(path: Path) -> Path:
    path.write_text(f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: hostile}}
spec:
  version: 2026.11.1
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 6}}
  packages:
    base: {{version: 1.0.0, image: ghcr.io/example/base, containerSHA: "{SHA}"}}
""")
    return path


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    objects = [make_node(name, {"pool": "gpu", "team": LABEL}, annotations={"note": LABEL}) for name in NODES]
    for obj in objects:
        obj["metadata"]["labels"]["kubernetes.io/hostname"] = "h"  # the loader's business, not ours
    real = SimFleet.from_file

    def from_file(cls: type[SimFleet], path: str, config: Any = None, crash_after: int | None = None, *,
                  read_only: bool = False) -> SimFleet:
        if Path(path).name == "HOSTILE":
            return SimFleet(objects, config, crash_after)
        if Path(path).is_relative_to(tmp_path):  # a fleet this test saved: the hostile names on purpose
            # (the snapshot loader refuses names Kubernetes would refuse; the output must cope anyway)
            return SimFleet(read_snapshot(path).docs[0]["items"], config, crash_after)
        return real(path, config, crash_after, read_only=read_only)

    monkeypatch.setattr(sim_adapter.SimFleet, "from_file", classmethod(from_file))
    cfg = tmp_path / "what-if.yaml"
    cfg.write_text(json.dumps({"failures": [
        {"node": n, "package": "base", "stage": "apply", "exitCode": 3, "times": 99, "logTail": LOG_TAIL}
        for n in NODES[:3]]}))
    # the sim-config loader refuses a failure for a node name that cannot exist: built directly
    failures = tuple(StageFailure.model_construct(node=n, package="base", stage="apply", exitCode=3, times=99,
                                                  reason="Error", logTail=LOG_TAIL) for n in NODES[:3])
    monkeypatch.setattr(clusters, "load_sim_config", lambda _path: SimConfig(failures=failures))
    (tmp_path / "HOSTILE").write_text("")  # a regular file the CLI may open; its objects come from above
    return {"recipe": recipe(tmp_path / "r.yaml"), "config": cfg, "save": tmp_path / "after.yaml",
            "fleet": tmp_path / "HOSTILE"}


def assert_no_raw_controls(label: str, text: str) -> None:
    for c in RAW_CONTROLS:
        assert c not in text, f"{label}: raw {c!r} reached the output: {text[max(0, text.find(c) - 60):][:120]!r}"


def test_apply_prints_hostile_names_and_log_tails_literally(hostile: dict[str, Path],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["apply", str(hostile["recipe"]), "--cluster", f"sim:{hostile['fleet']}",
               "--sim-config", str(hostile["config"]),
               "--sim-save", str(hostile["save"])])
    out = capsys.readouterr()
    # three nodes fail (injected), the rest complete: all six are one batch (of 2, the first
    # failed batch would halt the rollout before the third failing node, issue 34)
    assert rc == 1, out.err
    assert "Traceback" not in out.out + out.err
    text = out.out
    assert_no_raw_controls("apply stdout", text + out.err)
    for name in NODES:  # every node appears, literally (escapes for control characters)
        assert visible(name) in text, (name, text)
    assert "n1[/x]" in text and "n2[bold]red[/bold]" in text and "n5:warning:" in text
    assert "n3\\x1b[31mred\\x1b[0m" in text and "n4\\u202eevil" in text and "n6\\x9b2J" in text
    # the summary lists the failed nodes with their log tail, markup and all
    assert "[/etc/shadow]" in text and "[error]" in text and ":thumbs_up:" in text
    assert "\\x1b[2J" in text and "\\x1b]0;pwned\\x07" in text and "\\u202edone" in text
    assert "failed" in text and "0/1 recipe(s) succeeded" in text
    saved = hostile["save"].read_text()
    assert "complete" in saved  # the rollout ran to its end despite the names


def test_status_views_show_hostile_names_literally(hostile: dict[str, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apply", str(hostile["recipe"]), "--cluster", f"sim:{hostile['fleet']}",
               "--sim-config", str(hostile["config"]),
                 "--sim-save", str(hostile["save"]), "-o", "json"]) == 1
    capsys.readouterr()
    saved = str(hostile["save"])
    for argv in (["status", "--cluster", f"sim:{saved}", "-o", "wide"],
                 ["node", "status", "--cluster", f"sim:{saved}", "-o", "wide"],
                 ["status", "--cluster", f"sim:{saved}", "--package", "base", "-o", "wide"]):
        rc = main(argv)
        out = capsys.readouterr()
        assert rc == 0, (argv, out.err)
        assert "Traceback" not in out.out + out.err
        assert_no_raw_controls(" ".join(argv[:2]), out.out + out.err)
        for name in NODES:
            assert visible(name) in out.out, (argv, name)
    for argv in (["status", "--cluster", f"sim:{saved}", "-o", "yaml"],
                 ["node", "status", "--cluster", f"sim:{saved}", "-o", "yaml"]):
        assert main(argv) == 0
        out = capsys.readouterr()
        assert_no_raw_controls(" ".join(argv), out.out)
        from ruamel.yaml import YAML

        names = [n["name"] for n in YAML(typ="safe").load(out.out)["nodes"]]
        assert sorted(names) == sorted(NODES)  # escaped for the terminal, still the same data


def test_plan_text_shows_hostile_names_literally(hostile: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["plan", str(hostile["recipe"]), "--cluster", f"sim:{hostile['fleet']}"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert_no_raw_controls("plan text", out.out)
    for name in NODES:
        assert visible(name) in out.out
    for fmt in ("markdown", "json"):
        assert main(["plan", str(hostile["recipe"]), "--cluster", f"sim:{hostile['fleet']}", "-o", fmt]) == 0
        assert_no_raw_controls(f"plan -o {fmt}", capsys.readouterr().out)


@pytest.mark.parametrize(("raw", "shown"), [
    ("plain-name", "plain-name"),
    ("a\x1b[31mb", "a\\x1b[31mb"),
    ("csi\x9bJ", "csi\\x9bJ"),
    ("bell\x07", "bell\\x07"),
    ("del\x7f", "del\\x7f"),
    ("nul\x00", "nul\\x00"),
    ("cr\roverwrite", "cr\\roverwrite"),
    ("line\nbreak", "line\\nbreak"),
    ("tab\there", "tab\\there"),
    ("rlo\u202eabc", "rlo\\u202eabc"),
    ("lri\u2066x\u2069", "lri\\u2066x\\u2069"),
    ("zw\u200bj", "zw\\u200bj"),
    ("bom\ufeff", "bom\\ufeff"),
    ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
    ("ümlaut ✓ 中文", "ümlaut ✓ 中文"),
])
def test_visible_shows_every_control_character(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_visible_multiline_keeps_newlines_and_tabs_only() -> None:
    assert visible("a\nb\tc\x1b[0m\r", multiline=True) == "a\nb\tc\\x1b[0m\\r"


@pytest.mark.parametrize("raw", ["[/etc/x]", "[error]", "[bold]x[/bold]", "[link=https://e.org]x[/link]",
                                 "trailing\\", "[[double]]", "[/]", ":warning:", "a[b]c\x1b"])
def test_markup_renders_literally(raw: str) -> None:
    from rich.console import Console

    console = Console(width=200, record=True, force_terminal=False, color_system=None, emoji=False)
    console.print(f"[bold]x[/bold] [red]{markup(raw)}[/red]", soft_wrap=True)  # as the CLI embeds them
    assert console.export_text().rstrip("\n") == f"x {visible(raw)}"


def test_package_paths_with_escape_sequences_are_shown_visibly(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    pkg = tmp_path / "pkg\x1b[31m[bold]\u202e"
    pkg.mkdir()
    (pkg / "config.json").write_text('{"schema_version": "v1", "package_name": "p", "package_version": "1.0.0",'
                                     ' "modes": {"apply": [{"name": "a\\u001b[2J.sh", "path": "a\\u001b.sh"}]}}')
    for argv in (["package", "validate", str(pkg)], ["package", "validate", str(tmp_path / "missing\x1b[0m")]):
        rc = main(argv)
        out = capsys.readouterr()
        assert rc == 2 and "Traceback" not in out.err
        assert_no_raw_controls("package validate", out.out + out.err)
        assert "\\x1b[" in out.out + out.err
