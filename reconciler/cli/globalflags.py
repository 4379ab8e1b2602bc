"""kubectl's global flags, accepted before or after the verb: ``--kubeconfig``, ``--context``,
``-n/--namespace`` (the reconciler's namespace: controls ConfigMap, Leases, stage pods),
``--request-timeout`` (kubectl syntax: ``30``, ``30s``, ``2m``, ``1h``) and ``--as``/``--as-group``
(user impersonation).

The root parser defines them with default None; every verb that talks to a cluster defines them
again with ``argparse.SUPPRESS`` as default, so a value given after the verb wins and a value given
before it is not reset by the verb's parser.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from reconciler.errors import InputError, shown

_DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)?")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
#: longest --request-timeout accepted (one day)
MAX_REQUEST_TIMEOUT = 86400.0


def request_timeout(text: str) -> float:
    """``--request-timeout`` in seconds: a number (seconds) or a number with ``ms``/``s``/``m``/``h``
    (kubectl's ``--request-timeout``); more than 0, at most one day. Unlike kubectl, ``0`` ("no
    timeout") is refused: a rollout must not hang on a silent server.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    m = _DURATION.fullmatch(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a duration (e.g. 30, 30s, 2m, 1h)")
    value = float(m["n"]) * _UNIT[m["unit"]]
    if not 0 < value <= MAX_REQUEST_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{shown(text)}: must be more than 0 and at most 24h")
    return value


def impersonation(args: argparse.Namespace) -> tuple[str, str | None] | None:
    """``--as``/``--as-group`` as ``(user, group)`` for the kube adapter (None: neither given).

    Raises:
        InputError: ``--as-group`` without ``--as``.
    """
    user, group = getattr(args, "as_user", None), getattr(args, "as_group", None)
    if group and not user:
        raise InputError("--as-group needs --as USER (the user to act as)")
    return (user, group) if user else None


def add_global_args(p: argparse.ArgumentParser | Any, *, root: bool) -> None:
    """The global flags on ``p`` (the root parser when ``root``, else a verb's parser or group)."""
    default: Any = None if root else argparse.SUPPRESS
    p.add_argument("--kubeconfig", metavar="FILE", default=default,
                   help="kubeconfig of the real cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    add_context_args(p, default)


def add_context_args(p: argparse.ArgumentParser | Any, default: Any) -> None:
    """``--context``, ``-n/--namespace`` and ``--request-timeout`` (see :func:`add_global_args`)."""
    p.add_argument("--context", metavar="NAME", default=default, help="kubeconfig context")
    p.add_argument("-n", "--namespace", metavar="NS", default=default,
                   help="the reconciler's namespace (controls ConfigMap, Leases, stage pods; default node-reconciler)")
    p.add_argument("--request-timeout", type=request_timeout, metavar="DURATION", default=default,
                   help="timeout of each API request (30, 30s, 2m; default 30s)")
    p.add_argument("--as", dest="as_user", metavar="USER", default=default,
                   help="act as this user on the real cluster (user impersonation, as kubectl --as)")
    p.add_argument("--as-group", dest="as_group", metavar="GROUP", default=default,
                   help="with --as: act as a member of this group (one group)")
