"""Writes the issue #14 value cases of this corpus (``newline-*``, ``toleration-*``, ``configmap-*``,
``label-*``, ``duration-*``, ``integer-*``, ``quantity-*``, ``env-*``, ``image-*``, ``empty-*`` …).

Each case is the valid recipe :data:`BASE` (plus :data:`POLICY` when it needs one) with one line
changed; the line marked ``#@`` is where the error must point (its ``# at:`` header). Run from the
repository root after changing a case: ``python tests/data/bad/make_value_cases.py``; the files are
committed, the test reads only them.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
SHA_A = "sha256:" + "a" * 64
SHA_B = "sha256:" + "b" * 64

#: A recipe that validates; ``{name}`` etc. are replaced per case. ``TOKEN`` carries a secret the
#: tests check is never printed.
BASE = {
    "head": "apiVersion: reconciler.nodewright.dev/v1alpha1\nkind: NodeRecipe\n",
    "metadata": 'metadata:\n  name: corpus\n  version: 2026.11.1\n',
    "selector": "spec:\n  nodeSelector:\n    matchLabels:\n      pool: gpu\n",
    "budget": "  interruptionBudget:\n    count: 1\n",
    "extra": "",
    "packages": (
        "  packages:\n"
        "    base:\n"
        "      version: 1.0.0\n"
        "      image: ghcr.io/example/base\n"
        f"      containerSHA: {SHA_A}\n"
        "    tuned:\n"
        "      version: 2.0.0\n"
        "      image: ghcr.io/example/tuned\n"
        f"      containerSHA: {SHA_B}\n"
        "      dependsOn:\n"
        "        base: 1.0.0\n"
        "      interrupt:\n"
        "        type: reboot\n"
        "      env:\n"
        "        - name: TOKEN\n"
        "          value: s3cr3t-do-not-print\n"
    ),
    "pkgextra": "",
}

POLICY = (
    "---\napiVersion: reconciler.nodewright.dev/v1alpha1\nkind: DeploymentPolicy\nmetadata:\n"
    "  name: corpus-policy\nspec:\n  default:\n    budget:\n      count: 1\n{default}"
    "  compartments:\n    - name: gpu\n      selector:\n        matchLabels:\n          pool: gpu\n"
    "      budget:\n        count: 1\n{compartment}"
)


def recipe(**parts: str) -> str:
    """BASE with some parts replaced (``pkgextra`` is appended to the ``tuned`` package)."""
    p = {**BASE, **parts}
    return p["head"] + p["metadata"] + p["selector"] + p["budget"] + p["extra"] + p["packages"] + p["pkgextra"]


def with_policy(default: str = "", compartment: str = "", **parts: str) -> str:
    """A recipe using ``corpus-policy`` plus that policy, with lines added to its default / compartment."""
    body = recipe(budget="  deploymentPolicy: corpus-policy\n", **parts)
    return body + POLICY.format(default=default, compartment=compartment)


def meta(name: str = "corpus", version: str = "2026.11.1", more: str = "") -> str:
    return f"metadata:\n  name: {name}\n  version: {version}\n{more}"


def sel(key: str = "pool", value: str = "gpu") -> str:
    return f"spec:\n  nodeSelector:\n    matchLabels:\n      {key}: {value}  #@\n"


def tol(body: str, mark: int = 0) -> str:
    """One toleration; the error is expected at its line ``mark`` (0: the item itself)."""
    lines = body.split("\n")
    lines[mark] += "  #@"
    return "  additionalTolerations:\n    - " + "\n      ".join(lines) + "\n"


def cmap(key: str, value: str = "x") -> str:
    return f"      configMap:\n        {key}: {value}  #@\n"


def pkg(line: str) -> str:
    return f"      {line}  #@\n"


def res(cpu_req: str = "500m", cpu_lim: str = "1", mem_req: str = "256Mi", mem_lim: str = "1Gi",
        whole: bool = False) -> str:
    mark = ("", "  #@") if whole else ("  #@", "")
    return (f"      resources:{mark[1]}\n        cpuRequest: {cpu_req}{mark[0]}\n        cpuLimit: {cpu_lim}\n"
            f"        memoryRequest: {mem_req}\n        memoryLimit: {mem_lim}\n")


def env(line: str, mark: int = -1) -> str:
    """A second env entry; the error is expected at its line ``mark`` (-1: the item)."""
    rest = [f"          {x}{'  #@' if i == mark else ''}\n" for i, x in enumerate(line.split("\n"))]
    return f"        - name: OTHER{'  #@' if mark < 0 else ''}\n" + "".join(rest)


LONG63 = "a" * 63
# name, checks, expect, text
CASES: list[tuple[str, str, str, str]] = [
    # -- trailing newline (Python's $ matched before it) --------------------------------------
    ("newline-sha", "a containerSHA with a trailing newline", "containersha",
     recipe(packages=BASE["packages"].replace(f"containerSHA: {SHA_A}", f'containerSHA: "{SHA_A}\\n"  #@'))),
    ("newline-recipe-name", "a recipe name with a trailing newline", "recipe name",
     recipe(metadata='metadata:\n  name: "corpus\\n"  #@\n  version: 2026.11.1\n')),
    ("newline-package-key", "a package key with a trailing newline", "package name",
     recipe(packages=BASE["packages"].replace("    base:\n", '    "base\\n":  #@\n', 1).replace(
         "        base: 1.0.0\n", '        "base\\n": 1.0.0\n'))),
    ("newline-env-name", "an env name with a trailing newline", "environment variable name",
     recipe(packages=BASE["packages"].replace("- name: TOKEN", '- name: "TOKEN\\n"  #@'))),
    ("newline-label-value", "a selector label value with a trailing newline", "label value",
     recipe(selector=sel(value='"gpu\\n"'))),
    ("newline-label-key", "a selector label key with a trailing newline", "label key",
     recipe(selector=sel(key='"pool\\n"'))),
    ("newline-package-version", "a package version with a trailing newline", "semantic version",
     recipe(packages=BASE["packages"].replace("      version: 2.0.0\n", '      version: "2.0.0\\n"  #@\n'))),
    ("newline-dependson-version", "a dependsOn version with a trailing newline", "semantic version",
     recipe(packages=BASE["packages"].replace("        base: 1.0.0\n", '        base: "1.0.0\\n"  #@\n'))),
    ("newline-quantity", "a resource quantity with a trailing newline", "quantity",
     recipe(pkgextra=res(cpu_req='"500m\\n"'))),
    ("newline-duration", "a gracefulShutdown with a trailing newline", "duration",
     recipe(pkgextra=pkg('gracefulShutdown: "30s\\n"'))),
    ("newline-configmap-key", "a configMap key with a trailing newline", "configmap key",
     recipe(pkgextra=cmap('"intent.conf\\n"'))),
    ("newline-toleration-key", "a toleration key with a trailing newline", "label key",
     recipe(extra=tol('key: "dedicated\\n"\noperator: Exists'))),
    ("newline-recipe-version", "a recipe version with a trailing newline", "recipe version",
     recipe(metadata='metadata:\n  name: corpus\n  version: "2026.11.1\\n"  #@\n')),
    ("newline-image", "an image with a trailing newline", "image repository",
     recipe(packages=BASE["packages"].replace("image: ghcr.io/example/tuned",
                                              'image: "ghcr.io/example/tuned\\n"  #@'))),
    ("newline-service", "an interrupt service name with a trailing newline", "systemd unit",
     recipe(packages=BASE["packages"].replace("        type: reboot\n",
                                              '        type: service\n        services: ["containerd\\n"]  #@=\n'))),
    ("newline-expression-value", "a matchExpressions value with a trailing newline", "label value",
     recipe(selector='spec:\n  nodeSelector:\n    matchExpressions:\n      - key: pool\n        operator: In\n'
                     '        values: ["gpu\\n"]  #@=\n')),
    ("newline-policy-reference", "a deploymentPolicy reference with a trailing newline", "not a policy name",
     recipe(budget='  deploymentPolicy: "corpus-policy\\n"  #@\n')),
    ("newline-policy-name", "a policy name with a trailing newline", "policy name",
     with_policy().replace("  name: corpus-policy\n", '  name: "corpus-policy\\n"  #@\n')),
    ("newline-compartment-name", "a compartment name with a trailing newline", "compartment name",
     with_policy().replace("    - name: gpu\n", '    - name: "gpu\\n"  #@\n')),
    ("newline-metadata-label", "a metadata label value with a trailing newline", "label value",
     recipe(metadata=meta(more='  labels:\n    team: "infra\\n"  #@\n'))),
    ("newline-agent-image", "an agentImageOverride with a trailing newline", "image reference",
     recipe(pkgextra=pkg('agentImageOverride: "ghcr.io/nvidia/agent:1.0\\n"'))),
    ("encoding-lone-surrogate", "an env value holding a lone UTF-16 surrogate escape", "surrogate",
     recipe(packages=BASE["packages"].replace("value: s3cr3t-do-not-print", 'value: "x\\ud800"  #@='))),
    # -- tolerations (Kubernetes ValidateTolerations) ------------------------------------------
    ("toleration-exists-with-value", "a toleration Exists with a value", "takes no value",
     recipe(extra=tol("key: dedicated\noperator: Exists\nvalue: gpu", 2))),
    ("toleration-empty-key-equal", "a toleration with no key and operator Equal", "empty key",
     recipe(extra=tol("operator: Equal\nvalue: gpu"))),
    ("toleration-empty-key-default-operator", "a toleration with no key and no operator (Equal)",
     "empty key", recipe(extra=tol("effect: NoSchedule"))),
    ("toleration-bad-effect", "a toleration effect Kubernetes does not have", "noexecute",
     recipe(extra=tol("key: dedicated\noperator: Exists\neffect: NoRun", 2))),
    ("toleration-seconds-without-noexecute", "tolerationSeconds with effect NoSchedule", "noexecute",
     recipe(extra=tol("key: dedicated\noperator: Exists\neffect: NoSchedule\ntolerationSeconds: 30"))),
    ("toleration-seconds-negative", "tolerationSeconds below zero", "tolerationseconds",
     recipe(extra=tol("key: dedicated\noperator: Exists\neffect: NoExecute\ntolerationSeconds: -5", 3))),
    ("toleration-seconds-huge", "tolerationSeconds of a million years", "tolerationseconds",
     recipe(extra=tol("key: dedicated\noperator: Exists\neffect: NoExecute\ntolerationSeconds: 31536000000000", 3))),
    ("toleration-key-two-slashes", "a toleration key with two slashes", "label key",
     recipe(extra=tol("key: a/b/c\noperator: Exists"))),
    ("toleration-equal-bad-value", "a toleration value that is not a label value", "label value",
     recipe(extra=tol('key: dedicated\noperator: Equal\nvalue: "has space"', 2))),
    ("toleration-operator-lt", "a toleration operator Kubernetes does not have", "exists",
     recipe(extra=tol("key: dedicated\noperator: Lt\nvalue: '5'", 1))),
    ("toleration-key-too-long", "a toleration key name of 64 characters", "label key",
     recipe(extra=tol(f"key: {LONG63}b\noperator: Exists"))),
    ("toleration-too-many", "65 tolerations", "at most 64",
     recipe(extra="  additionalTolerations:  #@\n" + "".join(
         f"    - {{key: k{i}, operator: Exists}}\n" for i in range(65)))),
    # -- ConfigMap keys (IsConfigMapKey) and size ----------------------------------------------
    ("configmap-key-traversal", "a configMap key that climbs out of the mounted directory", "configmap key",
     recipe(pkgextra=cmap("../../etc/cron.d/evil", "'* * * * * root sh'"))),
    ("configmap-key-dot", "a configMap key '.'", "configmap key", recipe(pkgextra=cmap("'.'"))),
    ("configmap-key-dotdot", "a configMap key '..'", "configmap key", recipe(pkgextra=cmap("'..'"))),
    ("configmap-key-dotdot-prefix", "a configMap key starting with '..'", "configmap key",
     recipe(pkgextra=cmap("..data"))),
    ("configmap-key-slash", "a configMap key holding a slash", "configmap key", recipe(pkgextra=cmap("etc/passwd"))),
    ("configmap-key-space", "a configMap key holding a space", "configmap key", recipe(pkgextra=cmap("'my key'"))),
    ("configmap-key-empty", "an empty configMap key", "configmap key", recipe(pkgextra=cmap("''"))),
    ("configmap-key-too-long", "a configMap key of 254 characters", "longer than 253",
     recipe(pkgextra=cmap("k" * 254))),
    ("configmap-too-large", "a configMap of 1.1 MB through a YAML alias", "1 mib",
     recipe(pkgextra="      configMap:  #@\n        k0: &blob " + "A" * 1024 + "\n" + "".join(
         f"        k{i}: *blob\n" for i in range(1, 1100)))),
    # -- label keys and values -----------------------------------------------------------------
    ("label-key-empty-prefix", "a label key '/pool' (empty prefix)", "label key", recipe(selector=sel(key="/pool"))),
    ("label-key-uppercase-prefix", "a label key prefix in upper case", "label key",
     recipe(selector=sel(key="Example.com/pool"))),
    ("label-key-two-slashes", "a label key with two slashes", "label key", recipe(selector=sel(key="a/b/c"))),
    ("label-key-name-too-long", "a label key name of 64 characters", "label key",
     recipe(selector=sel(key=LONG63 + "b"))),
    ("label-key-prefix-too-long", "a label key prefix of 254 characters", "label key",
     recipe(selector=sel(key=".".join(["a" * 63] * 4) + "aa/pool"))),
    ("label-key-empty", "an empty label key", "label key", recipe(selector=sel(key="''"))),
    ("label-value-too-long", "a label value of 64 characters", "label value",
     recipe(selector=sel(value=LONG63 + "b"))),
    ("label-value-leading-dash", "a label value starting with '-'", "label value",
     recipe(selector=sel(value="'-gpu'"))),
    ("label-value-space", "a label value with a space", "label value", recipe(selector=sel(value="'g p u'"))),
    ("label-metadata-bad-key", "a metadata label key with a space", "label key",
     recipe(metadata=meta(more="  labels:\n    'bad key': x  #@\n"))),
    ("label-annotation-bad-key", "a metadata annotation key with two slashes", "label key",
     recipe(metadata=meta(more="  annotations:\n    a/b/c: x  #@\n"))),
    ("label-annotation-number", "a metadata annotation value that is a number", "strings",
     recipe(metadata=meta(more="  annotations:\n    example.com/n: 5  #@\n"))),
    ("label-pod-selector", "a drain podSelector with an invalid label value", "label value",
     recipe(extra="  drain:\n    podSelector:\n      matchLabels:\n        app: 'a b'  #@\n")),
    ("label-noninterrupt-selector", "podNonInterruptLabels with an invalid key", "label key",
     recipe(extra="  podNonInterruptLabels:\n    matchLabels:\n      'bad key': x  #@\n")),
    # -- durations -----------------------------------------------------------------------------
    ("duration-1e20-hours", "a gracefulShutdown of 10^20 hours", "longer than",
     recipe(pkgextra=pkg("gracefulShutdown: 100000000000000000000h"))),
    ("duration-two-days", "a gracefulShutdown of 48 hours (the stage pod grace period)", "longer than",
     recipe(pkgextra=pkg("gracefulShutdown: 48h"))),
    ("duration-long-text", "a duration of 100 digits", "is not a duration",
     recipe(pkgextra=pkg("gracefulShutdown: " + "1" * 100 + "s"))),
    ("duration-negative", "a negative duration", "is not a duration",
     recipe(pkgextra=pkg("gracefulShutdown: -30s"))),
    # -- integers ------------------------------------------------------------------------------
    ("integer-20000-digits", "a priority of 20,000 digits", "too large",
     recipe(extra="  priority: 1" + "0" * 20000 + "  #@=\n")),
    ("integer-hex-huge", "a priority in hexadecimal of 5,000 digits (escapes the int/str limit)", "too large",
     recipe(extra="  priority: 0x" + "f" * 5000 + "  #@=\n")),
    ("integer-int64-overflow", "a priority of 2^63", "too large",
     recipe(extra="  priority: 9223372036854775808  #@=\n")),
    ("integer-sexagesimal-huge", "a YAML 1.1 sexagesimal integer beyond 64 bits", "too large",
     "%YAML 1.1\n---\n" + recipe(extra="  priority: 99999999999:59:59:59:59:59:59:59:59:59  #@=\n")),
    ("integer-priority-over-int32", "a priority beyond int32", "less than or equal",
     recipe(extra="  priority: 3000000000  #@\n")),
    ("integer-budget-count-huge", "a budget count of 10^12 nodes", "less than or equal",
     recipe(budget="  interruptionBudget:\n    count: 1000000000000  #@\n")),
    ("integer-initial-batch-huge", "a policy initialBatch of 10^9", "less than or equal",
     with_policy(default="    strategy:\n      fixed:\n        initialBatch: 1000000000  #@\n")),
    ("integer-failure-threshold-huge", "a policy failureThreshold of 10^9", "from 1 to 1000000, or never",
     with_policy(default="    strategy:\n      fixed:\n        failureThreshold: 1000000000  #@\n")),
    ("integer-growth-factor-huge", "an exponential growthFactor of a million", "less than or equal",
     with_policy(compartment="      strategy:\n        exponential:\n          growthFactor: 1000000  #@\n")),
    ("integer-delta-huge", "a linear delta of 10^9", "less than or equal",
     with_policy(compartment="      strategy:\n        linear:\n          delta: 1000000000  #@\n")),
    # -- quantities ----------------------------------------------------------------------------
    ("quantity-negative", "a negative cpuRequest", "between 0", recipe(pkgextra=res(cpu_req="'-1'"))),
    ("quantity-huge-exponent", "a quantity with exponent 99", "exponent", recipe(pkgextra=res(cpu_req="1e99"))),
    ("quantity-beyond-int64", "a quantity of 100Ei", "between 0", recipe(pkgextra=res(cpu_req="100Ei"))),
    ("quantity-request-over-limit", "a cpuRequest above the cpuLimit", "more than",
     recipe(pkgextra=res(cpu_req="4", cpu_lim="2", whole=True))),
    # -- env, services, images, versions ------------------------------------------------------
    ("env-value-and-valuefrom", "an env var with both value and valueFrom", "may not both",
     recipe(packages=BASE["packages"] + env("value: x\nvalueFrom: {secretKeyRef: {name: s, key: k}}"))),
    ("env-valuefrom-unknown", "an env valueFrom source Kubernetes does not have", "valuefrom",
     recipe(packages=BASE["packages"] + env("valueFrom: {vaultRef: {path: x}}", 0))),
    ("env-valuefrom-two-sources", "an env valueFrom with two sources", "exactly one",
     recipe(packages=BASE["packages"] + env("valueFrom: {secretKeyRef: {name: s, key: k}, "
                                            "configMapKeyRef: {name: c, key: k}}", 0))),
    ("service-shell-injection", "an interrupt service name holding a shell command", "systemd unit",
     recipe(packages=BASE["packages"].replace("        type: reboot\n",
                                              "        type: service\n        services: ['kubelet; reboot']  #@=\n"))),
    ("service-too-many", "65 interrupt services", "at most 64",
     recipe(packages=BASE["packages"].replace("        type: reboot\n", "        type: service\n        services: ["
                                              + ", ".join(f"s{i}" for i in range(65)) + "]  #@\n"))),
    ("image-uppercase", "an image repository in upper case", "image repository",
     recipe(packages=BASE["packages"].replace("image: ghcr.io/example/tuned", "image: ghcr.io/Example/Tuned  #@"))),
    ("image-space", "an image with a space", "image repository",
     recipe(packages=BASE["packages"].replace("image: ghcr.io/example/tuned", "image: 'ghcr.io/example/tu ned'  #@"))),
    ("image-agent-override-bad", "an agentImageOverride that is not an image reference", "image reference",
     recipe(pkgextra=pkg("agentImageOverride: 'not an image!'"))),
    ("semver-too-long", "a package version of 200 characters", "semantic version",
     recipe(packages=BASE["packages"].replace("      version: 2.0.0\n",
                                              "      version: 2.0.0-" + "a" * 200 + "  #@\n"))),
    ("name-recipe-version-space", "a recipe version with a leading space", "recipe version",
     recipe(metadata="metadata:\n  name: corpus\n  version: ' 2026.11'  #@\n")),
    ("policy-compartment-name-control", "a compartment name holding a tab", "compartment name",
     with_policy().replace("    - name: gpu\n", '    - name: "g\\tpu"  #@\n')),
    # -- empty input ---------------------------------------------------------------------------
    ("empty-only-comments", "a recipe file holding only comments", "no document", ""),
    ("empty-null-documents", "a recipe file holding only null documents", "no document", "---\n~\n---\nnull\n...\n"),
    ("empty-only-policy", "a recipe path holding only a policy (no recipe)", "no recipe found",
     POLICY.format(default="", compartment="")[4:]),
]


def header(name: str, checks: str, expect: str, text: str) -> str:
    """``# checks/expect/at`` lines; ``at`` from the ``#@`` marker (its line, first non-blank column)."""
    head = f"# checks: {checks}\n# expect: {expect}\n"
    lines = text.split("\n")
    marked = [i for i, line in enumerate(lines) if line.rstrip().endswith(("#@", "#@="))]
    if marked:
        i = marked[0]
        line = lines[i]
        col = len(line) - len(line.lstrip()) + 1
        if line.lstrip().startswith("- "):
            col += 2
        if line.rstrip().endswith("#@="):  # the error points at the value (first item of a flow list)
            col = line.index(": ") + 3
            col += line[col - 1] == "["
        head += f"# at: {i + 4}:{col}\n"  # three header lines come first
    elif text == "" or name.startswith("empty-"):
        head += "# at: 1:1\n"
    return head


def main() -> None:
    for name, checks, expect, text in CASES:
        (HERE / f"{name}.yaml").write_text(header(name, checks, expect, text) + text, encoding="utf-8")
    print(f"wrote {len(CASES)} cases")


if __name__ == "__main__":
    main()
