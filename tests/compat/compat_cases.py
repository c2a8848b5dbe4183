"""Schemas and edits of them, with the findings each edit must give.

The unit tests (`test_compat_check.py`) assert these findings; the
differential test against buf (`test_compat_buf.py`) runs buf on the same
edits, with the extra cases of `buf_cases.py`.
"""

from __future__ import annotations

import textwrap

# Line numbers matter: the expected locations below point into these texts.
PROTO3 = textwrap.dedent(
    """\
    syntax = "proto3";
    package t.v1;

    message Gpu {
      int32 index = 1;
      string uuid = 2;
      int32 memory_total_mb = 3;
      repeated int32 peers = 4;
      map<string, string> labels = 5;
      Kind kind = 6;
      Inner inner = 7;
      oneof sel {
        string a = 8;
        string b = 9;
      }
      sint32 delta = 10;
      optional int32 opt = 11;
      bytes blob = 12;
      reserved 20 to 22, 30;
      reserved "old";

      message Inner { string x = 1; }
    }

    enum Kind {
      KIND_UNSPECIFIED = 0;
      KIND_CARD = 1;
      KIND_SLICE = 2;
      reserved 9;
      reserved "KIND_GONE";
    }

    message Req {}
    message Resp {}
    message Unused { int32 n = 1; }

    service Svc {
      rpc Call(Req) returns (Resp);
      rpc Watch(stream Req) returns (stream Resp);
    }
    """
)

PROTO2 = textwrap.dedent(
    """\
    syntax = "proto2";
    package t.v1;

    message Job {
      required string id = 1;
      optional int32 retries = 2 [default = 3];
      optional string note = 3;
      optional float ratio = 4 [default = 0.5];
    }
    """
)

EDITIONS = textwrap.dedent(
    """\
    edition = "2023";
    package t.v1;

    message Doc {
      int32 n = 1;
    }

    enum Color {
      COLOR_UNSPECIFIED = 0;
    }
    """
)

ENUMS = textwrap.dedent(
    """\
    syntax = "proto3";
    package t.v1;

    message A { enum Kind { KIND_UNSPECIFIED = 0; KIND_X = 1; } }
    message B { enum Kind { KIND_UNSPECIFIED = 0; KIND_X = 1; KIND_Y = 2; } }
    message C { enum Sort { SORT_UNSPECIFIED = 0; } }
    message Use {
      A.Kind kind = 1;
    }
    """
)


def edit(text: str, *changes: tuple[str, str]) -> str:
    for old, new in changes:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


