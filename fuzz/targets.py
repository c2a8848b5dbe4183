"""The byte entry points of the library, as coverage-guided fuzz targets.

Each target takes one input (`bytes`) and checks the property every entry
point must hold for any input a peer, a file or a user may give it:

* **only the library's errors**: a refusal is the entry point's own
  `DecodeError` (`JSONError`), the store's `StoreError`, never another exception;
* **what decodes re-encodes, and Google's runtime reads it the same way**:
  a value decoded from bytes encodes again, decodes back equal, and equals
  what the library makes of the same bytes as Google's protobuf runtime
  reads them (with map entries as Go reads them; `tests/support.as_go_reads`);
  a JSON document that loads dumps again and loads back equal.

The first byte of an input picks what it is decoded as (a domain model or a
`llmgw_wire.v1` class, an envelope, a `--type` of `inspect`); the rest is the
input. `seeds(target)` gives the seed corpus, built from `tests/corpus`, the
wire fixtures of `tests/fixtures/HEAD` and the sample values.

`fuzz/run.py` runs the targets under atheris (libFuzzer); `tests/test_fuzz.py`
runs every seed and a short coverage-guided run of each, bounded by count.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmgw_wire import (  # noqa: E402
    DecodeError,
    JSONError,
    SavedShard,
    ShardStore,
    State,
    StoreError,
    decode,
    encode,
)
from llmgw_wire._cli import inspect  # noqa: E402
from llmgw_wire.codec import json as wire_json  # noqa: E402
from llmgw_wire.codec import wire_class  # noqa: E402
from llmgw_wire.codec._schema import CLASSES, DECODE_CLASSES  # noqa: E402
from llmgw_wire.codec._varint64 import over_64_bits  # noqa: E402
from llmgw_wire.codec.envelope import (  # noqa: E402
    AGENT_MESSAGE,
    CONTROL_MESSAGE,
    UnknownMember,
    decode_envelope,
    encode_envelope,
)
from llmgw_wire.mapping import PAIRS_WITH_MESSAGE  # noqa: E402
from llmgw_wire.testing.sample import (  # noqa: E402
    sample_command,
    sample_inventory,
    sample_registration,
)
from tests.support import as_go_reads, plain_bp2, plain_pb  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["TARGETS", "seeds"]

CORPUS = ROOT / "tests" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures" / "HEAD"
STORE_FIXTURE = ROOT / "tests" / "store_fixtures" / "format-1.json"

#: What the first byte of a `decode` or `json` input picks: a domain model and its wire message.
PAIRS = [(pair.domain, pair.wire) for pair in PAIRS_WITH_MESSAGE]
ENVELOPES = (AGENT_MESSAGE, CONTROL_MESSAGE)
#: What the first byte of an `inspect` input picks: every name `--type` takes, once per message.
INSPECT_TYPES = sorted({name for name in inspect.TYPES if not name.startswith("llmgw.")})


def _pick(items: list[Any] | tuple[Any, ...], data: bytes) -> tuple[Any, bytes] | None:
    if not data:
        return None
    return items[data[0] % len(items)], data[1:]


def _google_reads(wire: str, data: bytes) -> Any:
    """`data` as Google's runtime reads it (map entries as Go does); it must accept it."""
    return as_go_reads(CLASSES[wire], DECODE_CLASSES[wire], data)


def _accepted(read: Callable[[bytes], Any], wire: str, body: bytes) -> tuple[Any, Any] | None:
    """What `read` makes of `body` and what Google's runtime reads; None for a `DecodeError`."""
    try:
        value = read(body)
    except DecodeError:
        return None
    # Accepted: bytes Go's runtime refuses never are, and Google's runtime reads them.
    assert over_64_bits(body, CLASSES[wire].DESCRIPTOR) is None  # type: ignore[attr-defined]
    return value, _google_reads(wire, body)


# --- the targets ---------------------------------------------------------------------


def decode_target(data: bytes) -> None:
    """`decode` into each domain model (even first bytes) and its `llmgw_wire.v1` class (odd)."""
    picked = _pick([(d, w, into) for d, w in PAIRS for into in (d, wire_class(d))], data)
    if picked is None:
        return
    (domain, wire, into), body = picked
    accepted = _accepted(lambda b: decode(b, into), wire, body)
    if accepted is None:
        return
    value, google = accepted
    if into is domain:
        again = encode(value)
        assert decode(again, domain) == value, "decode(encode(decode(b))) != decode(b)"
        as_google = decode(google.SerializeToString(), domain)
        assert as_google == value, "the domain value differs from what Google's runtime read"
    else:
        assert plain_bp2(value, google.DESCRIPTOR) == plain_pb(google), (
            "fields differ from Google's"
        )
        again = _google_reads(wire, bytes(value))
        assert plain_pb(again) == plain_pb(google), "re-encoded, Google's runtime reads another"


