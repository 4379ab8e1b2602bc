"""Bad-input corpus (issue #6 §4): every malformed or hostile input under ``tests/data/bad/`` (plus
two generated here: a 50 MB recipe and an AICR manifest symlink leaving its bundle) makes
``reconciler validate --locked`` and ``reconciler apply --cluster sim:...`` exit 2 with errors
naming ``file:line:column`` (apply: exactly one line), no traceback, and zero writes: the fleet
file is unchanged, ``--sim-save`` is not written and the ``--status-repo`` git repository gets no
commit. See ``tests/data/bad/README.md`` for the header each corpus file carries.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.cli.main import main
from reconciler.testing.fleetgen import make_node

CORPUS = Path(__file__).resolve().parents[2] / "data" / "bad"
CORPUS_FIGURES: dict[str, int] = {"inputs_tried": 0, "inputs_rejected": 0}
FIFTY_MB = 50 * 1024 * 1024
#: An env value some corpus files carry (make_value_cases.py); no error may print it.
SECRET = "s3cr3t-do-not-print"
_POS = re.compile(r"^(?:error: )?(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): ")


@dataclass(frozen=True)
class Case:
    """One corpus input: the path given to the CLI, the file whose header describes it."""

    name: str
    path: Path
    described_by: Path

    def header(self, key: str) -> str:
        """The value of ``# <key>:`` in the first lines of the describing file ("" if absent)."""
        head = self.described_by.read_bytes()[:600]
        utf16 = head.startswith((b"\xff\xfe", b"\xfe\xff"))
        text = head.decode("utf-16", "replace") if utf16 else head.decode("utf-8", "replace")
        m = re.search(rf"^# {key}: (.*?)\r?$", text.replace("\r\n", "\n").replace("\r", "\n"), re.M)
        return m.group(1).strip() if m else ""


def corpus() -> list[Case]:
    """Every committed corpus entry (``*.yaml`` files and bundle directories), sorted."""
    out = []
    for p in sorted(CORPUS.iterdir()):
        if p.is_dir():
            if (p / "recipe-result.yaml").is_file():  # other directories hold other input kinds
                out.append(Case(p.name, p, p / "recipe-result.yaml"))
        elif p.suffix == ".yaml":
            out.append(Case(p.stem, p, p))
    return out


CASES = corpus()


def test_corpus_is_big_and_every_entry_says_what_it_checks() -> None:
    assert len(CASES) >= 160
    for c in CASES:
        assert c.header("checks") and c.header("expect"), f"{c.name}: missing '# checks:'/'# expect:' header"
    kinds = {c.name.split("-")[0] for c in CASES}
    assert {"yaml", "encoding", "kind", "field", "type", "semver", "deps", "policy", "aicr", "number"} <= kinds
    assert {"newline", "toleration", "configmap", "label", "duration", "integer", "quantity", "empty"} <= kinds


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, Path]:
    """A simulated fleet file (and its digest) and an empty bare git repository for status commits."""
    d = tmp_path_factory.mktemp("cluster")
    fleet = d / "fleet.yaml"
    buf = io.StringIO()
    YAML(typ="safe", pure=True).dump(
        {"apiVersion": "v1", "kind": "List", "items": [make_node(f"n{i}", {"pool": "gpu"}) for i in (1, 2)]}, buf)
    fleet.write_text(buf.getvalue())
    repo = d / "status.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    return fleet, hashlib.sha256(fleet.read_bytes()).hexdigest(), repo


def _git_state(repo: Path) -> tuple[str, list[str]]:
    refs = subprocess.run(["git", "--git-dir", str(repo), "for-each-ref"], capture_output=True, text=True,
                          check=True).stdout
    objects = sorted(str(p.relative_to(repo)) for p in (repo / "objects").rglob("*") if p.is_file())
    return refs, objects


