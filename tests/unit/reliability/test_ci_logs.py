"""Cluster text is data in a CI log and in every rendered view (issue 36): under
``GITHUB_ACTIONS=true`` (and GitLab CI, Azure Pipelines) no line any view prints starts a runner
command, whatever the cluster holds. Stage log tails and node names carrying ``::set-output``,
``::add-mask::``, ``::stop-commands::``, ``##[...]``, ``##vso[...]`` and GitLab section markers go
through every view that shows cluster text — the apply event lines and summary (text, Markdown,
JSON, YAML, JSON lines), ``status``, ``node status``, ``package logs``, ``plan`` (text, Markdown),
the controller's log — and only the tool's own ``::error`` annotations stay commands. Markdown
views share one escaper (mentions broken), and the HTML report shows control and bidi characters
as the terminal does.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reconciler.adapters.sim import fleet as sim_adapter
from reconciler.adapters.sim.config import SimConfig, StageFailure
from reconciler.adapters.sim.fleet import SimFleet
from reconciler.cli import clusters
from reconciler.cli.main import main
from reconciler.cli.safeio import CiSafeStream, ci_log
from reconciler.load.snapshotfile import read_snapshot
from reconciler.report.safetext import ci_safe
from reconciler.testing.fleetgen import make_node

SHA = "sha256:" + "e" * 64
#: what a hostile workload prints: each line a runner command, some indented (the runner trims)
LOG_TAIL = ("::set-output name=deploy::yes\n::add-mask::hunter2\n  ::stop-commands::pwn\n"
            "##[set-env name=X;]y\n##vso[task.setvariable variable=x]y\n"
            "\u001b[0Ksection_start:1700000000:evil\r\u001b[0Kfake\nsection_end:1700000000:evil\n::error::forged")
#: node names Kubernetes would refuse, built in memory (the output side must cope on its own)
NODES = ["::warning::n1", "##[error]n2", "n3@org/admins\u202e\x1b[2J"]
#: a runner command at a line start (leading whitespace trimmed, as the runner does), or a GitLab
#: section marker anywhere
COMMAND = re.compile(r"^\s*(::|##\[|##vso\[)|section_(start|end):\d", re.M)
#: the tool's own annotation (GitHub Actions' ::error with our title)
OWN = re.compile(r"^::error (file=[^,]*,)?(line=\d+,)?(col=\d+,)?title=reconciler::")


def recipe(path: Path) -> Path:
    path.write_text(f"""\
apiVersion: reconciler.nodewright.dev/v1alpha1
kind: NodeRecipe
metadata: {{name: cilog, version: 2026.11.1}}
spec:
  nodeSelector: {{matchLabels: {{pool: gpu}}}}
  interruptionBudget: {{count: 3}}
  packages:
    base: {{version: 1.0.0, image: ghcr.io/example/base, containerSHA: "{SHA}"}}
""")
    return path


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    objects = [make_node(n, {"pool": "gpu"}, annotations={"note": "::add-mask::x"}) for n in NODES]
    real = SimFleet.from_file

    def from_file(cls: type[SimFleet], path: str, config: Any = None, crash_after: int | None = None, *,
                  read_only: bool = False) -> SimFleet:
        if Path(path).name == "CILOG":
            return SimFleet(objects, config, crash_after)
        if Path(path).is_relative_to(tmp_path):
            return SimFleet(read_snapshot(path).docs[0]["items"], config, crash_after)
        return real(path, config, crash_after, read_only=read_only)

    monkeypatch.setattr(sim_adapter.SimFleet, "from_file", classmethod(from_file))
    failures = tuple(StageFailure.model_construct(node=n, package="base", stage="apply", exitCode=3, times=99,
                                                  reason="Error", logTail=LOG_TAIL) for n in NODES)
    monkeypatch.setattr(clusters, "load_sim_config", lambda _path: SimConfig(failures=failures))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    cfg = tmp_path / "what-if.yaml"
    cfg.write_text("{}\n")
    (tmp_path / "CILOG").write_text("")
    return {"recipe": recipe(tmp_path / "r.yaml"), "config": cfg, "save": tmp_path / "after.yaml",
            "fleet": tmp_path / "CILOG"}


def commands_in(text: str) -> list[str]:
    """Every line of ``text`` a runner would execute, except the tool's own annotations."""
    return [line for line in text.splitlines() if COMMAND.search(line) and not OWN.match(line)]


