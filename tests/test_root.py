"""The root package: one table of its names, lazy at run time, every name known to mypy."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from typing import TYPE_CHECKING

import pytest

import llmgw_wire
from llmgw_wire import _HOMES
from tests.support import mypy_as_dependent

if TYPE_CHECKING:
    from pathlib import Path


def _type_checking_imports() -> dict[str, str]:
    """The names imported under `if TYPE_CHECKING:` in the root, and their modules."""
    tree = ast.parse(inspect.getsource(llmgw_wire))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    found[alias.asname or alias.name] = str(statement.module)
    return found


def test_all_and_the_type_checking_imports_are_the_table() -> None:
    assert sorted(llmgw_wire.__all__) == sorted([*_HOMES, "__version__"])
    assert _type_checking_imports() == _HOMES


@pytest.mark.parametrize("name", sorted(_HOMES))
def test_each_name_is_its_home_module_s(name: str) -> None:
    assert getattr(llmgw_wire, name) is getattr(importlib.import_module(_HOMES[name]), name)


def test_a_name_the_root_does_not_have_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Regsitration'"):
        llmgw_wire.Regsitration  # type: ignore[attr-defined]  # noqa: B018


def test_mypy_refuses_a_misspelt_root_name(tmp_path: Path) -> None:
    done = mypy_as_dependent(
        tmp_path,
        "import llmgw_wire as wire\n"
        "x: wire.Regsitration\n"
        "y = wire.Regsitration\n"
        "try:\n"
        "    pass\n"
        "except wire.PeerUnavailabel:\n"
        "    pass\n",
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'user.py:2: error: Name "wire.Regsitration" is not defined' in done.stdout
    assert 'user.py:3: error: Module has no attribute "Regsitration"' in done.stdout
    assert 'user.py:6: error: Module has no attribute "PeerUnavailabel"' in done.stdout


@pytest.mark.subprocess
def test_mypy_knows_every_root_name_and_its_type(tmp_path: Path) -> None:
    uses = "".join(f"n_{name} = wire.{name}\n" for name in llmgw_wire.__all__)
    done = mypy_as_dependent(
        tmp_path,
        "import llmgw_wire as wire\n"
        f"{uses}"
        "def f(data: bytes) -> wire.Registration:\n"
        "    try:\n"
        "        return wire.decode(data, wire.Registration)\n"
        "    except wire.PeerUnavailable:\n"
        "        raise\n"
        "code: wire.StatusCode = wire.StreamError('x').code\n"
        "reveal_type(wire.decode(b'', wire.Node))\n",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r'Revealed type is "llmgw_wire\.domain\.[a-z_.]*\.Node"', done.stdout)
