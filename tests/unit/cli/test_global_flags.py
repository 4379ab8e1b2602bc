"""kubectl habits (issue 16): global ``--kubeconfig/--context/-n/--request-timeout`` before or after
the verb, ``-l/--selector`` on the node verbs, ``--dry-run=client|server`` (server: ``dryRun=All``
on every write, against a stand-in API server that records the requests)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from reconciler.cli.clusters import open_cluster
from reconciler.cli.main import build_parser
from reconciler.model.selectorsyntax import SelectorSyntaxError, parse_selector
from reconciler.testing.fleetgen import make_node, write_fleet
from tests.httpfake import QuietHandler, token_kubeconfig
from tests.unit.ops.conftest import RunCli

NODES = [make_node(n, lbl, resource_version="1", ready=None, kubelet_labels=False)
         for n, lbl in (("n1", {"zone": "a"}), ("n2", {"zone": "b"}))]


class _Api(QuietHandler):
    seen: ClassVar[list[tuple[str, str, dict[str, list[str]]]]] = []

    def _answer(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        url = urlsplit(self.path)
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        self.seen.append((self.command, url.path, parse_qs(url.query)))
        if url.path == "/api/v1/nodes":
            self._answer(200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": NODES})
        elif url.path.startswith("/api/v1/nodes/"):
            self._answer(200, next(x for x in NODES if x["metadata"]["name"] == url.path.rsplit("/", 1)[1]))
        elif "/configmaps" in url.path and self.command in ("GET", "PATCH"):
            self._answer(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
        else:
            self._answer(201, {"kind": "ConfigMap", "metadata": {"name": "x"}})

    do_GET = do_PATCH = do_POST = _handle



@pytest.fixture
def api(tmp_path: Path, http_server: Callable[[type[_Api]], str]) -> tuple[
        Path, list[tuple[str, str, dict[str, list[str]]]]]:
    _Api.seen = []
    return token_kubeconfig(tmp_path / "kubeconfig", http_server(_Api)), _Api.seen


@pytest.mark.parametrize("before", [True, False])
def test_global_flags_before_or_after_the_verb(before: bool, api: tuple[Path, list[Any]], cli: RunCli) -> None:
    kc, seen = api
    flags = ["--kubeconfig", str(kc), "-n", "team-a"]
    argv = [*flags, "pause", "--list"] if before else ["pause", "--list", *flags]
    rc, _, err = cli(*argv)
    assert rc == 0, err
    assert ("GET", "/api/v1/namespaces/team-a/configmaps/node-reconciler-controls") in [(m, p) for m, p, _ in seen]


def test_request_timeout_and_namespace_reach_the_adapter(api: tuple[Path, list[Any]]) -> None:
    kc, _ = api
    for argv in (["--request-timeout", "2m", "-n", "ns1", "status", "--kubeconfig", str(kc)],
                 ["status", "--kubeconfig", str(kc), "--request-timeout", "2m", "--namespace", "ns1"]):
        args = build_parser().parse_args(argv)
        opened = open_cluster(args)
        assert opened.kube is not None
        assert opened.kube.api.request_timeout == 120.0 and opened.cluster.namespace == "ns1"
        # a value after the verb wins over one before it
    args = build_parser().parse_args(["-n", "before", "status", "-n", "after"])
    assert args.namespace == "after"


def test_dry_run_server_sends_writes_with_dry_run_all(api: tuple[Path, list[Any]], cli: RunCli) -> None:
    kc, seen = api
    rc, out, err = cli("node", "ignore", "n1", "--kubeconfig", str(kc), "--dry-run=server")
    assert rc == 0 and "nothing was persisted" in out, err
    writes = [(m, p, q) for m, p, q in seen if m != "GET"]
    assert writes == [("PATCH", "/api/v1/nodes/n1", {"dryRun": ["All"], "fieldManager": writes[0][2]["fieldManager"]})]
    seen.clear()
    rc, out, err = cli("pause", "later", "--new", "--kubeconfig", str(kc), "--dry-run=server", "-o", "json")
    assert rc == 0 and json.loads(out)["dryRun"] == "server", err
    writes = [(m, q) for m, _, q in seen if m != "GET"]
    assert writes and all(q.get("dryRun") == ["All"] for _, q in writes)  # the patch, then the create


def test_dry_run_client_and_bare_send_nothing(api: tuple[Path, list[Any]], cli: RunCli) -> None:
    kc, seen = api
    for flag in ("--dry-run", "--dry-run=client"):
        assert cli("node", "ignore", "n1", "--kubeconfig", str(kc), flag)[0] == 0
    assert all(m == "GET" for m, _, _ in seen)


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    return Path(write_fleet(tmp_path / "fleet.yaml", [make_node("n1", {"zone": "a", "pool": "gpu"}),
                                                      make_node("n2", {"zone": "b", "pool": "gpu"}),
                                                      make_node("n3", {"pool": "cpu"})]))


def test_dry_run_server_is_refused_on_the_simulated_fleet(fleet: Path, cli: RunCli) -> None:
    before = fleet.read_bytes()
    rc, _, err = cli("node", "ignore", "n1", "--cluster", f"sim:{fleet}", "--dry-run=server")
    assert rc == 2 and "--dry-run=server needs a real API server" in err and fleet.read_bytes() == before


def test_namespace_other_than_the_default_is_refused_on_the_simulated_fleet(fleet: Path, cli: RunCli) -> None:
    rc, _, err = cli("-n", "other", "status", "--cluster", f"sim:{fleet}")
    assert rc == 2 and "'other'" in err
    assert cli("-n", "node-reconciler", "status", "--cluster", f"sim:{fleet}")[0] == 0


@pytest.mark.parametrize(("selector", "names"), [
    ("zone=a", ["n1"]), ("zone!=a", ["n2", "n3"]), ("zone in (a,b)", ["n1", "n2"]), ("!zone", ["n3"]),
    ("zone,pool=gpu", ["n1", "n2"]), ("zone notin (b), pool==gpu", ["n1"]),
])
def test_selector_on_node_verbs(selector: str, names: list[str], fleet: Path, cli: RunCli) -> None:
    expect = "".join(f"node/{n}\n" for n in names)
    for argv in (["status"], ["node", "status"], ["node", "list"], ["node", "ignore", "--dry-run"]):
        rc, out, err = cli(*argv, "-l", selector, "--cluster", f"sim:{fleet}", "-o", "name")
        assert rc == 0 and out == expect, (argv, err)


def test_selector_errors(fleet: Path, cli: RunCli) -> None:
    rc, _, err = cli("node", "ignore", "-l", "zone=zz", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 2 and "no node has these labels" in err
    with pytest.raises(SystemExit) as e:
        cli("status", "-l", "zone>1", "--cluster", f"sim:{fleet}")
    assert e.value.code == 2
    rc, _, err = cli("node", "ignore", "--cluster", f"sim:{fleet}", "-y")
    assert rc == 2 and "-l/--selector" in err


@pytest.mark.parametrize("bad", ["a>1", "a=b=c", "a in ()", "(a", "a)", "bad key=1", "a=-x", "a in (b,,c)"])
def test_parse_selector_refuses(bad: str) -> None:
    with pytest.raises(SelectorSyntaxError):
        parse_selector(bad)


def test_parse_selector_shapes() -> None:
    s = parse_selector("a=1, b!=2,c in (x,y),d notin (z),e,!f")
    assert s.matchLabels == {"a": "1"}
    assert [(r.key, r.operator, r.values) for r in s.matchExpressions] == [
        ("b", "NotIn", ("2",)), ("c", "In", ("x", "y")), ("d", "NotIn", ("z",)), ("e", "Exists", ()),
        ("f", "DoesNotExist", ())]
    assert parse_selector("").is_empty()


@pytest.mark.parametrize(("argv", "verbose"), [
    (["apply", "r.yaml"], 0),
    (["apply", "r.yaml", "-v"], 1),
    (["-v", "apply", "r.yaml"], 1),
    (["plan", "r.yaml", "--verbose", "--verbose"], 2),
    (["node", "list", "-vv"], 2),
    (["package", "status", "x", "-v"], 1),
])
def test_verbose_before_or_after_the_verb(argv: list[str], verbose: int) -> None:
    """kubectl habit: ``-v`` after the verb (it was "unrecognized arguments: -v")."""
    assert build_parser().parse_args(argv).verbose == verbose


@pytest.mark.parametrize(("argv", "hint"), [
    (["aply", "r.yaml"], "did you mean 'apply'?"),
    (["node", "ignor", "x"], "did you mean 'ignore'?"),
    (["zzzz"], None),
])
def test_a_mistyped_verb_suggests_the_closest(argv: list[str], hint: str | None,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "invalid choice" in err
    assert (hint in err) if hint else ("did you mean" not in err)


@pytest.mark.parametrize(("argv", "verb", "hint"), [
    (["apply", "r.yaml", "--clustr", "sim:x.yaml"], "reconciler apply", "did you mean '--cluster'?"),
    (["plan", "r.yaml", "--outptu=json"], "reconciler plan", "did you mean '--output'?"),
    (["node", "ignore", "x", "--dry-rn"], "reconciler node ignore", "did you mean '--dry-run'?"),
    (["apply", "r.yaml", "--zzzzzz"], "reconciler apply", None),
])
def test_an_unknown_option_is_refused_by_the_verb_with_its_closest_option(
        argv: list[str], verb: str, hint: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """``--clustr`` was refused by the root parser, whose help does not list the verb's options."""
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.startswith(f"{verb}: error: unrecognized arguments: ")
    assert f"(`{verb} --help` lists the options)" in err
    assert (hint in err) if hint else ("did you mean" not in err)


@pytest.mark.parametrize("argv", [["apply", "r.yaml", "--dry-run=bogus"], ["node", "ignore", "n1", "--dry-run=zz"]])
def test_a_bad_dry_run_value_names_the_option_as_typed(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """It said 'argument --dry-run-value', the hidden option --dry-run=VALUE is parsed as."""
    from reconciler.cli.opsargs import dry_run_argv

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(dry_run_argv(argv))
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --dry-run: " in err and "dry-run-value" not in err
