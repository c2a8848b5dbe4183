"""`llmgw-wire inspect`: binary wire messages shown as domain values."""

from __future__ import annotations

import datetime as dt
import io
import json
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from llmgw_wire import Heartbeat, Registration, ShardCommand, StopCommand, encode
from llmgw_wire._cli import main
from llmgw_wire._cli.inspect import TYPES, render_tree
from llmgw_wire.codec import json as wire_json
from llmgw_wire.codec.envelope import encode_envelope
from llmgw_wire.mapping import PAIRS
from llmgw_wire.testing.sample import sample_command, sample_registration

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.timeout(60)

SECRET = "sk-llmgw-demo-0000"
# Field 99, length-delimited and empty: a field this version does not define.
UNKNOWN_FIELD = bytes([0x9A, 0x06, 0x00])


def inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["inspect", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def registration_file(tmp_path: Path) -> Path:
    path = tmp_path / "register.bin"
    path.write_bytes(encode(sample_registration()))
    return path


@pytest.fixture
def command_file(tmp_path: Path) -> Path:
    path = tmp_path / "start_shard.bin"
    path.write_bytes(encode(sample_command()))
    return path


@pytest.mark.parametrize("name", ["Register", "llmgw.v1.Register", "Registration"])
def test_a_registration_is_shown_as_json(
    capsys: pytest.CaptureFixture[str], registration_file: Path, name: str
) -> None:
    status, out, err = inspect(capsys, "--type", name, str(registration_file))
    assert (status, err) == (0, "")
    assert wire_json.decode(out, Registration) == sample_registration()
    assert json.loads(out)["node"]["gpus"][7]["mig"]["profile"] == "3g.40gb"


def test_a_message_can_be_read_as_a_part_of_its_value(
    capsys: pytest.CaptureFixture[str], command_file: Path
) -> None:
    status, out, _ = inspect(capsys, "--type", "ShardSpec", str(command_file))
    assert status == 0
    assert json.loads(out)["profile"]["served_model_name"] == "mistral-small"


def test_the_api_key_is_redacted_unless_asked_for(
    capsys: pytest.CaptureFixture[str], command_file: Path
) -> None:
    _, out, _ = inspect(capsys, "--type", "StartShard", str(command_file))
    assert SECRET not in out
    assert "api_key" not in json.loads(out)["spec"]
    # What is left out loads back with the key empty, not a placeholder.
    assert wire_json.decode(out, ShardCommand).spec.api_key == ""

    _, out, _ = inspect(capsys, "--type", "StartShard", "--format", "tree", str(command_file))
    assert SECRET not in out
    assert "    api_key: <secret str, not shown>\n" in out

    _, out, _ = inspect(capsys, "--type", "StartShard", "--show-secrets", str(command_file))
    assert wire_json.decode(out, ShardCommand) == sample_command()
    _, out, _ = inspect(
        capsys, "-t", "StartShard", "-f", "tree", "--show-secrets", str(command_file)
    )
    assert f'    api_key: "{SECRET}"\n' in out


def test_garbage_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(b"garbage\xff")
    assert inspect(capsys, "--type", "Register", str(path)) == (
        1,
        "",
        f"error: {path}: Invalid `llmgw.v1.Register`: invalid wire type 7 in the tag of "
        "field 12 at offset 0\n",
    )


def test_bytes_of_another_message_are_a_clear_error(
    capsys: pytest.CaptureFixture[str], registration_file: Path
) -> None:
    status, out, err = inspect(capsys, "--type", "StartShard", str(registration_file))
    assert (status, out) == (1, "")
    assert err.startswith(f"error: {registration_file}: Invalid `llmgw.v1.StartShard`: ")


def test_fields_the_type_does_not_define_are_noted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "newer.bin"
    path.write_bytes(encode(StopCommand("r", "s")) + UNKNOWN_FIELD)
    status, out, err = inspect(capsys, "--type", "StopShard", str(path))
    assert status == 0
    assert json.loads(out) == {"replica_id": "r", "shard_id": "s", "grace": 0}
    assert err == (
        f"note: {path} has fields that llmgw.v1.StopShard does not define "
        "(a newer peer's, or bytes of another type); they are not shown\n"
    )


def test_stdin_is_read_for_a_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = encode_envelope(Heartbeat("n1", dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)))
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status, out, _ = inspect(capsys, "--type", "AgentMessage", "-")
    assert status == 0
    assert json.loads(out) == {
        "heartbeat": {"node_id": "n1", "sent_at": "2026-01-02T00:00:00+00:00"}
    }


