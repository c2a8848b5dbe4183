"""The pytest plugin and the registered strategies, as a dependent project uses them.

The dependents are real: a project of their own in a temporary folder, with
the conftest and tests that `docs/guides/fuzzing.md` shows, run by a pytest
of their own (the plugin is found by its entry point, as in any project).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmgw_wire as wire
from llmgw_wire.codec import converter, decode, encode
from llmgw_wire.codec._cattrs_converter import betterproto2_classes
from llmgw_wire.mapping import MODELS_WITH_MESSAGE
from llmgw_wire.testing import _registry
from llmgw_wire.testing import strategies as lst
from llmgw_wire.testing.laws import LAWS
from llmgw_wire.testing.pytest_plugin import check_laws, law_cases

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

DOCS = Path(__file__).parents[2] / "docs"

# A dependent runs few examples: what is checked here is the plumbing.
QUICK = """
from hypothesis import settings
settings.register_profile("dependent", max_examples=3, database=None)
settings.load_profile("dependent")
"""

# A converter that drops a compute placement's devices: the laws must catch it.
BROKEN = """
import attrs
from llmgw_wire import Compute
from llmgw_wire.codec import make_converter

converter = make_converter()
_structure = converter.get_structure_hook(Compute)
converter.register_structure_hook(
    Compute, lambda message, cls: attrs.evolve(_structure(message, cls), devices=())
)
"""


def _docs_file(name: str) -> str:
    """The block of the fuzzing guide that starts `# name`."""
    text = (DOCS / "guides" / "fuzzing.md").read_text()
    blocks: list[str] = re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    return next(block for block in blocks if block.startswith(f"# {name}\n"))


def _dependent(
    tmp_path: Path, files: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "HYPOTHESIS_PROFILE"}}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


@pytest.mark.subprocess
def test_a_dependent_runs_every_law_through_the_plugin(tmp_path: Path) -> None:
    done = _dependent(
        tmp_path,
        {
            "conftest.py": _docs_file("conftest.py") + QUICK,
            "test_wire_laws.py": _docs_file("test_wire_laws.py"),
        },
        "-vv",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = set(re.findall(r"test_the_wire_laws_hold_for_our_converter\[(\S+)\] PASSED", done.stdout))
    assert ran == {case.id for case in law_cases()}
    assert len(ran) == sum(len(law.models) for law in LAWS)
    assert "test_our_values_cross_the_wire[value0] PASSED" in done.stdout


@pytest.mark.subprocess
def test_a_dependent_s_broken_converter_fails_its_laws(tmp_path: Path) -> None:
    done = _dependent(
        tmp_path,
        {
            "conftest.py": QUICK.replace("max_examples=3", "max_examples=100"),
            "ourwire.py": BROKEN,
            "test_wire_laws.py": _docs_file("test_wire_laws.py"),
        },
        "--llmgw-wire-converter",
        "ourwire:converter",
        "-k",
        "domain_wire_domain-Compute",
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "FAILED test_wire_laws.py::test_the_wire_laws_hold_for_our_converter" in done.stdout
    assert "structure(unstructure(d))" in done.stdout


@pytest.mark.subprocess
def test_the_plugin_does_nothing_when_turned_off(tmp_path: Path) -> None:
    done = _dependent(
        tmp_path,
        {"test_x.py": "def test_x(llmgw_wire_converter):\n    pass\n"},
        "-p",
        "no:llmgw_wire",
    )
    assert done.returncode == 1
    assert "fixture 'llmgw_wire_converter' not found" in done.stdout


def test_check_laws_takes_a_value_of_the_dependent_s() -> None:
    check_laws(wire.Heartbeat("n1"))
    with pytest.raises(TypeError, match="no law takes a Inventory"):
        check_laws(wire.Inventory())


# --- the strategies, registered with hypothesis -----------------------------------


def _models_by_wire_class() -> dict[type, type]:
    """By `llmgw_wire.v1` class: the domain model whose values its messages carry whole."""
    return {
        cls: drawn.model
        for cls, drawn in _registry.registered().items()
        if drawn.strategy == "wire_messages" and drawn.model is not None
    }


@pytest.mark.parametrize("model", MODELS_WITH_MESSAGE, ids=lambda m: m.__name__)
@given(data=st.data())
def test_from_type_draws_only_values_encode_accepts(model: type[Any], data: st.DataObject) -> None:
    value = data.draw(st.from_type(model))
    assert type(value) is model
    assert decode(encode(value), model) == value


_WIRE_CLASSES = sorted(betterproto2_classes().values(), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _WIRE_CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_from_type_draws_wire_messages_that_make_domain_values(
    cls: type[Any], data: st.DataObject
) -> None:
    message = data.draw(st.from_type(cls))
    assert isinstance(message, cls)
    assert decode(bytes(message), cls) == message
    model = _models_by_wire_class().get(cls)
    if model is not None:
        assert encode(converter.structure(message, model)) is not None


def test_every_domain_model_and_wire_class_has_its_strategy_registered() -> None:
    registered = set(_registry.registered())
    domain = [getattr(wire, name) for name in wire.__all__ if name in dir(wire.domain)]
    assert {t for t in domain if isinstance(t, type)} - {wire.NodeState} <= registered
    assert set(_WIRE_CLASSES) <= registered
    assert set(lst._BY_TYPE) == set(_registry.model_strategies()) <= registered


def _library_strategy(cls: type) -> SearchStrategy[Any]:
    """The public strategy `st.from_type(cls)` must be."""
    if cls in lst._BY_TYPE:
        return lst.domain_values(cls)
    envelopes = {
        wire.v1.AgentMessage: lst.agent_messages(),
        wire.v1.ControlMessage: lst.control_messages(),
    }
    if cls in envelopes:
        return envelopes[cls]
    if cls is wire.State:
        return lst.states()
    return lst.wire_messages(_models_by_wire_class()[cls])


@pytest.mark.parametrize("cls", list(_registry.registered()), ids=lambda c: c.__qualname__)
@settings(max_examples=3)
@given(data=st.data())
def test_every_registered_type_resolves_to_the_library_s_strategy(
    cls: type[Any], data: st.DataObject
) -> None:
    # Hypothesis ran the hook when this process imported it (entry point group
    # `hypothesis`): each type resolves through it, whenever first asked.
    assert _registry.with_resolver == set(_registry.registered())
    assert st.from_type(cls) is _library_strategy(cls)
    assert isinstance(data.draw(st.from_type(cls)), cls)


# A fresh interpreter: the strategies are imported when first asked for, not before.
FIRST_USE = """
import sys
from hypothesis import given, settings, strategies as st
import llmgw_wire as wire
import llmgw_wire.domain  # the codec's import loads no domain model
import llmgw_wire.v1
from llmgw_wire.codec._binary import decode, encode
from llmgw_wire.testing import _registry

