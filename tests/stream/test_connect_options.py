"""`keep_connected` takes what `connect` takes, by name: `ConnectOptions` says which."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import pytest

from llmgw_wire.stream import ConnectOptions, connect, keep_connected
from llmgw_wire.testing.sample import sample_registration
from tests.support import mypy_as_dependent
from tests.support import run_async as run

if TYPE_CHECKING:
    from pathlib import Path

    from llmgw_wire.stream import AgentSession


def test_connect_options_are_connect_s_keyword_arguments() -> None:
    keywords = {
        name
        for name, parameter in inspect.signature(connect).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert ConnectOptions.__optional_keys__ == keywords
    assert not ConnectOptions.__required_keys__
    # And each with connect's own type, as written (the module's annotations are strings).
    for name in keywords:
        written = inspect.signature(connect).parameters[name].annotation
        assert ConnectOptions.__annotations__[name].__forward_arg__ == written, name


def test_a_name_connect_does_not_take_is_refused_before_connecting() -> None:
    async def serve(session: AgentSession) -> None:
        raise AssertionError("never connected")

    async def main() -> None:
        unknown = {"tsl": None}
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['tsl'\]"):
            await keep_connected("127.0.0.1:1", sample_registration, serve, **unknown)  # type: ignore[arg-type]

    run(main)


USER = """\
from llmgw_wire import Registration
from llmgw_wire.stream import AgentSession, Keepalive, keep_connected

async def agent(registration: Registration) -> None:
    async def serve(session: AgentSession) -> None: ...
    await keep_connected("cp:7070", lambda: registration, serve, keepalive=Keepalive())
    await keep_connected("cp:7070", lambda: registration, serve, tsl=None)
    await keep_connected("cp:7070", lambda: registration, serve, leave_grace="soon")
"""


@pytest.mark.subprocess
def test_mypy_refuses_a_misspelled_or_mistyped_connect_option(tmp_path: Path) -> None:
    done = mypy_as_dependent(tmp_path, USER)
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert [line.split(":")[1] for line in errors] == ["7", "8"], done.stdout + done.stderr
    assert '"tsl"' in errors[0]
    assert '"leave_grace"' in errors[1]