def check_rejected(case: Case, cluster_files: tuple[Path, str, Path], tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    """Run both verbs on ``case`` and assert everything the module docstring promises."""
    fleet, digest, repo = cluster_files
    git_before = _git_state(repo)
    CORPUS_FIGURES["inputs_tried"] += 1
    rc = main(["validate", str(case.path), "--locked"])
    out = capsys.readouterr()
    assert rc == 2, f"{case.name}: validate exit {rc}\n{out.out}{out.err}"
    lines = [x for x in out.err.splitlines() if x.strip()]
    assert lines and "Traceback" not in out.err + out.out
    assert SECRET not in out.err + out.out, f"{case.name}: printed the env secret"
    for line in lines:
        m = _POS.match(line)
        assert m, f"{case.name}: validate line without file:line:column: {line!r}"
        assert Path(m["file"]).resolve().is_relative_to(case.path.resolve().parent), line
    expect = case.header("expect").lower()
    assert any(expect in x.lower() for x in lines), f"{case.name}: no error mentions {expect!r}: {lines}"
    at = case.header("at")
    if at:
        assert any(f":{at}: " in x and expect in x.lower() for x in lines), f"{case.name}: not at {at}: {lines}"

    saved = tmp_path / "saved.yaml"
    rc = main(["apply", str(case.path), "--cluster", f"sim:{fleet}", "--sim-save", str(saved),
               "--status-repo", str(repo), "--cluster-name", "corpus"])
    out = capsys.readouterr()
    assert rc == 2, f"{case.name}: apply exit {rc}\n{out.out}{out.err}"
    err = [x for x in out.err.splitlines() if x.strip()]
    assert len(err) == 1, f"{case.name}: apply printed {len(err)} lines: {err}"
    assert _POS.match(err[0]) and err[0].startswith("error: "), err[0]
    assert err[0][len("error: "):] in [*lines, *(x.split(" (and ")[0] for x in lines)] or err[0].endswith("more)")
    assert "Traceback" not in out.err + out.out and not out.out.strip()
    assert SECRET not in out.err + out.out, f"{case.name}: apply printed the env secret"
    # zero writes: the cluster file, the save target and the git repository are untouched
    assert hashlib.sha256(fleet.read_bytes()).hexdigest() == digest
    assert not saved.exists()
    assert _git_state(repo) == git_before
    CORPUS_FIGURES["inputs_rejected"] += 1


@pytest.mark.slow  # the whole corpus (174 cases, about 7 s); the fast tier keeps the tests below
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_corpus_input_is_rejected_with_position_and_no_writes(
        case: Case, cluster_files: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    check_rejected(case, cluster_files, tmp_path, capsys)


def test_fifty_megabyte_recipe_is_rejected_without_being_read(
        cluster_files: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    head = b"# checks: a 50 MB recipe (a huge generated configMap)\n# expect: byte limit\n# at: 1:1\n"
    body = (b"apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\nmetadata: {name: big, "
            b"version: 1.0.0}\nspec:\n  packages:\n    base:\n      version: 1.0.0\n      image: x\n"
            b"      configMap:\n        blob: \"")
    with open(big, "wb") as fh:
        fh.write(head + body)
        chunk = b"A" * (1024 * 1024)
        while fh.tell() < FIFTY_MB:
            fh.write(chunk)
        fh.write(b"\"\n")
    assert big.stat().st_size >= FIFTY_MB
    check_rejected(Case("fifty-megabytes", big, big), cluster_files, tmp_path, capsys)


def test_manifest_symlink_leaving_the_bundle_is_refused(
        cluster_files: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    bundle = tmp_path / "bundle"
    (bundle / "components").mkdir(parents=True)
    os.symlink(outside / "secret.yaml", bundle / "components" / "tuning.yaml")
    (bundle / "recipe-result.yaml").write_text(
        "# checks: a manifestFiles entry that is a symlink to a file outside the bundle\n"
        "# expect: outside\n"
        "apiVersion: aicr.run/v1alpha2\nkind: RecipeResult\nmetadata: {version: v0.21.3}\ncomponentRefs:\n"
        "  - name: nodewright-customizations\n    type: Helm\n    namespace: nodewright\n"
        "    manifestFiles: [components/tuning.yaml]\n")
    check_rejected(Case("symlink-escape", bundle, bundle / "recipe-result.yaml"), cluster_files, tmp_path, capsys)


def test_an_empty_recipe_file_is_rejected(
        cluster_files: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 0-byte file cannot carry a header; it is made here (issue #14: "0/0 recipes succeeded")."""
    empty = tmp_path / "empty.yaml"
    empty.write_bytes(b"")
    described = tmp_path / "described.yaml"
    described.write_text("# checks: an empty recipe file\n# expect: no document\n# at: 1:1\n")
    check_rejected(Case("empty-file", empty, described), cluster_files, tmp_path, capsys)


def test_one_empty_file_among_valid_ones_is_named(
        cluster_files: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "recipes"
    d.mkdir()
    good = (CORPUS / "newline-sha.yaml").read_text().replace('"' + "sha256:" + "a" * 64 + '\\n"', "sha256:" + "a" * 64)
    (d / "a-good.yaml").write_text(good)
    (d / "b-empty.yaml").write_text("# nothing here yet\n")
    assert main(["validate", str(d / "a-good.yaml"), "--locked"]) == 0
    capsys.readouterr()
    described = tmp_path / "described.yaml"
    described.write_text("# checks: an empty file next to a valid recipe\n"
                         "# expect: b-empty.yaml:1:1: the file holds no\n")
    check_rejected(Case("empty-among-valid", d, described), cluster_files, tmp_path, capsys)


def test_allow_empty_says_an_empty_set_is_intended(
        cluster_files: tuple[Path, str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fleet, digest, _ = cluster_files
    empty = tmp_path / "empty.yaml"
    empty.write_text("# no recipes on purpose\n")
    for argv in (["validate", str(empty), "--allow-empty"], ["validate", "--allow-empty", str(empty)],
                 ["plan", str(empty), "--allow-empty", "--cluster", f"sim:{fleet}"],
                 ["apply", "--allow-empty", str(empty), "--cluster", f"sim:{fleet}"]):
        assert main(argv) == 0, argv
        out = capsys.readouterr()
        assert "Traceback" not in out.err
    assert hashlib.sha256(fleet.read_bytes()).hexdigest() == digest
    for verb in (["validate"], ["plan", "--cluster", f"sim:{fleet}"], ["apply", "--cluster", f"sim:{fleet}"]):
        assert main([*verb, str(empty)]) == 2, verb
        assert f"{empty}:1:1: " in capsys.readouterr().err
    folder = tmp_path / "no-recipes-yet"  # an empty directory is an empty set too (it was exit 2 even so)
    folder.mkdir()
    for verb in (["validate"], ["plan", "--cluster", f"sim:{fleet}"], ["apply", "--cluster", f"sim:{fleet}"]):
        assert main([*verb, str(folder), "--allow-empty"]) == 0, verb
        assert "Traceback" not in capsys.readouterr().err
        assert main([*verb, str(folder)]) == 2, verb
        assert "directory holds no *.yaml or *.yml file" in capsys.readouterr().err
