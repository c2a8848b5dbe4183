"""Output formats of the findings, as buf writes them: text, json, msvs, github-actions, junit.

`config-ignore-yaml` writes, instead of the findings, the `ignore_only`
section of a `buf.yaml` that accepts them all (buf has it for `buf lint`).

Each format is a function of the findings (paths as the user should see
them) to the text printed on standard output; `FORMATS` lists them by the
name `--error-format` takes.
"""

from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import TYPE_CHECKING

from llmgw_wire.compat._model import escape_text

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from llmgw_wire.compat._model import Finding

__all__ = ["FORMATS", "render"]


def _text(findings: Sequence[Finding]) -> str:
    return "".join(f"{finding}\n" for finding in findings)


def _msvs(findings: Sequence[Finding]) -> str:
    # Visual Studio's `path(line,column) : error TYPE : message`.
    return "".join(
        f"{escape_text(f.path)}({f.line},{f.column}) : error {f.rule} : {escape_text(f.message)}\n"
        for f in findings
    )


_PLAIN_PATH = re.compile(r"[\w./-]+")


def _config_ignore_yaml(findings: Sequence[Finding]) -> str:
    if not findings:
        return ""
    by_rule: dict[str, set[str]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, set()).add(f.path)
    out = ["version: v2", "breaking:", "  ignore_only:"]
    for rule in sorted(by_rule):
        out.append(f"    {rule}:")
        # A JSON string is a YAML string too: any other name is quoted.
        out.extend(
            f"      - {path if _PLAIN_PATH.fullmatch(path) else json.dumps(path)}"
            for path in sorted(by_rule[rule])
        )
    return "\n".join(out) + "\n"


def _json(findings: Sequence[Finding]) -> str:
    # buf's JSON: one compact object per line, with these keys, in this order.
    return "".join(
        json.dumps(
            {
                "path": f.path,
                "start_line": f.line,
                "start_column": f.column,
                "end_line": f.end_line or f.line,
                "end_column": f.end_column or f.column,
                "type": f.rule,
                "message": f.message,
            },
            separators=(",", ":"),
        )
        + "\n"
        for f in findings
    )


def _escape_data(text: str) -> str:
    # GitHub's workflow commands: https://github.com/actions/toolkit (command.ts);
    # then what GitHub's escaping leaves as it is but a log viewer acts on (an
    # ANSI escape would paint the log), escaped as the other formats escape it.
    return escape_text(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github_actions(findings: Sequence[Finding]) -> str:
    out = []
    for f in findings:
        properties = {
            "file": f.path,
            "line": str(f.line),
            "col": str(f.column),
            "endLine": str(f.end_line or f.line),
            "endColumn": str(f.end_column or f.column),
            "title": f.rule,
        }
        fields = ",".join(f"{key}={_escape_property(value)}" for key, value in properties.items())
        out.append(f"::error {fields}::{_escape_data(f'{f.rule}: {f.message}')}\n")
    return "".join(out)


def _junit(findings: Sequence[Finding]) -> str:
    from xml.sax.saxutils import quoteattr

    # buf's layout: a test suite per file, a failed test case per finding.
    # XML 1.0 cannot carry most control characters, even as references.
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(escape_text(f.path), []).append(f)
    out = ["<testsuites>"]
    for path, items in by_file.items():
        name = path.removesuffix(".proto")
        out.append(
            f'  <testsuite name={quoteattr(name)} tests="{len(items)}" '
            f'failures="{len(items)}" errors="0">'
        )
        for f in items:
            out.append(f"    <testcase name={quoteattr(f'{f.rule}_{f.line}_{f.column}')}>")
            message = quoteattr(f"{path}:{f.line}:{f.column}:{escape_text(f.message)}")
            out.append(f"      <failure message={message} type={quoteattr(f.rule)}></failure>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


#: The output formats, by the name `--error-format` takes.
FORMATS: Mapping[str, Callable[[Sequence[Finding]], str]] = MappingProxyType(
    {
        "text": _text,
        "json": _json,
        "msvs": _msvs,
        "github-actions": _github_actions,
        "junit": _junit,
        "config-ignore-yaml": _config_ignore_yaml,
    }
)


def render(findings: Sequence[Finding], error_format: str = "text") -> str:
    """The findings as `error_format` (one of `FORMATS`) writes them."""
    return FORMATS[error_format](findings)
