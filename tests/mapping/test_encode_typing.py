"""`encode` is typed: a type checker refuses a value that is not a domain model with a message.

What `encode` takes, `ModelWithMessage`, is written out for type checkers,
which cannot read the table; it is held equal to the table here.
"""

from __future__ import annotations

import re
import typing
from typing import TYPE_CHECKING

import pytest

from llmgw_wire.mapping import MODELS_WITH_MESSAGE
from llmgw_wire.mapping._table import ModelWithMessage
from tests.support import mypy_as_dependent

if TYPE_CHECKING:
    from pathlib import Path


def test_what_encode_takes_is_the_table_s_models_with_a_message() -> None:
    assert typing.get_args(ModelWithMessage) == MODELS_WITH_MESSAGE


USER = """\
import llmgw_wire as wire
from llmgw_wire import v1

def send(value: object, heartbeat: wire.Heartbeat, health: wire.GPUHealth) -> None:
    reveal_type(wire.encode(heartbeat))
    wire.encode(wire.Registration(wire.Node()))
    wire.encode(value)
    wire.encode(v1.Heartbeat())
    wire.encode(health)
    wire.encode(b"bytes")
"""


@pytest.mark.subprocess
def test_mypy_refuses_to_encode_what_is_not_a_domain_model_with_a_message(
    tmp_path: Path,
) -> None:
    done = mypy_as_dependent(tmp_path, USER)
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r'user\.py:5: note: Revealed type is "(builtins\.)?bytes"', done.stdout)
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    refused = ["object", "llmgw_wire._gen.llmgw.v1.Heartbeat", "GPUHealth", "bytes"]
    assert [line.split(":")[1] for line in errors] == ["7", "8", "9", "10"], done.stdout
    for line, kind in zip(errors, refused, strict=True):
        assert f'Argument 1 to "encode" has incompatible type "{kind}"' in line, line
