"""kubectl's label selector syntax (``-l/--selector``) parsed into a :class:`LabelSelector`.

Grammar (``k8s.io/apimachinery/pkg/labels.Parse``), requirements separated by commas and ANDed:

* ``k=v`` / ``k==v`` → ``matchLabels``; ``k!=v`` → ``NotIn (v)`` (matches objects without ``k``);
* ``k in (a,b)`` / ``k notin (a,b)`` → ``In`` / ``NotIn``;
* ``k`` → ``Exists``; ``!k`` → ``DoesNotExist``.

Keys and values are checked as the API does (:func:`check_label_key`, :func:`check_label_value`).
``k>1``/``k<1`` (only valid for node affinity, not label selectors) are refused. Pure.
"""

from __future__ import annotations

import re

from reconciler.errors import shown
from reconciler.model.selector import LabelSelector, Requirement, check_label_key, check_label_value


class SelectorSyntaxError(ValueError):
    """The selector text is not valid; the message names the requirement at fault."""


_SET = re.compile(r"\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*", re.IGNORECASE)
_EQ = re.compile(r"\s*(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*")
_EXISTS = re.compile(r"\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),<>]+)\s*")


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorSyntaxError("unbalanced ')'")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise SelectorSyntaxError("unbalanced '('")
    parts.append(cur)
    return parts


def parse_selector(text: str) -> LabelSelector:
    """``text`` (kubectl syntax, see the module doc) as a LabelSelector; ``""`` selects everything.

    Raises:
        SelectorSyntaxError: a requirement that does not parse, or an invalid key or value.
    """
    labels: dict[str, str] = {}
    exprs: list[Requirement] = []
    if not text.strip():
        return LabelSelector()
    for part in _split(text):
        try:
            if m := _SET.fullmatch(part):
                values = tuple(v.strip() for v in m["values"].split(","))
                if not all(values):
                    raise ValueError("an empty value in the set")
                for v in values:
                    check_label_value(v)
                op = "In" if m["op"].lower() == "in" else "NotIn"
                exprs.append(Requirement(key=check_label_key(m["key"]), operator=op, values=values))
            elif m := _EQ.fullmatch(part):
                key, value = check_label_key(m["key"]), check_label_value(m["value"])
                if m["op"] == "!=":
                    exprs.append(Requirement(key=key, operator="NotIn", values=(value,)))
                elif labels.get(key, value) != value:
                    raise ValueError(f"{key} given two values")
                else:
                    labels[key] = value
            elif m := _EXISTS.fullmatch(part):
                exprs.append(Requirement(key=check_label_key(m["key"]),
                                         operator="DoesNotExist" if m["neg"] else "Exists"))
            else:
                raise ValueError("expected k=v, k!=v, k in (a,b), k notin (a,b), k or !k")
        except SelectorSyntaxError:
            raise
        except ValueError as e:
            raise SelectorSyntaxError(f"{shown(part.strip())}: {e}") from None
    return LabelSelector(matchLabels=labels, matchExpressions=tuple(exprs))