def _run(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(argv)
    out = capfd.readouterr()
    assert "Traceback" not in out.out + out.err
    return rc, out.out + out.err


def test_every_view_of_cluster_text_is_inert_in_a_ci_log(world: dict[str, Path],
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    sim = ["--cluster", f"sim:{world['fleet']}", "--sim-config", str(world["config"])]
    saved = ["--cluster", f"sim:{world['save']}"]
    rc, text = _run(["apply", str(world["recipe"]), *sim, "--sim-save", str(world["save"]), "-v"], capfd)
    assert rc == 1 and "hunter2" in text and "stop-commands" in text, text  # the tails are shown ...
    assert commands_in(text) == [], text  # ... as data
    views = [
        ["apply", str(world["recipe"]), *sim, "-o", "markdown"],
        ["apply", str(world["recipe"]), *sim, "-o", "json"],
        ["apply", str(world["recipe"]), *sim, "-o", "yaml"],
        ["apply", str(world["recipe"]), *sim, "-o", "jsonl"],
        ["status", *saved, "-o", "wide"],
        ["status", *saved, "-o", "yaml"],
        ["node", "status", *saved, "-o", "wide"],
        ["node", "status", *saved, "-o", "yaml"],
        ["package", "logs", "base", "--recipe", "cilog", *saved],
        ["package", "logs", "base", "--recipe", "cilog", *saved, "-o", "json"],
        ["plan", str(world["recipe"]), *saved, "--retry-failed"],
        ["plan", str(world["recipe"]), *saved, "--retry-failed", "-o", "markdown"],
        ["plan", str(world["recipe"]), *saved, "--retry-failed", "-o", "yaml"],
    ]
    for argv in views:
        rc, text = _run(argv, capfd)
        assert rc in (0, 1), (argv, text)
        assert commands_in(text) == [], (argv, text)


def test_the_tools_own_annotations_still_reach_the_runner(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata: {name: '::x'}\n")
    for argv in (["validate", str(bad)], ["plan", str(bad), "--cluster", "sim:/nope"]):
        rc, text = _run(argv, capfd)
        assert rc == 2
        own = [line for line in text.splitlines() if OWN.match(line)]
        assert own and all("bad.yaml" in line for line in own), text
        assert commands_in(text) == [], text


@pytest.mark.parametrize(("raw", "safe"), [
    ("::set-output name=x::y", "\\::set-output name=x::y"),
    ("  ::add-mask::s", "  \\::add-mask::s"),
    ("\t::stop-commands::t", "\t\\::stop-commands::t"),
    ("\u00a0::debug::x", "\u00a0\\::debug::x"),  # the runner trims Unicode whitespace too
    ("##[error]x", "\\##[error]x"),
    ("##vso[task.complete]", "\\##vso[task.complete]"),
    ("a\n::b\nc", "a\n\\::b\nc"),
    ("x ::not-at-start", "x ::not-at-start"),
    ("section_start:1700000000:s", "section_start\\:1700000000:s"),
    ("see section_end:12:x", "see section_end\\:12:x"),
    ("section_start:later", "section_start:later"),
    ("plain", "plain"),
])
def test_ci_safe(raw: str, safe: str) -> None:
    assert ci_safe(raw) == safe
    assert not commands_in(ci_safe(raw))


class _Sink:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def test_the_stream_neutralises_lines_split_across_writes() -> None:
    sink = _Sink()
    s = CiSafeStream(sink)
    for piece in ("ok\n  :", ":add-mask", "::x\nmid", "dle ::y\n", "#", "#[group]\n"):
        s.write(piece)
        s.flush()  # a flush in the middle of a possible command holds it
    s.command("::error title=reconciler::own")
    s.write("::tail")
    s.close_line()
    assert sink.text == ("ok\n  \\::add-mask::x\nmiddle ::y\n\\##[group]\n::error title=reconciler::own\n"
                         "\\::tail")


def test_ci_log_is_told_by_the_runners_variables() -> None:
    assert ci_log({"GITHUB_ACTIONS": "true"}) and ci_log({"GITLAB_CI": "true"}) and ci_log({"TF_BUILD": "True"})
    assert not ci_log({}) and not ci_log({"GITHUB_ACTIONS": "false", "CI": "true"})


def test_markdown_views_break_mentions_and_share_one_escaper(world: dict[str, Path],
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    from reconciler.report import prcomment, render, runmarkdown, safetext

    assert runmarkdown.md is safetext.md_escape and render.md_escape is safetext.md_escape
    assert prcomment.md_escape is safetext.md_escape
    sim = ["--cluster", f"sim:{world['fleet']}", "--sim-config", str(world["config"])]
    for argv in (["apply", str(world["recipe"]), *sim, "-o", "markdown"],
                 ["plan", str(world["recipe"]), "--cluster", f"sim:{world['fleet']}", "-o", "markdown"]):
        rc, text = _run(argv, capfd)
        assert rc in (0, 1), text
        assert r"n3@&#8203;org/admins\\u202e \[2J" in text, text  # no mention; ESC a space, bidi shown
        assert "@org" not in text and "\x1b" not in text and "\u202e" not in text


def test_the_html_report_shows_controls_as_the_terminal_does(world: dict[str, Path], tmp_path: Path,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "report.html"
    rc, text = _run(["apply", str(world["recipe"]), "--cluster", f"sim:{world['fleet']}", "--sim-config",
                     str(world["config"]), "--report", str(page)], capfd)
    assert rc == 1, text
    html = page.read_text()
    assert "n3@org/admins\\u202e\\x1b[2J" in html
    assert "\x1b" not in html and "\u202e" not in html