def test_an_envelope_shows_its_member(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "control.bin"
    path.write_bytes(encode_envelope(StopCommand("r", "s", dt.timedelta(seconds=30))))
    status, out, _ = inspect(capsys, "--type", "ControlMessage", "--format", "tree", str(path))
    assert status == 0
    assert out == (
        "ControlMessage\n"
        "  stop_shard: StopCommand\n"
        '    replica_id: "r"\n'
        '    shard_id: "s"\n'
        "    grace: 0:00:30\n"
    )


def test_an_envelope_with_no_known_member_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "newer.bin"
    path.write_bytes(UNKNOWN_FIELD)
    assert inspect(capsys, "--type", "AgentMessage", str(path)) == (
        1,
        "",
        f"error: {path}: Invalid `llmgw.v1.AgentMessage`: no member this version knows "
        "(fields 99)\n",
    )


def test_an_unknown_type_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], registration_file: Path
) -> None:
    status, out, err = inspect(capsys, "--type", "Registr", str(registration_file))
    assert (status, out) == (2, "")
    assert err.startswith("error: unknown type 'Registr'; use one of the messages: Ack, ")
    assert "domain models: Adapter, AdoptedShard, Node, " in err


def test_a_missing_file_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "missing.bin"
    assert inspect(capsys, "--type", "Ack", str(path)) == (
        1,
        "",
        f"error: cannot read {path}: No such file or directory\n",
    )


def test_every_message_and_domain_model_has_a_type_name() -> None:
    for pair in PAIRS:
        if not pair.embedded:
            assert TYPES[pair.domain.__name__] == (pair.wire.removeprefix("llmgw.v1."), pair.domain)
            assert pair.wire.removeprefix("llmgw.v1.") in TYPES
    assert TYPES["Register"] == ("Register", Registration)
    assert TYPES["StartShard"] == ("StartShard", ShardCommand)


def test_the_tree_writes_scalars_as_json_does() -> None:
    assert render_tree(Heartbeat("n1", dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc))) == (
        'Heartbeat\n  node_id: "n1"\n  sent_at: 2026-01-02T00:00:00+00:00'
    )
    lines = render_tree(sample_registration()).splitlines()
    assert "    labels:" in lines
    assert '      "zone": "dc1-b"' in lines
    assert "        fabric: null" in lines  # a MIG slice has no fabric
    assert '    state: "ready"' in lines


@pytest.mark.subprocess
def test_the_command_line_entry_point(command_file: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "llmgw_wire._cli", "inspect", "-t", "StartShard", "-"],
        input=command_file.read_bytes(),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, b"")
    assert json.loads(result.stdout)["startup_timeout"] == 600_000


@pytest.mark.skipif(not __import__("os").path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_file_is_refused_after_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = inspect(capsys, "--type", "Ack", "/dev/zero")
    assert (status, out) == (1, "")
    assert err == "error: /dev/zero is larger than the 4 MiB a message may be\n"


def test_an_endless_pipe_is_refused_after_the_limit() -> None:
    # `yes` never ends: only the limit plus one byte is read from it.
    source = subprocess.Popen(["yes"], stdout=subprocess.PIPE)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "llmgw_wire._cli", "inspect", "-t", "Ack", "-"],
            stdin=source.stdout,
            capture_output=True,
            timeout=60,
            check=False,
        )
    finally:
        source.kill()
        source.wait(timeout=30)
    assert result.returncode == 1
    assert result.stderr == b"error: stdin is larger than the 4 MiB a message may be\n"


def test_a_closed_pipe_ends_quietly(registration_file: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llmgw_wire._cli",
            "inspect",
            "-t",
            "Register",
            str(registration_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # as `| head -1` once it has its line
    _, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (141, b"")
