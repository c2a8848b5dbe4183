"""The architecture of CONTRIBUTING.md ("Where things go"), held by tests and `make lint`.

import-linter checks the layers (`pyproject.toml`, `[tool.importlinter]`);
these tests check what its contracts cannot say: that no module imports a
private name of another subpackage, and that there is no import cycle, not
even of imports made for type checkers alone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "llmgw_wire"

#: The private modules that other subpackages may import: no part of the
#: library's API, they are what a layer offers those above it. A private
#: name inside one of them stays private to its subpackage.
SHARED: frozenset[str] = frozenset(
    {
        "llmgw_wire._files",
        "llmgw_wire.codec._cattrs_converter",
        "llmgw_wire.codec._guard",
        "llmgw_wire.codec._classes",
        "llmgw_wire.codec._schema",
        "llmgw_wire.domain._keepalive",
        "llmgw_wire.domain._reconciler",
        "llmgw_wire.mapping._compiler",
        "llmgw_wire.mapping._description",
        "llmgw_wire.mapping._explain",
        "llmgw_wire.mapping._rules",
        "llmgw_wire.mapping._runtime",
        "llmgw_wire.mapping._table",
    }
)


def _shared(module: str, names: list[str]) -> list[str]:
    """`names` (a dotted path split) without the parts that name a `SHARED` module."""
    for end in range(len(names), 0, -1):
        if ".".join([module, *names[:end]]) in SHARED:
            return names[end:]
    return names


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if "_gen" in parts:
            continue
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out.append((name, path))
    return out


def _subpackage(module: str) -> str:
    """The first-level part a module belongs to: `llmgw_wire.codec._binary` -> `codec`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _private_imports(module: str, path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if not node.module.startswith("llmgw_wire"):
            continue
        target = node.module
        for alias in node.names:
            names = _shared("llmgw_wire", [*target.split(".")[1:], alias.name])
            if _subpackage(f"{target}.{alias.name}") == _subpackage(module):
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            # The generated layer is private by design (re-exported by `v1`),
            # and so are the version module that the root and the command read,
            # the calls that wait for `domain` and `v1` to be imported, and the
            # schema's descriptor set beside the generated layer (`v1.redaction`
            # re-exports it).
            if private and private[0] in {"_gen", "_version", "_on_import", "_schema"}:
                continue
            if private:
                found.append(f"{module}: from {target} import {alias.name}")
    return found


def test_no_module_imports_a_private_name_of_another_subpackage() -> None:
    offenders = [hit for name, path in _modules() for hit in _private_imports(name, path)]
    assert offenders == []


@pytest.fixture(
    scope="module", params=[True, False], ids=["run-time imports", "type-only imports too"]
)
def graph(request: pytest.FixtureRequest) -> grimp.ImportGraph:
    # A cycle of type-only imports (`if TYPE_CHECKING:`) is a circle of the
    # design all the same: a module below names a module above it.
    return grimp.build_graph("llmgw_wire", exclude_type_checking_imports=request.param)


def test_there_is_no_import_cycle_between_modules(graph: grimp.ImportGraph) -> None:
    # A package's __init__ re-exporting its own modules is not a cycle of the
    # architecture, so imports of a module by its own parent package are left out.
    modules = sorted(m for m in graph.modules if not m.startswith("llmgw_wire._gen"))

    def edges(module: str) -> list[str]:
        return sorted(
            target
            for target in graph.find_modules_directly_imported_by(module)
            if target in modules and not target.startswith(module + ".")
        )

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges(module):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert cycles == []


#: The one module that runs the fast path under a guard and chooses the serializer.
GUARD = PACKAGE / "codec" / "_guard.py"


def _guard_copies(path: Path) -> list[str]:
    """Where `path` catches the fast path's refusal, or serialises a upb message, itself."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name) and node.id == "REFUSED":
            found.append(f"{path.name}:{node.lineno}: names REFUSED")
        if isinstance(node, ast.Attribute) and node.attr == "SerializeToString":
            found.append(f"{path.name}:{node.lineno}: calls SerializeToString")
        if isinstance(node, ast.keyword) and node.arg == "deterministic":
            found.append(f"{path.name}:{node.lineno}: chooses deterministic")
    return found


def test_one_guarded_call_helper_and_one_serializer_choice() -> None:
    # "Run the fast path; if it refuses, explain outside the handler" is a
    # security invariant (upb's refusal can quote a secret): it is written once.
    offenders = [hit for _, path in _modules() if path != GUARD for hit in _guard_copies(path)]
    assert offenders == []


#: The one place that gives classes a secret-aware repr: the wire classes',
#: called once by `llmgw_wire.v1`. The domain models mark their secrets themselves.
REPR_INSTALLER = PACKAGE / "v1" / "redaction.py"


def _patches_a_repr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and any(
            isinstance(arg, ast.Constant) and arg.value in {"__repr__", "__str__"}
            for arg in node.args
        )
    )


def test_no_module_patches_a_repr_but_the_wire_layers_one_installer() -> None:
    offenders = [
        f"{path.name}:{node.lineno}"  # type: ignore[attr-defined]
        for _, path in _modules()
        if path != REPR_INSTALLER
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _patches_a_repr(node)
    ]
    assert offenders == []


def _rule_class_names() -> set[str]:
    from llmgw_wire.mapping._rules import Rule

    names, todo = set(), [Rule]
    while todo:
        for sub in todo.pop().__subclasses__():
            names.add(sub.__name__)
            todo.append(sub)
    return names


def test_no_module_names_a_rule_by_its_class_name_in_a_string() -> None:
    # What a rule is, is what it carries (`rule_kind`, `made_of`, `flat`):
    # a class-name string would make renaming a class a change of behaviour.
    names = _rule_class_names()
    offenders = []
    for _, path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # `__all__` names what a module defines, as it must.
        exported = {
            id(constant)
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            for constant in ast.walk(node.value)
        }
        offenders += [
            f"{path.name}:{node.lineno}: {node.value!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names and id(node) not in exported
        ]
    assert offenders == []


def test_the_command_line_imports_no_private_name() -> None:
    # `_cli` parses arguments and prints; what it prints comes from public names.
    offenders = []
    for name, path in _modules():
        if not name.startswith("llmgw_wire._cli"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith(
                "llmgw_wire"
            ):
                continue
            if node.module and node.module.startswith("llmgw_wire._cli"):
                continue
            parts = [
                part
                for a in node.names
                for part in _shared("llmgw_wire", [*(node.module or "").split(".")[1:], a.name])
            ]
            if any(p.startswith("_") and p not in {"_version", "__version__"} for p in parts):
                offenders.append(f"{name}: from {node.module} import ...")
    assert offenders == []


#: Where the mapping's rules are defined and the table written with them.
RULES_AND_TABLE = {PACKAGE / "mapping" / "_rules.py", PACKAGE / "mapping" / "_table.py"}


def test_the_leader_endpoint_rule_is_read_as_data_outside_the_mapping() -> None:
    # Every reader (the backends, the explainer, the secrets, the description)
    # asks the rule what it carries; none names it or its fields.
    offenders = [
        f"{path.name}:{node.lineno}"
        for _, path in _modules()
        if path not in RULES_AND_TABLE
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Name) and node.id == "LeaderEndpoint")
        or (isinstance(node, ast.Constant) and node.value == "leader_addr")
    ]
    assert offenders == []


#: The most times the hand-written package may say `Any` (the word, as
#: `grep -rwo Any llmgw_wire --include=*.py | grep -v _gen/ | wc -l` counts
#: it). protobuf's and grpc's objects are untyped, but what the package reads
#: of them has types of its own (`llmgw_wire.codec._typing`); lower it as
#: `Any`s go, never raise it to let one in.
MAX_ANY = 170


def test_the_package_says_any_no_more_than_its_ceiling() -> None:
    counts = {
        name: n
        for name, path in _modules()
        if (n := len(re.findall(r"(?<!\w)Any(?!\w)", path.read_text(encoding="utf-8"))))
    }
    total = sum(counts.values())
    most = sorted(counts.items(), key=lambda item: -item[1])[:5]
    assert total <= MAX_ANY, f"{total} Any in the package, over {MAX_ANY}; most in {most}"
