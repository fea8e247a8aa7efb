"""A small evaluator of the Cloud Logging query language, for the subset terraform's log
filters use (terraform/alerts.tf, the log-based metrics): so each filter is tested against
the log entries the controller writes, not read by eye.

Supported (https://cloud.google.com/logging/docs/view/logging-query-language):

- comparisons `path OP value`, OP one of `= != > >= < <=`; `path` dotted
  (`jsonPayload.kind`, `resource.labels.service_name`, `severity`);
- values: "quoted strings", bare words, numbers, and `(v1 OR v2 ...)` (any of them);
- `AND`, `OR`, `NOT`, juxtaposition (an implicit AND) and parentheses.

`severity` compares by level (DEFAULT < DEBUG < INFO < NOTICE < WARNING < ERROR < ...); a
number compares numerically with a number; a missing field matches no comparison but `!=`.
Anything else raises UnsupportedQueryError, so a filter using more is not silently passed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

LEVELS = [
    "DEFAULT",
    "DEBUG",
    "INFO",
    "NOTICE",
    "WARNING",
    "ERROR",
    "CRITICAL",
    "ALERT",
    "EMERGENCY",
]
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>>=|<=|!=|=|>|<)|(?P<paren>[()])|(?P<word>[^\s()=<>!"]+))'
)


class UnsupportedQueryError(ValueError):
    """The filter uses a part of the query language this evaluator does not know: extend
    tests/builders/logging_query.py, or the test would assert nothing about it."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # str | op | paren | word
    text: str


def _tokens(query: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    query = query.strip()
    while pos < len(query):
        m = _TOKEN.match(query, pos)
        if not m or m.end() == pos:
            raise UnsupportedQueryError(f"cannot read {query[pos:]!r}")
        kind = m.lastgroup or ""
        out.append(_Tok(kind, m.group(kind)))
        pos = m.end()
        while pos < len(query) and query[pos].isspace():
            pos += 1
    return out


def matches(query: str, entry: dict[str, Any]) -> bool:
    """Whether the LogEntry `entry` (its JSON: jsonPayload, resource, severity, ...)
    matches `query`."""
    parser = _Parser(_tokens(query))
    result = parser.disjunction(entry)
    if parser.pos != len(parser.toks):
        raise UnsupportedQueryError(f"unexpected {parser.toks[parser.pos].text!r} in {query!r}")
    return result


class _Parser:
    def __init__(self, toks: list[_Tok]) -> None:
        self.toks, self.pos = toks, 0

    def _peek(self) -> _Tok | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def _take(self) -> _Tok:
        tok = self._peek()
        if tok is None:
            raise UnsupportedQueryError("the filter ends early")
        self.pos += 1
        return tok

    def disjunction(self, entry: dict[str, Any]) -> bool:
        value = self.conjunction(entry)
        while (tok := self._peek()) and tok.kind == "word" and tok.text == "OR":
            self.pos += 1
            value = self.conjunction(entry) or value  # evaluate both: both must parse
        return value

    def conjunction(self, entry: dict[str, Any]) -> bool:
        value = self.unary(entry)
        while (tok := self._peek()) and not (tok.kind == "paren" and tok.text == ")"):
            if tok.kind == "word" and tok.text == "OR":
                break
            if tok.kind == "word" and tok.text == "AND":
                self.pos += 1
            value = self.unary(entry) and value
        return value

    def unary(self, entry: dict[str, Any]) -> bool:
        tok = self._take()
        if tok.kind == "word" and tok.text == "NOT":
            return not self.unary(entry)
        if tok.kind == "paren" and tok.text == "(":
            value = self.disjunction(entry)
            self._expect(")")
            return value
        if tok.kind != "word":
            raise UnsupportedQueryError(f"expected a field, got {tok.text!r}")
        op = self._take()
        if op.kind != "op":
            raise UnsupportedQueryError(f"expected a comparison after {tok.text}, got {op.text!r}")
        values = self._values()
        found, actual = _lookup(entry, tok.text)
        if not found:
            return op.text == "!="
        if op.text == "!=":
            return all(not _compare(tok.text, actual, "=", v) for v in values)
        return any(_compare(tok.text, actual, op.text, v) for v in values)

    def _values(self) -> list[str]:
        tok = self._take()
        if tok.kind == "paren" and tok.text == "(":
            values = [self._value(self._take())]
            while (nxt := self._peek()) and nxt.kind == "word" and nxt.text == "OR":
                self.pos += 1
                values.append(self._value(self._take()))
            self._expect(")")
            return values
        return [self._value(tok)]

    @staticmethod
    def _value(tok: _Tok) -> str:
        if tok.kind == "str":
            return re.sub(r"\\(.)", r"\1", tok.text[1:-1])
        if tok.kind == "word" and "(" not in tok.text:
            return tok.text
        raise UnsupportedQueryError(f"unsupported value {tok.text!r}")

    def _expect(self, text: str) -> None:
        tok = self._take()
        if tok.text != text:
            raise UnsupportedQueryError(f"expected {text!r}, got {tok.text!r}")


def _lookup(entry: dict[str, Any], path: str) -> tuple[bool, Any]:
    node: Any = entry
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return node is not None, node  # a JSON null is no value: it compares to nothing


def _compare(path: str, actual: Any, op: str, wanted: str) -> bool:
    if path == "severity":
        left, right = LEVELS.index(str(actual)), LEVELS.index(wanted)
    elif isinstance(actual, bool) or not isinstance(actual, int | float):
        left, right = str(actual), wanted  # type: ignore[assignment]
    else:
        try:
            left, right = actual, float(wanted)  # type: ignore[assignment]
        except ValueError:
            left, right = str(actual), wanted  # type: ignore[assignment]
    return {
        "=": left == right,
        ">": left > right,
        ">=": left >= right,
        "<": left < right,
        "<=": left <= right,
    }[op]