report = {"hooked": len(_registry.with_resolver) == len(_registry.registered())}
report["before"] = "llmgw_wire.testing.strategies" in sys.modules
report["cattrs_before"] = "cattrs" in sys.modules
drawn = []

@settings(max_examples=50, database=None)
@given(st.from_type(wire.Compute))
def computes_cross_the_wire(compute):
    drawn.append(compute)
    assert decode(encode(compute), wire.Compute) == compute

@settings(max_examples=5, database=None)
@given(registration=...)
def inferred(registration: wire.Registration):
    drawn.append(registration)

computes_cross_the_wire()
inferred()
report["imported"] = "llmgw_wire.testing.strategies" in sys.modules
from llmgw_wire.testing import strategies as lst

report["after"] = len(drawn)
report["library_s"] = [
    st.from_type(wire.Compute) is lst.domain_values(wire.Compute),
    st.from_type(wire.Registration) is lst.domain_values(wire.Registration),
    st.from_type(wire.v1.Register) is lst.wire_messages(wire.Registration),
]
print(json.dumps(report))
"""


def _fresh(code: str, *args: str, **env: str) -> Any:
    """What `code`, run in a fresh interpreter with `args`, prints last, as JSON."""
    environ = {
        k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "HYPOTHESIS_NO_PLUGINS"}
    }
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + code, *args],
        env=environ | env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.subprocess
def test_the_strategies_are_imported_when_hypothesis_first_draws_a_library_type() -> None:
    report = _fresh(FIRST_USE)
    assert report["hooked"]
    assert (report["before"], report["cattrs_before"], report["imported"]) == (False, False, True)
    assert report["after"] >= 5
    assert report["library_s"] == [True, True, True]


# Hypothesis imported before or after the library's modules, and the mapping
# (which imports `llmgw_wire.v1` while it is itself being imported) after it.
IMPORT_ORDER = """
import importlib, sys
for module in sys.argv[1:]:
    importlib.import_module(module)
from hypothesis import strategies as st
from llmgw_wire import Compute, v1
from llmgw_wire.testing import _registry

hooked = _registry.with_resolver == set(_registry.registered())
compute, start = st.from_type(Compute), st.from_type(v1.StartShard)
from llmgw_wire.testing import strategies as lst
from llmgw_wire import ShardCommand
print(json.dumps([hooked, compute is lst.computes(), start is lst.wire_messages(ShardCommand)]))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "modules",
    [
        ["hypothesis", "llmgw_wire.mapping"],
        ["hypothesis", "llmgw_wire.v1", "llmgw_wire.domain"],
        ["llmgw_wire.domain", "hypothesis"],
        ["llmgw_wire.codec", "hypothesis"],
    ],
    ids="-then-".join,
)
def test_the_types_resolve_whichever_is_imported_first(modules: list[str]) -> None:
    assert _fresh(IMPORT_ORDER, *modules) == [True, True, True]