# Each case: an edit of a base schema, and what WIRE and WIRE_JSON find in it.
CASES: list[tuple[str, str, str, list[tuple[str, str]], list[tuple[str, str]]]] = [
    (
        "field deleted",
        PROTO3,
        edit(PROTO3, ("  int32 memory_total_mb = 3;\n", "\n")),
        [("FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED", "t.proto:4:1")],
        [
            ("FIELD_NO_DELETE_UNLESS_NAME_RESERVED", "t.proto:4:1"),
            ("FIELD_NO_DELETE_UNLESS_NUMBER_RESERVED", "t.proto:4:1"),
        ],
    ),
    (
        "field deleted, number reserved",
        PROTO3,
        edit(PROTO3, ("  int32 memory_total_mb = 3;\n", "  reserved 3;\n")),
        [],
        [("FIELD_NO_DELETE_UNLESS_NAME_RESERVED", "t.proto:4:1")],
    ),
    (
        "field deleted, number and name reserved",
        PROTO3,
        edit(
            PROTO3,
            ("  int32 memory_total_mb = 3;\n", '  reserved 3; reserved "memory_total_mb";\n'),
        ),
        [],
        [],
    ),
    (
        "field added",
        PROTO3,
        edit(PROTO3, ("  bytes blob = 12;\n", "  bytes blob = 12;\n  int32 extra = 13;\n")),
        [],
        [],
    ),
    (
        "message deleted",
        PROTO3,
        edit(PROTO3, ("message Unused { int32 n = 1; }\n", "")),
        [],
        [],
    ),
    (
        "int32 to string",
        PROTO3,
        edit(PROTO3, ("int32 index = 1", "string index = 1")),
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:5:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:5:3")],
    ),
    (
        "int32 to int64",
        PROTO3,
        edit(PROTO3, ("int32 index = 1", "int64 index = 1")),
        [],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:5:3")],
    ),
    (
        "int32 to uint32",
        PROTO3,
        edit(PROTO3, ("int32 index = 1", "uint32 index = 1")),
        [],
        [],
    ),
    (
        "int32 to bool",
        PROTO3,
        edit(PROTO3, ("int32 index = 1", "bool index = 1")),
        [],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:5:3")],
    ),
    (
        "sint32 to int32",
        PROTO3,
        edit(PROTO3, ("sint32 delta = 10", "int32 delta = 10")),
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:16:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:16:3")],
    ),
    (
        "sint32 to sint64",
        PROTO3,
        edit(PROTO3, ("sint32 delta = 10", "sint64 delta = 10")),
        [],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:16:3")],
    ),
    (
        "string to bytes",
        PROTO3,
        edit(PROTO3, ("string uuid = 2", "bytes uuid = 2")),
        [],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:6:3")],
    ),
    (
        "bytes to string",
        PROTO3,
        edit(PROTO3, ("bytes blob = 12", "string blob = 12")),
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:18:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:18:3")],
    ),
    (
        "another message type",
        PROTO3,
        edit(PROTO3, ("Inner inner = 7", "Req inner = 7")),
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:11:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:11:3")],
    ),
    (
        "map value type",
        PROTO3,
        edit(PROTO3, ("map<string, string> labels", "map<string, int32> labels")),
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:9:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:9:3")],
    ),
    (
        "map renamed",
        PROTO3,
        edit(PROTO3, ("map<string, string> labels", "map<string, string> tags")),
        # As buf: the hidden entry type is renamed with the field (LabelsEntry
        # to TagsEntry), a type change.
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:9:3")],
        [
            ("FIELD_SAME_JSON_NAME", "t.proto:9:3"),
            ("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:9:3"),
            ("FIELD_SAME_NAME", "t.proto:9:23"),
        ],
    ),
    (
        "field renamed",
        PROTO3,
        edit(PROTO3, ("int32 index = 1", "int32 idx = 1")),
        [],
        [("FIELD_SAME_JSON_NAME", "t.proto:5:3"), ("FIELD_SAME_NAME", "t.proto:5:9")],
    ),
    (
        "JSON name set",
        PROTO3,
        edit(PROTO3, ("string uuid = 2;", 'string uuid = 2 [json_name = "id"];')),
        [],
        [("FIELD_SAME_JSON_NAME", "t.proto:6:20")],
    ),
    (
        "repeated to singular",
        PROTO3,
        edit(PROTO3, ("repeated int32 peers", "int32 peers")),
        [("FIELD_WIRE_COMPATIBLE_CARDINALITY", "t.proto:8:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY", "t.proto:8:3")],
    ),
    (
        "optional to implicit presence",
        PROTO3,
        edit(PROTO3, ("optional int32 opt", "int32 opt")),
        [],
        [],
    ),
    (
        "moved out of a oneof",
        PROTO3,
        edit(PROTO3, ("    string b = 9;\n  }\n", "  }\n  string b = 9;\n")),
        [("FIELD_SAME_ONEOF", "t.proto:15:3")],
        [("FIELD_SAME_ONEOF", "t.proto:15:3")],
    ),
    (
        "moved into a oneof",
        PROTO3,
        edit(
            PROTO3,
            ("  }\n  sint32 delta = 10;\n", "    sint32 delta = 10;\n  }\n"),
        ),
        [("FIELD_SAME_ONEOF", "t.proto:15:5")],
        [("FIELD_SAME_ONEOF", "t.proto:15:5")],
    ),
    (
        "enum value deleted",
        PROTO3,
        edit(PROTO3, ("  KIND_SLICE = 2;\n", "\n")),
        [("ENUM_VALUE_NO_DELETE_UNLESS_NUMBER_RESERVED", "t.proto:25:1")],
        [
            ("ENUM_VALUE_NO_DELETE_UNLESS_NAME_RESERVED", "t.proto:25:1"),
            ("ENUM_VALUE_NO_DELETE_UNLESS_NUMBER_RESERVED", "t.proto:25:1"),
        ],
    ),
    (
        "enum value deleted, number reserved",
        PROTO3,
        edit(PROTO3, ("  KIND_SLICE = 2;\n", "  reserved 2;\n")),
        [],
        [("ENUM_VALUE_NO_DELETE_UNLESS_NAME_RESERVED", "t.proto:25:1")],
    ),
    (
        "enum value renamed",
        PROTO3,
        edit(PROTO3, ("KIND_SLICE = 2", "KIND_MIG = 2")),
        [],
        [("ENUM_VALUE_SAME_NAME", "t.proto:28:14")],
    ),
    (
        "enum value added",
        PROTO3,
        edit(PROTO3, ("  KIND_SLICE = 2;\n", "  KIND_SLICE = 2;\n  KIND_NIC = 3;\n")),
        [],
        [],
    ),
    (
        "reserved range shrunk",
        PROTO3,
        edit(PROTO3, ("reserved 20 to 22, 30;", "reserved 20 to 21;")),
        [("RESERVED_MESSAGE_NO_DELETE", "t.proto:4:1")] * 2,
        [("RESERVED_MESSAGE_NO_DELETE", "t.proto:4:1")] * 2,
    ),
    (
        "reserved ranges rearranged",
        PROTO3,
        edit(PROTO3, ("reserved 20 to 22, 30;", "reserved 30, 21 to 25, 20;")),
        [],
        [],
    ),
    (
        "reserved name dropped",
        PROTO3,
        edit(PROTO3, ('  reserved "old";\n', "\n")),
        [("RESERVED_MESSAGE_NO_DELETE", "t.proto:4:1")],
        [("RESERVED_MESSAGE_NO_DELETE", "t.proto:4:1")],
    ),
    (
        "enum reservation dropped",
        PROTO3,
        edit(PROTO3, ("  reserved 9;\n", "\n")),
        [("RESERVED_ENUM_NO_DELETE", "t.proto:25:1")],
        [("RESERVED_ENUM_NO_DELETE", "t.proto:25:1")],
    ),
    (
        "package changed",
        PROTO3,
        edit(PROTO3, ("package t.v1;", "package t.v2;")),
        [("FILE_SAME_PACKAGE", "t.proto:2:1")],
        [("FILE_SAME_PACKAGE", "t.proto:2:1")],
    ),
    (
        "request type",
        PROTO3,
        edit(PROTO3, ("rpc Call(Req)", "rpc Call(Resp)")),
        [("RPC_SAME_REQUEST_TYPE", "t.proto:38:12")],
        [("RPC_SAME_REQUEST_TYPE", "t.proto:38:12")],
    ),
    (
        "response type",
        PROTO3,
        edit(PROTO3, ("returns (Resp);", "returns (Req);")),
        [("RPC_SAME_RESPONSE_TYPE", "t.proto:38:26")],
        [("RPC_SAME_RESPONSE_TYPE", "t.proto:38:26")],
    ),
    (
        "client streaming dropped",
        PROTO3,
        edit(PROTO3, ("rpc Watch(stream Req)", "rpc Watch(Req)")),
        [("RPC_SAME_CLIENT_STREAMING", "t.proto:39:3")],
        [("RPC_SAME_CLIENT_STREAMING", "t.proto:39:3")],
    ),
    (
        "server streaming added",
        PROTO3,
        edit(PROTO3, ("returns (Resp);", "returns (stream Resp);")),
        [("RPC_SAME_SERVER_STREAMING", "t.proto:38:3")],
        [("RPC_SAME_SERVER_STREAMING", "t.proto:38:3")],
    ),
    (
        "idempotency level",
        PROTO3,
        edit(
            PROTO3,
            (
                "returns (Resp);",
                "returns (Resp) { option idempotency_level = IDEMPOTENT; }",
            ),
        ),
        [("RPC_SAME_IDEMPOTENCY_LEVEL", "t.proto:38:34")],
        [("RPC_SAME_IDEMPOTENCY_LEVEL", "t.proto:38:34")],
    ),
    (
        "enum of the same name that keeps every value",
        ENUMS,
        edit(ENUMS, ("  A.Kind kind", "  B.Kind kind")),
        [],
        [],
    ),
    (
        "enum of the same name that loses a value",
        edit(ENUMS, ("  A.Kind kind", "  B.Kind kind")),
        ENUMS,
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:8:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:8:3")],
    ),
    (
        "another enum",
        ENUMS,
        edit(ENUMS, ("  A.Kind kind", "  C.Sort kind")),
        [("FIELD_WIRE_COMPATIBLE_TYPE", "t.proto:8:3")],
        [("FIELD_WIRE_JSON_COMPATIBLE_TYPE", "t.proto:8:3")],
    ),
    (
        "required field dropped",
        PROTO2,
        edit(PROTO2, ("required string id", "optional string id")),
        [
            ("MESSAGE_SAME_REQUIRED_FIELDS", "t.proto:4:1"),
            ("FIELD_WIRE_COMPATIBLE_CARDINALITY", "t.proto:5:3"),
        ],
        [
            ("MESSAGE_SAME_REQUIRED_FIELDS", "t.proto:4:1"),
            ("FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY", "t.proto:5:3"),
        ],
    ),
    (
        "required field added",
        PROTO2,
        edit(PROTO2, ("optional string note", "required string note")),
        [
            ("FIELD_WIRE_COMPATIBLE_CARDINALITY", "t.proto:7:3"),
            ("MESSAGE_SAME_REQUIRED_FIELDS", "t.proto:7:3"),
        ],
        [
            ("FIELD_WIRE_JSON_COMPATIBLE_CARDINALITY", "t.proto:7:3"),
            ("MESSAGE_SAME_REQUIRED_FIELDS", "t.proto:7:3"),
        ],
    ),
    (
        "default changed",
        PROTO2,
        edit(PROTO2, ("[default = 3]", "[default = 4]")),
        [("FIELD_SAME_DEFAULT", "t.proto:6:41")],
        [("FIELD_SAME_DEFAULT", "t.proto:6:41")],
    ),
    (
        "default spelled differently",
        PROTO2,
        edit(
            PROTO2,
            ("[default = 3]", "[default = 0x3]"),
            ("optional string note = 3;", 'optional string note = 3 [default = ""];'),
        ),
        [],
        [],
    ),
    (
        "message JSON format",
        EDITIONS,
        edit(
            EDITIONS,
            ("Doc {\n", "Doc {\n  option features.json_format = LEGACY_BEST_EFFORT;\n"),
        ),
        [],
        [("MESSAGE_SAME_JSON_FORMAT", "t.proto:5:3")],
    ),
    (
        "file JSON format",
        EDITIONS,
        edit(
            EDITIONS,
            ("\nmessage Doc", "option features.json_format = LEGACY_BEST_EFFORT;\nmessage Doc"),
        ),
        [],
        [("MESSAGE_SAME_JSON_FORMAT", "t.proto:4:1"), ("ENUM_SAME_JSON_FORMAT", "t.proto:8:1")],
    ),
    (
        "editions presence",
        EDITIONS,
        edit(EDITIONS, ("int32 n = 1;", "int32 n = 1 [features.field_presence = IMPLICIT];")),
        [],
        [],
    ),
]
