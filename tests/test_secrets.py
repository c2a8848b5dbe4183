"""Secrets: declared once in the schema (`[debug_redact = true]`), hidden on every surface.

The canary test sends a key of every type through every surface, successes
and failures alike, and looks for it in everything produced: reprs, errors
(text, attributes, chained errors, printed tracebacks, pickles), dumps, the
command line's output and the log records.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pickle
import pprint
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import attrs
import pytest

from llmgw_wire import (
    DecodeError,
    EncodeError,
    JSONError,
    SavedShard,
    ShardCommand,
    ShardSpec,
    ShardStore,
    State,
    StateFileError,
    WireError,
    converter,
    decode,
    encode,
    shard_spec_from_start,
    start_shard_from_command,
    v1,
)
from llmgw_wire._cli import main
from llmgw_wire.codec import json as wire_json
from llmgw_wire.codec.envelope import encode_envelope
from llmgw_wire.codec.json import json_converter, make_json_converter
from llmgw_wire.domain import __all__ as domain_names
from llmgw_wire.errors import Redacted, shown
from llmgw_wire.mapping import MODELS_WITH_MESSAGE, PAIRS, SECRET_ATTRIBUTES, SECRET_FIELDS
from llmgw_wire.mapping.secrets import marked_secret, secret_attributes
from llmgw_wire.stream import ControlPlane, ControlSession, StreamError, connect, start_server
from llmgw_wire.stream.grpclib_codec import WireCodec
from llmgw_wire.testing.sample import sample_command, sample_registration
from llmgw_wire.v1.redaction import descriptor_set, secret_fields

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent

#: A key of every type an attacker, or a bug, could put in `api_key`.
CANARIES: dict[str, object] = {
    "str": "sk-CANARY-str-0001",
    "bytes": b"sk-CANARY-bytes-0002",
    "int": 7777123456789,
    # More than the 4300 digits that `str(int)` refuses to write.
    "huge int": 7777123456789 * 10**5000 + 7777123456789,
    "lone surrogate": "sk-CANARY-\udcff-0003",
    "very long": "sk-CANARY-long-" + "x" * 200_000 + "-0004",
    "list": ["sk-CANARY-list-0005"],
}
A_DICT = {"api_key": "sk-CANARY-dict"}
NEEDLES = ("CANARY", "7777123456789")
# StartShard with field 16 (`api_key`) holding bytes that are not UTF-8.
INVALID_UTF8 = bytes([0x82, 0x01, 15]) + b"sk-CANARY-\xff\xfe\xc0!!"


class Seen:
    """Everything a surface produced, to be searched for the canary."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def text(self, where: str, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("latin-1")
        self.texts.append((where, text))

    def value(self, where: str, value: object) -> None:
        self.text(f"{where}: repr", repr(value))
        self.text(f"{where}: str", str(value))
        self.text(f"{where}: format", f"{value!r:>10} {value}")
        self.text(f"{where}: pprint", pprint.pformat(value))

    def error(self, where: str, error: BaseException) -> None:
        """The error, its attributes, what it is chained to, its printed traceback, its pickle."""
        self.text(f"{where}: traceback", "".join(traceback.format_exception(error)))
        chained: BaseException | None = error
        depth = 0
        while chained is not None and depth < 10:
            self.text(f"{where}: [{depth}] str", str(chained))
            self.text(f"{where}: [{depth}] repr", repr(chained))
            self.text(f"{where}: [{depth}] args", repr(chained.args))
            for name, attribute in vars(chained).items():
                self.text(f"{where}: [{depth}] .{name}", repr(attribute))
            chained = chained.__cause__ or chained.__context__
            depth += 1
        self.text(f"{where}: pickle", pickle.dumps(error))

    def leaks(self) -> list[str]:
        return [where for where, text in self.texts if any(n in text for n in NEEDLES)]


def carries(data: str | bytes, key: object) -> bool:
    """Whether a deliberate serialisation holds the key."""
    if isinstance(data, bytes):
        return isinstance(key, str) and key.encode() in data
    return isinstance(key, str) and key in data


def command_with(key: object) -> ShardCommand:
    command = sample_command()
    return attrs.evolve(command, spec=attrs.evolve(command.spec, api_key=key))  # type: ignore[arg-type]


def run_inspect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["inspect", *args])
    out, err = capsys.readouterr()
    return status, out + err


