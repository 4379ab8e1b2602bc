"""``reconciler convert``: recipe files rewritten into today's form (the release in spec.version),
the rest of each file byte for byte; a file that cannot be converted is named and left alone."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from reconciler.load import load_inputs
from reconciler.load.convert import convert_text
from tests.unit.ops.conftest import RunCli

ROOT = Path(__file__).resolve().parents[3]
HEAD = "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\n"
PKG = "  packages:\n    tools: {version: 1.0.0, image: ghcr.io/example/tools}  # pinned later\n"

OLD = f"""# a comment that stays
{HEAD}metadata:
  name: gpu   # the name
  version: "2026.11.2"   # the release
  labels: {{team: infra}}
spec:
  nodeSelector:
      matchLabels: {{pool: gpu}}
{PKG}"""

NEW = f"""# a comment that stays
{HEAD}metadata:
  name: gpu   # the name
  labels: {{team: infra}}
spec:
  version: "2026.11.2"
  nodeSelector:
      matchLabels: {{pool: gpu}}
{PKG}"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return p


def test_without_write_it_prints_the_diff_and_changes_nothing(tmp_path: Path, cli: RunCli) -> None:
    f = write(tmp_path, "r.yaml", OLD)
    rc, out, err = cli("convert", str(tmp_path))
    assert rc == 0 and f.read_text() == OLD
    assert [ln for ln in out.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")] == [
        '-  version: "2026.11.2"   # the release', '+  version: "2026.11.2"']
    assert "r.yaml:6:3: metadata.version moved to spec.version" in err
    assert "1 of 1 file(s) to convert (run again with --write)" in err


def test_write_rewrites_only_the_release_and_the_recipe_loads_the_same_without_warning(tmp_path: Path,
                                                                                         cli: RunCli) -> None:
    f = write(tmp_path, "r.yaml", OLD)
    before = load_inputs([str(f)])
    os.chmod(f, 0o640)
    rc, out, err = cli("convert", "--write", str(f))
    assert rc == 0 and out == f"converted {f}\n" and f.read_text() == NEW
    assert os.stat(f).st_mode & 0o777 == 0o640
    after = load_inputs([str(f)])
    assert after.warnings == () and before.warnings
    assert after.recipes[0].model_dump(exclude={"source"}) == before.recipes[0].model_dump(exclude={"source"})
    rc, out, err = cli("convert", "--write", str(f))  # nothing left to do
    assert rc == 0 and out == "" and "0 of 1 file(s) converted" in err


@pytest.mark.parametrize(("old", "new"), [
    # the annotation, alone in its mapping: the mapping goes too
    (f"{HEAD}metadata:\n  name: a\n  annotations:\n    reconciler.nodewright.dev/version: '7'\nspec:\n{PKG}",
     f"{HEAD}metadata:\n  name: a\nspec:\n  version: '7'\n{PKG}"),
    # the annotation beside another one
    (f"{HEAD}metadata:\n  name: a\n  annotations:\n    x/y: z\n    reconciler.nodewright.dev/version: '7'\n"
     f"spec:\n{PKG}",
     f"{HEAD}metadata:\n  name: a\n  annotations:\n    x/y: z\nspec:\n  version: '7'\n{PKG}"),
    # flow mappings, first and last entries
    (f"{HEAD}metadata: {{name: a, version: '7'}}\nspec: {{packages: {{}}}}\n",
     f"{HEAD}metadata: {{name: a}}\nspec: {{version: '7', packages: {{}}}}\n"),
    (f"{HEAD}metadata: {{version: 1.2.3, name: a}}\nspec: {{}}\n",
     f"{HEAD}metadata: {{name: a}}\nspec: {{version: 1.2.3}}\n"),
    # both deprecated places, same value; spec.version already there
    (f"{HEAD}metadata:\n  name: a\n  version: '7'\n  annotations: {{reconciler.nodewright.dev/version: '7'}}\n"
     f"spec:\n  version: '7'\n{PKG}",
     f"{HEAD}metadata:\n  name: a\nspec:\n  version: '7'\n{PKG}"),
    # a plain value with a comma moved into a flow mapping is quoted
    (f"{HEAD}metadata:\n  name: a\n  version: 2026,11\nspec: {{packages: {{}}}}\n",
     f"{HEAD}metadata:\n  name: a\nspec: {{version: \"2026,11\", packages: {{}}}}\n"),
    # a List as kubectl get -o yaml prints it
    (f"apiVersion: v1\nkind: List\nitems:\n- {HEAD.replace(chr(10), chr(10) + '  ', 1)}  metadata:\n"
     f"    name: a\n    version: '7'\n  spec:\n    packages: {{}}\n",
     f"apiVersion: v1\nkind: List\nitems:\n- {HEAD.replace(chr(10), chr(10) + '  ', 1)}  metadata:\n"
     f"    name: a\n  spec:\n    version: '7'\n    packages: {{}}\n"),
], ids=["annotation-alone", "annotation-beside", "flow-last", "flow-first", "twice-same", "flow-quoted", "list"])
def test_every_shape_is_converted_in_place(old: str, new: str) -> None:
    got = convert_text(old, "r.yaml")
    assert got.text == new and got.changes