def envelope_target(data: bytes) -> None:
    """`decode_envelope` of an `AgentMessage` (even first byte) or a `ControlMessage` (odd)."""
    picked = _pick(ENVELOPES, data)
    if picked is None:
        return
    envelope, body = picked
    accepted = _accepted(lambda b: decode_envelope(b, envelope), envelope, body)
    if accepted is None:
        return
    value, google = accepted
    if isinstance(value, UnknownMember):
        assert google.WhichOneof(google.DESCRIPTOR.oneofs[0].name) is None
        return
    again = encode_envelope(value)
    assert decode_envelope(again, envelope) == value, "re-encoded, it decodes to another value"
    as_google = decode_envelope(google.SerializeToString(), envelope)
    assert as_google == value, "the value differs from what Google's runtime read"


def json_target(data: bytes) -> None:
    """The JSON codec's `decode` into each domain model: what loads dumps again and loads back."""
    picked = _pick([domain for domain, _ in PAIRS], data)
    if picked is None:
        return
    into, body = picked
    try:
        value = wire_json.decode(body, into)
    except JSONError:
        return
    text = wire_json.encode(value, include_secrets=True)
    assert wire_json.decode(text, into, max_size=len(text)) == value, "dumped, it loads as another"


_STORE_ID = sample_command().spec.shard_id


@contextlib.contextmanager
def _store() -> Iterator[ShardStore]:
    with tempfile.TemporaryDirectory() as root, ShardStore(Path(root, "shards")) as store:
        yield store


def store_target(data: bytes, store: ShardStore | None = None) -> None:
    """The store's reader: a file's bytes as the saved shard of one id."""
    if store is None:
        with _store() as opened:
            store_target(data, opened)
        return
    path = store.path_for(_STORE_ID)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    try:
        saved = store.load(_STORE_ID)
    except StoreError:
        return
    assert saved is not None
    store.save(saved)
    assert store.load(_STORE_ID) == saved, "saved again, it loads as another"


def inspect_target(data: bytes) -> None:
    """`llmgw-wire inspect` of the bytes as each `--type`, in JSON and as a tree."""
    picked = _pick([(t, f) for t in INSPECT_TYPES for f in ("json", "tree")], data)
    if picked is None:
        return
    (name, form), body = picked
    args = argparse.Namespace(file="-", type=name, format=form, show_secrets=False)
    stdin = io.TextIOWrapper(io.BytesIO(body))
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = inspect.run(args)
    finally:
        sys.stdin = saved_stdin
    assert code in (0, 1), f"exit status {code}"
    assert (code == 1) == err.getvalue().startswith("error: "), err.getvalue()


#: The targets, by name.
TARGETS: dict[str, Callable[[bytes], None]] = {
    "decode": decode_target,
    "envelope": envelope_target,
    "json": json_target,
    "store": store_target,
    "inspect": inspect_target,
}


# --- the seed corpus ------------------------------------------------------------------


def _corpus() -> list[tuple[str, bytes]]:
    """The hostile corpus (`tests/corpus`) and the wire fixtures: (proto name, bytes)."""
    index = json.loads((CORPUS / "index.json").read_text())
    names = {"Registration": "llmgw.v1.Register", "ShardCommand": "llmgw.v1.StartShard"}
    found = [
        (names.get(entry["model"], f"llmgw.v1.{entry['model']}"), (CORPUS / name).read_bytes())
        for name, entry in sorted(index.items())
    ]
    found.extend(
        (f"llmgw.v1.{path.name.split('.')[0]}", path.read_bytes())
        for path in sorted(FIXTURES.glob("*.binpb"))
    )
    return found


def _values() -> list[object]:
    registration = sample_registration()
    node = registration.node
    return [
        registration,
        node,
        sample_command(),
        sample_command().spec,
        sample_inventory().host,
        *node.gpus[:1],
        *node.gpus[-1:],
        *registration.shards,
    ]


def seeds(target: str) -> list[bytes]:
    """The seed inputs of `target`, first byte included."""
    corpus = _corpus()
    if target == "decode":
        kinds = [(d, w, into) for d, w in PAIRS for into in (d, wire_class(d))]
        return [
            bytes([i]) + data
            for i, (_, wire, _) in enumerate(kinds)
            for proto, data in corpus
            if proto == wire
        ]
    if target == "envelope":
        return [bytes([ENVELOPES.index(p)]) + data for p, data in corpus if p in ENVELOPES] + [
            bytes([ENVELOPES.index(AGENT_MESSAGE)]) + encode_envelope(registration)
            for registration in [sample_registration()]
        ]
    if target == "json":
        domains = [domain for domain, _ in PAIRS]
        return [
            bytes([domains.index(type(value))])
            + wire_json.encode(value, include_secrets=True).encode()
            for value in _values()
            if type(value) in domains
        ]
    if target == "store":
        with _store() as store:
            saved = store.save(SavedShard(sample_command().spec, State.READY)).read_bytes()
        return [saved, STORE_FIXTURE.read_bytes()]
    if target == "inspect":
        types = [(t, f) for t in INSPECT_TYPES for f in ("json", "tree")]
        by_message = {inspect.TYPES[t][0]: i for i, (t, _) in enumerate(types)}
        return [
            bytes([by_message[proto.removeprefix("llmgw.v1.")]]) + data
            for proto, data in corpus
            if proto.removeprefix("llmgw.v1.") in by_message
        ]
    raise KeyError(target)