@pytest.mark.parametrize("kind", list(CANARIES))
def test_a_canary_key_reaches_no_surface(  # noqa: PLR0912 - one walk through every surface
    kind: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    key = CANARIES[kind]
    valid = isinstance(key, str) and key.isascii()
    seen = Seen()
    command = command_with(key)
    spec = command.spec

    # Domain reprs, at any depth.
    seen.value("ShardSpec", spec)
    seen.value("ShardCommand", command)
    seen.value("a list of commands", [command, {"c": command}])

    # The wire classes, on their own and inside an envelope.
    start = v1.StartShard(shard_id="s0", api_key=key)  # type: ignore[arg-type]
    seen.value("v1.StartShard", start)
    seen.value("v1.ControlMessage", v1.ControlMessage(start_shard=start))

    # encode, the converter, the named conversions, the stream's codec.
    for where, encoder in (
        ("encode(ShardCommand)", lambda: encode(command)),
        ("encode(ShardSpec)", lambda: encode(spec)),
        ("converter.unstructure", lambda: converter.unstructure(command)),
        ("start_shard_from_command", lambda: start_shard_from_command(command)),
        ("the stream's codec", lambda: encode_envelope(command)),
        ("grpclib's codec", lambda: WireCodec().encode(command, v1.ControlMessage)),
    ):
        try:
            out = encoder()
        except EncodeError as error:  # noqa: PERF203
            assert not valid, f"{where} refused a valid key: {error}"  # noqa: PT017
            assert isinstance(error.got, Redacted)  # noqa: PT017
            assert error.secret  # noqa: PT017
            assert error.path[-1] == "api_key"  # noqa: PT017
            seen.error(where, error)
        else:
            assert valid, f"{where} accepted {kind}"
            if isinstance(out, bytes):
                assert carries(out, key), f"{where} lost the key"  # deliberate
            else:
                seen.value(f"{where}: result", out)
                assert out.api_key == key
    if valid:
        data = encode(command)
        back = decode(data, ShardCommand)
        assert back.spec.api_key == key
        seen.value("decode", back)
        seen.value("shard_spec_from_start", shard_spec_from_start(converter.unstructure(command)))
        # betterproto2's to_dict is a serialisation asked for: it carries the key.
        assert v1.StartShard.parse(data).to_dict()["apiKey"] == key

    # The JSON codec: the default dump leaves the key out, include_secrets keeps it.
    seen.text("to_json", wire_json.encode(command))
    seen.text("to_json(indent)", wire_json.encode([command], indent=2))
    seen.value("json_converter.unstructure", json_converter.unstructure(command))
    try:
        dumped = wire_json.encode(command, include_secrets=True)
    except EncodeError as error:
        # JSON holds any str, a lone surrogate included (escaped).
        assert not isinstance(key, str)
        seen.error("to_json(include_secrets=True)", error)
    else:
        assert json.loads(dumped)["spec"]["api_key"] == key
    document = json.loads(wire_json.encode(command))
    for wrong in (7777123456789, ["sk-CANARY-json"], {"sk-CANARY-k": "sk-CANARY-v"}, True):
        document["spec"]["api_key"] = wrong
        with pytest.raises(JSONError) as caught:
            wire_json.decode(json.dumps(document), ShardCommand)
        assert caught.value.path == ("spec", "api_key")
        seen.error(f"from_json({type(wrong).__name__})", caught.value)

    # llmgw-wire inspect, JSON and tree, whole messages and envelopes.
    if valid:
        files = {
            "StartShard": encode(command),
            "ShardSpec": encode(spec),
            "ControlMessage": encode_envelope(command),
        }
        for type_name, data in files.items():
            file = tmp_path / f"{type_name}.bin"
            file.write_bytes(data)
            for form in ("json", "tree"):
                status, out = run_inspect(capsys, str(file), "--type", type_name, "-f", form)
                assert status == 0, out
                seen.text(f"inspect {type_name} {form}", out)
                status, out = run_inspect(
                    capsys, str(file), "--type", type_name, "-f", form, "--show-secrets"
                )
                assert status == 0
                assert str(key) in out  # deliberate

    # The shard store: it keeps the key (the engine needs it), shows it nowhere.
    with ShardStore(tmp_path / "shards") as store:
        try:
            path = store.save(SavedShard(spec, State.READY))
        except StateFileError as error:
            assert not valid
            seen.error("store.save", error)
        else:
            assert valid
            assert carries(path.read_bytes(), key)  # deliberate
            seen.value("store.load", store.load(spec.shard_id))
            seen.value("store.load_all", store.load_all())
            document = json.loads(path.read_text())
            for wrong in (7777123456789, ["sk-CANARY-json"], {"sk-CANARY-k": "v"}):
                document["spec"]["api_key"] = wrong
                path.write_text(json.dumps(document))
                found = store.load_all()
                assert found.shards == ()
                (refused,) = found.errors
                seen.value("store.load_all with a mistyped key", found)
                seen.error("store.load_all error", refused)
        seen.value("store", store)

    # Logs, last: everything above may have logged.
    for record in caplog.records:
        seen.text(f"log {record.name}", record.getMessage())
        seen.text(f"log {record.name} args", repr(record.args))
        if record.exc_info and record.exc_info[1] is not None:
            seen.error(f"log {record.name} exception", record.exc_info[1])
    seen.text("caplog", caplog.text)
    out, err = capsys.readouterr()
    seen.text("stdout", out + err)

    assert seen.leaks() == []
    assert len(seen.texts) > 40


def test_bytes_that_are_not_utf8_in_the_key_are_not_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    seen = Seen()
    for into in (ShardCommand, ShardSpec, v1.StartShard):
        with pytest.raises(DecodeError) as caught:
            decode(INVALID_UTF8, into)
        assert caught.value.path == ("api_key",)
        # Not even the one byte that is wrong: it is a byte of the key.
        assert caught.value.reason == (
            "field 16 (`api_key`) at offset 0 is not valid UTF-8"
            " (a secret: its bytes are not shown)"
        )
        seen.error(f"decode {into.__name__}", caught.value)
    file = tmp_path / "bad.bin"
    file.write_bytes(INVALID_UTF8)
    for form in ("json", "tree"):
        status, out = run_inspect(capsys, str(file), "--type", "StartShard", "-f", form)
        assert status == 1
        seen.text(f"inspect {form}", out)
    seen.text("caplog", caplog.text)
    assert seen.leaks() == []


def test_the_stream_codec_chains_no_secret() -> None:
    # The envelope codec raised its EncodeError inside its handler, so that
    # upb's refusal, which quotes the string, stayed chained as __context__.
    seen = Seen()
    for encoder in (encode_envelope, lambda v: WireCodec().encode(v, v1.ControlMessage)):
        with pytest.raises(EncodeError) as caught:
            encoder(command_with(CANARIES["lone surrogate"]))
        assert caught.value.__context__ is None
        seen.error("the stream's codec", caught.value)
    assert seen.leaks() == []


def test_errors_about_other_attributes_do_not_show_the_key() -> None:
    command = command_with("sk-CANARY-str-0001")
    too_big = attrs.evolve(command, spec=attrs.evolve(command.spec, rank=2**40))
    mistyped = attrs.evolve(command, spec=attrs.evolve(command.spec, rank="0"))  # type: ignore[arg-type]
    seen = Seen()
    for call in (lambda: encode(too_big), lambda: wire_json.encode(mistyped, include_secrets=True)):
        with pytest.raises(EncodeError) as caught:
            call()
        assert caught.value.path == ("spec", "rank")
        seen.error("rank", caught.value)
    # Not a ShardCommand at all: only what it is, never its content.
    with pytest.raises(EncodeError) as caught:
        encode(attrs.evolve(command, spec=A_DICT))  # type: ignore[arg-type]
    assert str(caught.value) == "Expected `ShardSpec`, got a dict of 1 item - at `$.spec`"
    # Its `.got` is the dict itself, as for any value not in a secret's place.
    seen.text("a dict", str(caught.value) + repr(caught.value))
    seen.text("a dict", "".join(traceback.format_exception(caught.value)))
    assert seen.leaks() == []


def test_the_secrets_come_from_the_schema() -> None:
    assert secret_fields(descriptor_set()) == SECRET_FIELDS == {"llmgw.v1.StartShard.api_key"}
    assert SECRET_ATTRIBUTES == secret_attributes(SECRET_FIELDS, PAIRS) == {(ShardSpec, "api_key")}


def test_the_domain_marks_exactly_the_secrets_the_schema_implies() -> None:
    # The domain cannot read the schema: what it marks with `secret()` is held
    # to what the schema's debug_redact and the mapping table imply.
    from llmgw_wire import domain

    models = [getattr(domain, name) for name in domain_names]
    models = [model for model in models if attrs.has(model)]
    assert set(MODELS_WITH_MESSAGE) <= set(models)
    assert marked_secret(models) == SECRET_ATTRIBUTES


def test_every_default_dump_leaves_secrets_out() -> None:
    command = command_with("sk-CANARY-str-0001")
    assert "api_key" not in json_converter.unstructure(command)["spec"]
    assert make_json_converter(include_secrets=True).unstructure(command)["spec"]["api_key"] == (
        "sk-CANARY-str-0001"
    )


@pytest.mark.parametrize(
    ("value", "secret", "spelling", "text"),
    [
        ("sk-1", True, "python", "<secret str, not shown>"),
        (b"sk-1", True, "python", "<secret bytes, not shown>"),
        (12, True, "json", "<secret int, not shown>"),
        (Redacted("int"), False, "python", "<secret int, not shown>"),
        ("a" * 100, False, "python", "'" + "a" * 56 + "..."),
        ("\udcff", False, "python", "'\\udcff'"),
        ("\udcff", False, "json", '"\\udcff"'),
        ("é", False, "json", '"é"'),
        (10**5000, False, "python", "an int of 16610 bits"),
        ([1, 2, 3], False, "python", "a list of 3 items"),
        ({"k": "v"}, False, "python", "a dict of 1 item"),
        ({"k": "v"}, False, "json", "an object"),
        (ShardSpec(), False, "python", "a ShardSpec"),
        (None, False, "json", "null"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, int) and v > 10**50 else None,
)
def test_one_renderer_shows_values(value: object, secret: bool, spelling: str, text: str) -> None:
    assert shown(value, secret=secret, spelling=spelling) == text


def test_a_secret_encode_error_pickles_without_the_value() -> None:
    error = EncodeError("string", b"sk-CANARY", ("api_key",), secret=True)
    again = pickle.loads(pickle.dumps(error))
    assert (
        str(again)
        == str(error)
        == "Expected `string`, got <secret bytes, not shown> - at `$.api_key`"
    )
    assert again.got == Redacted("bytes")
    assert again.secret
    assert isinstance(again, WireError)


# --- a field marked in a schema is secret everywhere, with no other change ----------

_MARKED = """
import json, sys, attrs, io, contextlib, traceback
from llmgw_wire import ShardCommand, ShardSpec, EncodeError, encode, decode, v1
from llmgw_wire.codec import json as wire_json
from llmgw_wire._cli import main
from llmgw_wire.domain import Profile
from llmgw_wire.mapping import SECRET_ATTRIBUTES, SECRET_FIELDS
from llmgw_wire.testing.sample import sample_command, sample_registration

out = {"fields": sorted(SECRET_FIELDS),
       "attributes": sorted(f"{m.__name__}.{a}" for m, a in SECRET_ATTRIBUTES)}
texts = []
command = sample_command()
spec = attrs.evolve(command.spec, profile_fp="fp-CANARY-1",
                    profile=attrs.evolve(command.spec.profile, env={"K-CANARY": "v-CANARY"}))
command = attrs.evolve(command, spec=spec)
texts += [repr(command), repr(spec), repr(spec.profile), str(command), wire_json.encode(command)]
wire = v1.StartShard(profile_fp="fp-CANARY-2", hf_token="hf-CANARY-3",
                     profile=v1.EngineProfile(env={"K-CANARY": "v-CANARY"}))
texts += [repr(wire), str(v1.ControlMessage(start_shard=wire))]
data = encode(command)
out["carried"] = b"fp-CANARY-1" in data and b"K-CANARY" in data
with open(sys.argv[1], "wb") as f:
    f.write(data)
for form in ("json", "tree"):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        assert main(["inspect", sys.argv[1], "--type", "StartShard", "-f", form]) == 0
    texts.append(buffer.getvalue())
bad = [
    attrs.evolve(command, spec=attrs.evolve(spec, profile_fp=b"fp-CANARY-4")),
    attrs.evolve(command, spec=attrs.evolve(spec, profile=attrs.evolve(
        spec.profile, env={"K-CANARY-5\\udcff": "v"}))),
]
# JSON holds what the wire cannot (a lone surrogate): only the bytes go to it.
for value, calls in zip(bad, [(encode, wire_json.encode), (encode,)]):
    for call in calls:
        try:
            call(value, include_secrets=True) if call is wire_json.encode else call(value)
        except EncodeError as error:
            texts += [str(error), repr(error.got), repr(error.args), repr(error.path),
                      "".join(traceback.format_exception(error)), repr(error.__context__)]
        else:
            raise AssertionError(f"accepted {value!r}")
out["leaks"] = [t for t in texts if "CANARY" in t]
print(json.dumps(out))
"""


@pytest.mark.subprocess
def test_a_field_marked_debug_redact_in_a_schema_is_secret_everywhere(tmp_path: Path) -> None:
    # A copy of the library whose schema differs by the option: on two fields
    # the domain carries (a string and a map), which the domain then marks
    # `secret()` too (test_the_domain_marks_exactly_the_secrets_the_schema_implies
    # fails until it does), and on a new field the domain does not know.
    copy = tmp_path / "copy"
    shutil.copytree(
        ROOT / "llmgw_wire", copy / "llmgw_wire", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(ROOT / "proto", copy / "proto")
    # What `scripts/gen.py` compiles besides the schema (grpc's health.proto).
    shutil.copytree(ROOT / "third_party", copy / "third_party")
    shutil.copytree(ROOT / "scripts", copy / "scripts")
    shard = copy / "proto" / "llmgw" / "v1" / "shard.proto"
    text = shard.read_text()
    for old, new in (
        ("string profile_fp = 15;", "string profile_fp = 15 [debug_redact = true];"),
        ("map<string, string> env = 9;", "map<string, string> env = 9 [debug_redact = true];"),
        (
            "int32 cpu_threads = 17;",
            "int32 cpu_threads = 17;\n  string hf_token = 18 [debug_redact = true];",
        ),
    ):
        assert old in text, old
        text = text.replace(old, new, 1)
    shard.write_text(text)
    engines = copy / "llmgw_wire" / "domain" / "_engines.py"
    text = engines.read_text()
    for old, new in (
        ("env: Mapping[str, str] = str_map()", "env: Mapping[str, str] = secret(mapping=True)"),
        ('profile_fp: str = ""\n    api_key', "profile_fp: str = secret()\n    api_key"),
    ):
        assert old in text, old
        text = text.replace(old, new, 1)
    engines.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(copy)}
    subprocess.run(
        [sys.executable, "scripts/gen.py"],
        cwd=copy,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    result = subprocess.run(
        [sys.executable, "-c", _MARKED, str(tmp_path / "start.bin")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["fields"] == [
        "llmgw.v1.EngineProfile.env",
        "llmgw.v1.StartShard.api_key",
        "llmgw.v1.StartShard.hf_token",
        "llmgw.v1.StartShard.profile_fp",
    ]
    assert out["attributes"] == [
        "Profile.env",
        "ShardSpec.api_key",
        "ShardSpec.profile_fp",
    ]
    assert out["carried"]
    assert out["leaks"] == []


# --- the stream: a send that fails on the key, in the logs and the status ---------


class _Failing(ControlPlane):
    """Sends a command whose key the wire cannot carry, and lets the error out."""

    def __init__(self, key: object) -> None:
        self.key = key

    async def handle(self, session: ControlSession) -> None:
        await session.recv(timeout=10)
        await session.send(command_with(self.key))


@pytest.mark.parametrize("kind", ["bytes", "lone surrogate", "int"])
def test_a_send_that_fails_on_the_key_logs_no_key_and_ends_with_no_key(
    kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    # What the issue found: the server's traceback of the failed handler wrote
    # the key into the control plane's log when session.send refused it.
    caplog.set_level(logging.DEBUG)
    seen = Seen()
    ended: list[object] = []

    async def main() -> None:
        server = await start_server(_Failing(CANARIES[kind]))
        try:
            async with connect(f"127.0.0.1:{server.port}") as session:
                await session.send(sample_registration())
                # The call ends, one way or another: what the agent sees of it is searched.
                try:
                    ended.append(await session.recv(timeout=10))
                except StreamError as error:
                    ended.append(error)
        finally:
            await server.stop(grace=None)

    asyncio.run(asyncio.wait_for(main(), 30))
    assert ended
    for end in ended:
        seen.text("what the agent saw", f"{end!r} {end}")
        if isinstance(end, BaseException):
            seen.error("the agent's error", end)
    assert any(r.exc_info for r in caplog.records), [r.getMessage() for r in caplog.records]
    for record in caplog.records:
        seen.text(f"log {record.name}", record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            seen.error(f"log {record.name} exception", record.exc_info[1])
    seen.text("caplog", caplog.text)
    assert seen.leaks() == []


def test_pickles_hold_the_key_in_clear_and_give_the_value_back() -> None:
    # What docs/guides/rules.md#pickles says: a pickle is the value whole,
    # the key included, so that a value crossing processes can still start
    # its engine; it is to be kept as the secret itself.
    key = "sk-CANARY-pickle"
    command = attrs.evolve(sample_command(), spec=attrs.evolve(sample_command().spec, api_key=key))
    start = v1.StartShard.FromString(encode(command))
    values = [command.spec, command, start, SavedShard(command.spec, State.READY)]
    for value in values:
        data = pickle.dumps(value)
        assert key.encode() in data, type(value).__name__
        assert pickle.loads(data) == value
        assert key not in repr(value)
