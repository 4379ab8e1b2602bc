"""Guarded YAML reading: limits, encodings, syntax errors, tags, duplicates, alias bombs, positions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reconciler.errors import InputError
from reconciler.load import load_inputs, yamlsafe
from reconciler.load.yamlsafe import (
    MAX_FILE_BYTES,
    MAX_NODES,
    format_path,
    load_file,
    parse_documents,
    parse_path,
    read_text,
)


def parse_error(text: str) -> InputError:
    with pytest.raises(InputError) as info:
        parse_documents(text, "f.yaml")
    return info.value


def test_positions_are_one_based_for_keys_and_items():
    (doc,) = parse_documents("a:\n  b: 1\n  c:\n    - x\n    - {d: 2}\n", "f.yaml")
    assert doc.data == {"a": {"b": 1, "c": ["x", {"d": 2}]}}
    assert doc.positions[("a",)] == (1, 1)
    assert doc.positions[("a", "b")] == (2, 3)
    assert doc.positions[("a", "c", 1)] == (5, 7)
    assert doc.positions[("a", "c", 1, "d")] == (5, 8)
    assert str(doc.pos(["a", "c", 1, "d"])) == "f.yaml:5:8"


def test_pos_falls_back_to_nearest_existing_ancestor():
    (doc,) = parse_documents("spec:\n  packages:\n    tuning:\n      version: 1.0.0\n", "f.yaml")
    assert doc.pos(("spec", "packages", "tuning", "image")).line == 3
    assert doc.pos(("spec", "nothing", "here")).line == 1
    assert doc.pos(()).line == 1


@pytest.mark.parametrize(
    ("path", "text"),
    [
        (("spec", "packages", "tuning", "version"), "spec.packages.tuning.version"),
        (("spec", "compartments", 0, "budget"), "spec.compartments[0].budget"),
        (("configMap", "intent.conf", "x"), 'configMap["intent.conf"].x'),
        (("a", 0, 1), "a[0][1]"),
    ],
)
def test_format_and_parse_path_round_trip(path, text):
    assert format_path(path) == text
    assert parse_path(text) == path


def test_pos_accepts_a_dotted_path():
    (doc,) = parse_documents("spec:\n  compartments:\n    - name: a\n      selector: {}\n", "f.yaml")
    assert doc.pos("spec.compartments[0].selector").line == 4
    with pytest.raises(ValueError):
        parse_path("spec..x")


def test_multiple_documents_skip_empty_ones_and_keep_index():
    docs = parse_documents("---\na: 1\n---\n---\n# only a comment\n---\nb: 2\n", "f.yaml")
    assert [(d.index, d.data) for d in docs] == [(0, {"a": 1}), (3, {"b": 2})]


def test_scalars_are_plain_python_and_timestamps_stay_text():
    (doc,) = parse_documents(
        "s: text\ni: 0x1F\nneg: -12\nf: 1.5\ninf: .inf\nb: true\nyes: yes\nn: ~\nd: 2026-11-30\nq: '42'\n",
        "f.yaml",
    )
    assert doc.data == {
        "s": "text",
        "i": 31,
        "neg": -12,
        "f": 1.5,
        "inf": float("inf"),
        "b": True,
        "yes": "yes",  # YAML 1.2: yes is a string
        "n": None,
        "d": "2026-11-30",
        "q": "42",
    }
    assert type(doc.data["i"]) is int and type(doc.data["s"]) is str


def test_non_string_keys_become_their_source_text():
    (doc,) = parse_documents("1.10: a\ntrue: b\n80: c\n", "f.yaml")
    assert doc.data == {"1.10": "a", "true": "b", "80": "c"}


def test_merge_keys_are_supported_and_explicit_keys_win():
    (doc,) = parse_documents("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n", "f.yaml")
    assert doc.data["use"] == {"x": 1, "y": 3}
    assert doc.positions[("use", "y")] == (4, 3)


def test_crlf_line_endings_are_accepted_with_right_lines(tmp_path: Path):
    p = tmp_path / "crlf.yaml"
    p.write_bytes(b"a: 1\r\nb:\r\n  c: two\r\n")
    (doc,) = load_file(str(p))
    assert doc.data == {"a": 1, "b": {"c": "two"}}
    assert doc.positions[("b", "c")] == (3, 3)


def test_utf8_bom_is_accepted(tmp_path: Path):
    p = tmp_path / "bom.yaml"
    p.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_file(str(p))[0].data == {"a": 1}


def test_non_utf8_byte_is_reported_with_its_line(tmp_path: Path):
    p = tmp_path / "latin1.yaml"
    p.write_bytes(b"a: 1\nb: 2\nname: caf\xe9\n")
    with pytest.raises(InputError) as info:
        read_text(str(p))
    err = info.value
    assert err.pos is not None and (err.pos.line, err.pos.column) == (3, 10)
    assert "byte 0xe9 is not valid UTF-8" in err.message


def test_oversized_file_is_rejected_fast_without_reading(tmp_path: Path):
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as fh:  # a sparse 50 MB file: cheap to create, slow to read
        fh.truncate(50 * 1024 * 1024)
    start = time.monotonic()
    with pytest.raises(InputError) as info:
        load_inputs([str(p)])
    assert time.monotonic() - start < 1.0
    assert f"larger than the {MAX_FILE_BYTES} byte limit" in info.value.message
    assert str(info.value).startswith(f"{p}:1:1: ")


def test_missing_file_is_an_input_error(tmp_path: Path):
    with pytest.raises(InputError) as info:
        load_inputs([str(tmp_path / "nope.yaml")])
    assert "no such file or directory" in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "column", "part"),
    [
        ("a: 1\nb: [1,\n", 3, 1, "YAML syntax error"),
        ("a: b: c\n", 1, 5, "mapping values are not allowed here"),
        ("a:\n\tb: 1\n", 2, 1, "found character '\\t' that cannot start any token"),
        ("a: 1\n  b: 2\n", 2, 4, "mapping values are not allowed here"),
        ("a: *nothing\n", 1, 4, "found undefined alias"),
        ("a: 1\nb: \x00\n", 2, 4, "character #x0000 is not allowed"),
    ],
    ids=["unclosed-flow", "nested-colon", "tab-indent", "bad-indent", "undefined-alias", "control-char"],
)
def test_syntax_errors_keep_line_and_column(text, line, column, part):
    err = parse_error(text)
    assert err.pos is not None and (err.pos.line, err.pos.column) == (line, column)
    assert part in err.message


def test_duplicate_keys_are_rejected_with_both_lines():
    err = parse_error("a: 1\nb:\n  c: 1\n  c: 2\n")
    assert str(err) == "f.yaml:4:3: duplicate key 'c' (first defined at line 3)"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a: !!python/object:os.system ls\n", "!!python/object:os.system"),
        ("a: !!binary aGVsbG8=\n", "!!binary"),
        ("a: !custom value\n", "!custom"),
        ("a: !!set {x, y}\n", "!!set"),
        ("a: !!omap [{x: 1}]\n", "!!omap"),
    ],
)
def test_non_standard_tags_are_rejected(text, shown):
    err = parse_error(text)
    assert f"YAML tag {shown} is not allowed" in err.message
    assert err.pos is not None and err.pos.line == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!bool maybe\n", "'maybe' is not a boolean"),
        ("a: !!int ten\n", "'ten' is not an integer"),
        ("a: !!null x\n", "'x' is not null"),
        ("a: !!map [1]\n", "YAML tag !!map does not fit a sequence"),
    ],
)
def test_explicit_standard_tags_must_fit_their_value(text, message):
    err = parse_error(text)
    assert message in err.message and err.pos is not None and err.pos.line == 1


def test_complex_keys_are_rejected():
    err = parse_error("? [a, b]\n: 1\n")
    assert "mapping keys must be plain scalars" in err.message


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_alias_expansion_bomb_is_rejected_quickly(tmp_path: Path):
    p = tmp_path / "lol.yaml"
    p.write_text(BILLION_LAUGHS)
    start = time.monotonic()
    with pytest.raises(InputError) as info:
        load_inputs([str(p)])
    assert time.monotonic() - start < 2.0
    err = info.value
    assert f"more than {MAX_NODES} YAML nodes through aliases" in err.message
    assert str(err).startswith(f"{p}:1:1:")


def test_moderate_alias_use_is_fine():
    (doc,) = parse_documents("t: &t {key: a, operator: Exists}\nlist: [*t, *t, *t]\n", "f.yaml")
    assert doc.data["list"] == [{"key": "a", "operator": "Exists"}] * 3


def test_recursive_alias_is_rejected():
    err = parse_error("a: &x [1, *x]\n")
    assert "recursive YAML alias" in err.message


def test_too_many_nodes_without_aliases_is_rejected(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(yamlsafe, "MAX_NODES", 50)  # the real limit works the same, only slower to build
    assert len(parse_documents("items: [" + ",".join(["1"] * 40) + "]\n", "f.yaml")[0].data["items"]) == 40
    err = parse_error("items: [" + ",".join(["1"] * 60) + "]\n")
    assert "more than 50 YAML nodes (split it into several files)" in err.message


@pytest.mark.parametrize("depth", [200, 5000], ids=["measured", "composer-recursion"])
def test_deep_nesting_is_rejected_at_the_line_it_crosses_the_limit(depth: int):
    # 200 deep is measured after composing; thousands deep stop the (recursive) composer first,
    # and the error used to name no line: both name where the 65th level starts
    err = parse_error("kind: x\nspec:\n  a: " + "[" * depth + "]" * depth + "\n")
    assert err.message == "YAML nesting is deeper than 64 levels"
    # the root mapping is depth 0, spec's mapping 1, a's sequence 2 (column 6): level 65 is 63 further
    assert err.pos is not None and (err.pos.line, err.pos.column) == (3, 6 + 63)


def test_deep_block_nesting_names_its_line():
    text = "".join("  " * i + f"k{i}:\n" for i in range(70)) + "  " * 70 + "x: 1\n"
    err = parse_error(text)
    assert "deeper than 64" in err.message and err.pos is not None and err.pos.line == 65


def test_absurd_integer_is_reported_not_raised():
    err = parse_error("priority: " + "9" * 5000 + "\n")
    assert "an integer with 5000 digits is too large" in err.message
    assert err.pos is not None and err.pos.line == 1


@pytest.mark.parametrize(
    "path",
    [("spec", "configMap", "intent.conf\n"), ("a", 'b"c', 0, "x.y"), ("k", "\x1b[31m"), ("é", "\\")],
)
def test_field_paths_quote_odd_keys_visibly_and_round_trip(path: tuple[str | int, ...]) -> None:
    """A key holding a newline, quote or escape sequence is written as a JSON string: the error
    line stays one line and shows the character instead of interpreting it (issue #14)."""
    text = format_path(path)
    assert "\n" not in text and "\x1b" not in text
    assert parse_path(text) == path


def test_yaml_string_with_a_lone_surrogate_is_refused_at_its_position() -> None:
    with pytest.raises(InputError) as info:
        parse_documents('a:\n  b: "x\\ud800"\n', "f.yaml")
    assert str(info.value).startswith("f.yaml:2:6: a.b: ") and "surrogate" in info.value.message


@pytest.mark.parametrize("text", ["9223372036854775808", "-9223372036854775809", "0x" + "f" * 17, "1" * 71])
def test_yaml_integers_beyond_64_bits_are_refused_with_their_field(text: str) -> None:
    with pytest.raises(InputError) as info:
        parse_documents(f"spec:\n  priority: {text}\n", "f.yaml")
    assert str(info.value).startswith("f.yaml:2:13: spec.priority: ") and "too large" in info.value.message
