"""The facts the codec reads from the schema, against Google's protobuf runtime's own reading.

`llmgw_wire._schema.messages` walks a descriptor set's messages; the codec
finds its maps and its maps of strings by that walk. Each is compared with
what a `DescriptorPool` built from the same files says: the runtime is the
reference, not a list written here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor

from llmgw_wire import compat
from llmgw_wire._schema import FILES, descriptor_set, messages
from llmgw_wire.codec._schema import CLASSES, DECODE_CLASSES, DOMAIN_CLASSES, STR_ENTRY

if TYPE_CHECKING:
    from collections.abc import Iterator

SCHEMAS = Path(__file__).parents[1] / "schemas"

# No package, messages nested three deep, maps in nested messages (of strings,
# of messages, keyed by numbers), a message shaped and named like a map's
# entry that no map declares, and a second file with a package of its own.
EDGES = {
    "edges.proto": """
syntax = "proto3";
message Outer {
  message Middle {
    message Inner {
      map<string, string> tags = 1;
      map<int32, Inner> children = 2;
    }
    map<string, Inner> inners = 1;
    Inner inner = 2;
  }
  message LooksEntry {
    string key = 1;
    string value = 2;
  }
  repeated LooksEntry looks = 1;
  Middle middle = 2;
  map<string, string> labels = 3;
}
message Empty {}
""",
    "deep/pkg.proto": """
syntax = "proto3";
package deep.pkg.v2;
import "edges.proto";
message Holder {
  map<string, Outer.Middle> middles = 1;
  message Nested { map<uint64, bytes> blobs = 1; }
  Nested nested = 2;
}
""",
}


def _edges(tmp_path: Path) -> descriptor_pb2.FileDescriptorSet:
    for name, text in EDGES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return compat.compile_protos(tmp_path)


def _pool(files: Any) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return pool


def _runtime_messages(files: Any) -> Iterator[Any]:
    """Every message `Descriptor` of `files`, nested ones included, as the runtime gives them."""

    def walk(message: Any) -> Iterator[Any]:
        yield message
        for nested in message.nested_types:
            yield from walk(nested)

    pool = _pool(files)
    for file in files:
        for message in pool.FindFileByName(file.name).message_types_by_name.values():
            yield from walk(message)


@pytest.mark.parametrize("schema", ["library", "older", "newer", "buf-corpus", "edges"])
def test_the_walk_finds_every_message_as_protobuf_does(schema: str, tmp_path: Path) -> None:
    if schema == "library":
        files = list(descriptor_set().file)
    elif schema == "edges":
        files = list(_edges(tmp_path).file)
    else:
        files = list(compat.compile_protos(SCHEMAS / schema).file)
    walked = [
        (name, message.options.map_entry, [field.name for field in message.field])
        for name, message in messages(files)
    ]
    expected = [
        (message.full_name, message.GetOptions().map_entry, [f.name for f in message.fields])
        for message in _runtime_messages(files)
    ]
    assert walked == expected
    assert any(entry for _, entry, _ in walked)  # maps were there to find
    if schema == "edges":
        names = {name for name, _, _ in walked}
        assert {"Outer.Middle.Inner.ChildrenEntry", "deep.pkg.v2.Holder.Nested.BlobsEntry"} <= names
        assert ("Outer.LooksEntry", False, ["key", "value"]) in walked


def test_the_shared_files_are_the_schema_without_its_comments() -> None:
    full = descriptor_set()
    assert any(file.HasField("source_code_info") for file in full.file)
    for file in full.file:
        file.ClearField("source_code_info")
    assert list(full.file) == list(FILES)
    assert descriptor_set() != full  # each call a copy of its own, comments included


def _string_map(field: Any) -> bool:
    entry = field.message_type
    return bool(
        entry is not None
        and entry.GetOptions().map_entry
        and all(f.type == FieldDescriptor.TYPE_STRING for f in entry.fields)
    )


def _maps() -> list[tuple[Any, Any]]:
    """(message, field) of every map of the schema, as the runtime flags its entries."""
    return [
        (message, field)
        for message in _runtime_messages(FILES)
        for field in message.fields
        if field.message_type is not None and field.message_type.GetOptions().map_entry
    ]


def _in(classes: dict[str, type[Any]], message: Any) -> Any:
    """The descriptor of the message of that name among `classes`, nested ones included."""
    pool = next(iter(classes.values())).DESCRIPTOR.file.pool
    return pool.FindMessageTypeByName(message.full_name)


def test_decode_reads_every_map_as_plain_entries_and_only_maps_of_strings_as_bytes() -> None:
    maps = _maps()
    assert any(_string_map(field) for _, field in maps)
    for message, field in maps:
        as_entries = _in(DECODE_CLASSES, message).fields_by_name[field.name]
        assert as_entries.message_type.full_name == field.message_type.full_name
        assert not as_entries.message_type.GetOptions().map_entry
        as_domain = _in(DOMAIN_CLASSES, message).fields_by_name[field.name]
        if _string_map(field):
            assert as_domain.type == FieldDescriptor.TYPE_BYTES, field.full_name
        else:
            assert as_domain.message_type.full_name == field.message_type.full_name


def test_the_string_entry_parses_the_entries_of_every_map_of_strings() -> None:
    assert STR_ENTRY is not None
    assert not STR_ENTRY.DESCRIPTOR.GetOptions().map_entry
    string_maps = [(message, field) for message, field in _maps() if _string_map(field)]
    assert string_maps
    for message, field in string_maps:
        value = {"gpu": "a100", "é": "", "": "x"}
        written: Any = message_factory.GetMessageClass(_in(CLASSES, message))()
        getattr(written, field.name).update(value)
        read = message_factory.GetMessageClass(_in(DOMAIN_CLASSES, message)).FromString(
            written.SerializeToString()
        )
        entries = [STR_ENTRY.FromString(raw) for raw in getattr(read, field.name)]
        assert {entry.key: entry.value for entry in entries} == value, field.full_name