def test_line_breaks_bom_and_other_documents_stay(tmp_path: Path, cli: RunCli) -> None:
    policy = "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: DeploymentPolicy\nmetadata: {name: p, version: x}\n"
    text = (OLD + "---\n" + policy).replace("\n", "\r\n")
    f = tmp_path / "r.yaml"
    f.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert cli("convert", "-w", str(f))[0] == 0
    assert f.read_bytes() == b"\xef\xbb\xbf" + (NEW + "---\n" + policy).replace("\n", "\r\n").encode()


def test_a_symlink_stays_a_symlink(tmp_path: Path, cli: RunCli) -> None:
    real = write(tmp_path, "real.yaml", OLD)
    (tmp_path / "d").mkdir()
    link = tmp_path / "d" / "link.yaml"
    link.symlink_to(real)
    assert cli("convert", "-w", str(link))[0] == 0
    assert link.is_symlink() and real.read_text() == NEW


def test_a_file_that_cannot_be_converted_is_named_and_the_others_are(tmp_path: Path, cli: RunCli) -> None:
    twice = f"{HEAD}metadata:\n  name: a\n  version: '1'\nspec:\n  version: '2'\n{PKG}"
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True))
    bad1, bad2 = write(tmp_path, "a-twice.yaml", twice), write(tmp_path, "b-bomb.yaml", bomb)
    good = write(tmp_path, "c-good.yaml", OLD)
    rc, _, err = cli("convert", "--write", str(tmp_path))
    assert rc == 2 and good.read_text() == NEW
    assert bad1.read_text() == twice and bad2.read_text() == bomb
    assert re.search(r"a-twice\.yaml:5:3: cannot move the release: it is given more than once with different", err)
    assert "b-bomb.yaml:" in err and "alias" in err
    assert "1 of 3 file(s) converted; 2 error(s)" in err


def _old_form(text: str) -> str | None:
    """The repository's recipe text with its spec.version moved back to metadata.version (block style)."""
    m = re.search(r"^spec:\n(  version: [^\n]*\n)", text, re.M)
    name = re.search(r"^metadata:\n(?:  [^\n]*\n)*?  name: [^\n]*\n", text, re.M)
    if m is None or name is None or text.count("kind: NodeRecipe") != 1:
        return None
    without = text[:m.start(1)] + text[m.end(1):]
    return without[:name.end()] + m.group(1) + without[name.end():]


def test_every_recipe_of_the_repository_in_the_old_form_converts_back_byte_for_byte() -> None:
    files = [p for d in ("recipes", "examples", "tests/data") for p in sorted((ROOT / d).rglob("*.yaml"))]
    done = 0
    for p in files:
        text = p.read_bytes().decode("utf-8", "surrogateescape")
        old = _old_form(text)
        if old is None:
            continue
        got = convert_text(old, str(p))
        assert got.text == text, p
        done += 1
    assert done >= 100