# A project's own strategy for one of the types, registered before the library's
# strategies are imported (by the first `st.from_type` of another type).
OWN = """
from hypothesis import strategies as st
import llmgw_wire as wire

own = st.just(wire.Compute("ours"))
st.register_type_strategy(wire.Compute, own)
host = st.from_type(wire.Host)
from llmgw_wire.testing import strategies as lst
print(json.dumps([st.from_type(wire.Compute) is own, host is lst.hosts()]))
"""


@pytest.mark.subprocess
def test_a_project_s_own_strategy_stays_registered_when_the_library_s_are_imported() -> None:
    assert _fresh(OWN) == [True, True]


# Without hypothesis's plugins, importing the strategies registers them at once.
NO_PLUGINS = """
import sys
from hypothesis import strategies as st
import llmgw_wire as wire
from llmgw_wire.testing import _registry

before = len(_registry.with_resolver)
from llmgw_wire.testing import strategies as lst
print(json.dumps([before, st.from_type(wire.Compute) is lst.computes()]))
"""


@pytest.mark.subprocess
def test_without_hypothesis_s_plugins_importing_the_strategies_registers_them() -> None:
    assert _fresh(NO_PLUGINS, HYPOTHESIS_NO_PLUGINS="1") == [0, True]


@pytest.mark.subprocess
def test_a_dependent_s_run_that_draws_none_of_them_imports_no_strategies(tmp_path: Path) -> None:
    done = _dependent(
        tmp_path,
        {
            "test_x.py": """
                import sys

                def test_x():
                    assert "llmgw_wire.testing.strategies" not in sys.modules
                    assert "hypothesis" not in sys.modules
            """
        },
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


# --- secrets in hypothesis's failure report -------------------------------------------

FAILING = """
import json, pathlib
from hypothesis import Phase, given, settings, strategies as st
import llmgw_wire as wire

SEEN = open("seen.jsonl", "a")

def _saw(key):
    SEEN.write(json.dumps(str(key)) + "\\n")
    SEEN.flush()

@settings(database=None, max_examples=100, phases=[Phase.generate, Phase.shrink])
@given(st.from_type(wire.ShardCommand))
def test_a_command_fails_once_it_has_a_key(command):
    _saw(command.spec.api_key)
    # Not `len(key) < 4` itself: pytest would show the key it read, as it
    # shows any value of a failing assert's expression.
    long_key = len(command.spec.api_key) >= 4
    assert not long_key

@settings(database=None, max_examples=100, phases=[Phase.generate, Phase.shrink])
@given(st.from_type(wire.v1.StartShard))
def test_a_start_shard_fails_once_it_has_a_key(message):
    _saw(message.api_key)
    long_key = len(message.api_key) >= 4
    assert not long_key
"""


@pytest.mark.subprocess
def test_hypothesis_s_failure_report_never_shows_a_drawn_secret(tmp_path: Path) -> None:
    done = _dependent(tmp_path, {"test_secret.py": FAILING})
    report = done.stdout + done.stderr
    assert done.returncode == 1, report[-3000:]
    assert report.count("Failing test case") + report.count("Falsifying example") >= 2, report
    assert "api_key=<secret str, not shown>" in report
    lines = (tmp_path / "seen.jsonl").read_text().splitlines()
    drawn = {json.loads(line) for line in lines}
    assert any(len(key) >= 4 for key in drawn)
    # A key shown would be shown as a value is, quoted; bare, a short key such
    # as "None" or "nodes" is found in any report, for other reasons.
    assert sorted(key for key in drawn if len(key) >= 4 and repr(key) in report) == []


# --- `llmgw-wire fuzz` as a dependent runs it -------------------------------------------

WITHOUT_HYPOTHESIS = """
import sys
sys.modules["hypothesis"] = None  # as if the testing extra were not installed
from llmgw_wire._cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("args", [["fuzz"], ["fuzz", "--help"]])
def test_fuzz_without_hypothesis_says_which_extra_to_install(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_HYPOTHESIS, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "llmgw-wire fuzz: needs hypothesis, which is not installed: "
        "pip install 'llmgw-wire[testing]'\n"
    )


@pytest.mark.subprocess
def test_fuzz_finds_a_converter_module_in_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "ourwire.py").write_text("from llmgw_wire.codec import make_converter\n")
    command = Path(sys.executable).parent / "llmgw-wire"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    only = ["--law", "domain_wire_domain", "--model", "Compute", "--examples", "5"]
    done = subprocess.run(
        [str(command), "fuzz", "--converter", "ourwire:make_converter", *only],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 runs, 5 examples, 0 failed" in done.stdout
