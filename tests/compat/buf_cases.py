"""The corpus of the differential test against buf: previous and current schemas.

`CORPUS` holds every edit of `compat_cases.CASES` (single-file edits whose
findings the unit tests also assert) and the cases below: extensions, enum
aliases, map fields, editions, several files, safe edits, and edits of the
library's own schema (frozen in `schemas/`, with the older peers'), and cases
after buf's own test pairs (`buf_pairs.py`). Each case is
`(name, previous, current)`, a schema being a dict of file name to text.
Between them they exercise every WIRE and WIRE_JSON rule
(`test_corpus_exercises_every_rule` holds that against buf's recorded
verdicts).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.compat.buf_pairs import BUF_PAIRS
from tests.compat.compat_cases import CASES, edit

__all__ = ["CORPUS", "Case"]

Case = tuple[str, dict[str, str], dict[str, str]]


def _d(text: str) -> str:
    return textwrap.dedent(text)


EXTENSIONS = _d(
    """\
    syntax = "proto2";
    package t.v1;

    import "google/protobuf/descriptor.proto";

    extend google.protobuf.FieldOptions {
      optional string tag = 50001;
      repeated int32 nums = 50002;
      optional int64 gone = 50003;
      optional string label = 50004;
      optional int32 level = 50005 [default = 2];
    }

    message Holder {
      extend google.protobuf.MessageOptions {
        optional bool sealed = 50100;
      }
      optional int32 a = 1;
      extensions 100 to 200;
    }

    extend Holder {
      optional string note = 100;
      optional Holder inner = 101;
    }
    """
)

EXTENSIONS3 = _d(
    """\
    syntax = "proto3";
    package t.v1;

    import "google/protobuf/descriptor.proto";

    extend google.protobuf.FieldOptions {
      string owner = 50001;
      repeated string reviewers = 50002;
    }

    message M {
      string name = 1 [(owner) = "x"];
    }
    """
)

ALIASES = _d(
    """\
    syntax = "proto3";
    package t.v1;

    enum State {
      option allow_alias = true;
      STATE_UNSPECIFIED = 0;
      STATE_DRAINING = 5;
      STATE_STOPPED = 6;
      STATE_HALTED = 6;
      STATE_DONE = 7;
      STATE_FINISHED = 7;
    }
    """
)

ONEOF_JSON = _d(
    """\
    syntax = "proto3";
    package t.v1;

    message Register {
      string node_id = 1;
      oneof selector {
        string host = 2;
        string addr = 3;
      }
    }
    """
)

MAPS = _d(
    """\
    syntax = "proto3";
    package t.v1;

    message Node {
      map<string, string> labels = 1;
      map<string, int32> counts = 2;
      map<string, string> tags = 3;
      map<int32, Node> children = 4;
    }
    """
)

EDITIONS_MAP = _d(
    """\
    edition = "2023";
    package t.v1;

    message Node {
      map<string, string> labels = 1;
      int32 port = 2;
      string name = 3;
      Node parent = 4;
    }

    enum Kind {
      KIND_UNSPECIFIED = 0;
      KIND_A = 1;
    }
    """
)

PROTO2_REQUIRED = _d(
    """\
    syntax = "proto2";
    package t.v1;

    message Job {
      required string id = 1;
      optional int32 retries = 2 [default = 3];
      optional Kind kind = 3 [default = KIND_B];
      optional bytes blob = 4 [default = "a\\001b"];
      optional double ratio = 5 [default = inf];
      optional uint64 big = 6 [default = 0x10];
      optional bool on = 7 [default = true];
      optional group Extra = 8 {
        optional int32 n = 1;
      }
    }

    enum Kind {
      KIND_A = 0;
      KIND_B = 1;
      KIND_C = 2;
    }
    """
)

TYPES = _d(
    """\
    syntax = "proto3";
    package t.v1;

    message T {
      Kind kind = 1;
      int32 num = 2;
      Sub sub = 3;
      bytes raw = 4;
      fixed64 f64 = 5;
      int64 i64 = 6;
      float ratio = 7;
      uint32 u = 8;
      repeated int32 list = 9;
      string s = 10;
      repeated Sub subs = 11;
    }

    message Sub { string x = 1; }

    enum Kind {
      KIND_UNSPECIFIED = 0;
      KIND_A = 1;
    }
    """
)

SERVICE = _d(
    """\
    syntax = "proto3";
    package t.v1;

    message Req {}
    message Resp {}

    service Svc {
      rpc Get(Req) returns (Resp) {
        option idempotency_level = NO_SIDE_EFFECTS;
      }
      rpc Put(stream Req) returns (Resp);
    }
    """
)

NODE = _d(
    """\
    syntax = "proto3";
    package t.v1;

    import "t/v1/common.proto";

    message Node {
      string id = 1;
      Labels labels = 2;
    }
    """
)

COMMON = _d(
    """\
    syntax = "proto3";
    package t.v1;

    message Labels {
      map<string, string> values = 1;
    }

    message Spare {
      int32 n = 1;
    }
    """
)

NESTED = _d(
    """\
    syntax = "proto3";
    package t.v1;

    message Outer {
      message Inner {
        int32 a = 1;
        reserved 5;
        enum Mode {
          MODE_UNSPECIFIED = 0;
          MODE_X = 1;
          reserved 7;
        }
        Mode mode = 2;
      }
      Inner inner = 1;
    }
    """
)


def _one(name: str, old: str, new: str) -> Case:
    return (name, {"t.proto": old}, {"t.proto": new})


EXTRA: list[Case] = [
    # ---- extensions: the field rules apply, keyed by extended message and number
    _one(
        "extension type changed",
        EXTENSIONS,
        edit(EXTENSIONS, ("optional string tag = 50001", "optional int32 tag = 50001")),
    ),
    _one(
        "extension string to bytes",
        EXTENSIONS,
        edit(EXTENSIONS, ("optional string tag = 50001", "optional bytes tag = 50001")),
    ),
    _one(
        "extension cardinality changed",
        EXTENSIONS,
        edit(EXTENSIONS, ("repeated int32 nums = 50002", "optional int32 nums = 50002")),
    ),
    _one(
        "extension renamed",
        EXTENSIONS,
        edit(EXTENSIONS, ("optional string label = 50004", "optional string title = 50004")),
    ),
    _one(
        "extension deleted",
        EXTENSIONS,
        edit(EXTENSIONS, ("  optional int64 gone = 50003;\n", "")),
    ),
    _one(
        "extension added",
        EXTENSIONS,
        edit(
            EXTENSIONS,
            (
                "  optional int64 gone = 50003;\n",
                "  optional int64 gone = 50003;\n  optional int64 more = 50006;\n",
            ),
        ),
    ),
    _one(
        "extension default changed",
        EXTENSIONS,
        edit(EXTENSIONS, ("[default = 2]", "[default = 3]")),
    ),
    _one(
        "nested extension type changed",
        EXTENSIONS,
        edit(EXTENSIONS, ("optional bool sealed = 50100", "optional int32 sealed = 50100")),
    ),
    _one(
        "extension of a message type changed",
        EXTENSIONS,
        edit(EXTENSIONS, ("optional Holder inner = 101", "optional string inner = 101")),
    ),
    _one(
        "extension moved into a message",
        EXTENSIONS,
        edit(
            EXTENSIONS,
            ("  optional string note = 100;\n", ""),
            (
                "    optional bool sealed = 50100;\n  }\n",
                "    optional bool sealed = 50100;\n  }\n  extend Holder {\n"
                "    optional string note = 100;\n  }\n",
            ),
        ),
    ),
    _one(
        "proto3 extension to repeated",
        EXTENSIONS3,
        edit(EXTENSIONS3, ("  string owner = 50001;\n", "  repeated string owner = 50001;\n")),
    ),
    _one(
        "proto3 extension option value changed",
        EXTENSIONS3,
        edit(EXTENSIONS3, ('(owner) = "x"', '(owner) = "y"')),
    ),
    # ---- enum aliases under WIRE_JSON
    _one(
        "enum alias added",
        ALIASES,
        edit(ALIASES, ("  STATE_DRAINING = 5;\n", "  STATE_DRAINING = 5;\n  STATE_DRAIN = 5;\n")),
    ),
    _one(
        "enum alias removed",
        ALIASES,
        edit(ALIASES, ("  STATE_HALTED = 6;\n", "")),
    ),
    _one(
        "enum alias replaced",
        ALIASES,
        edit(ALIASES, ("STATE_HALTED = 6", "STATE_PARKED = 6")),
    ),
    _one(
        "enum aliases reordered",
        ALIASES,
        edit(
            ALIASES,
            (
                "  STATE_STOPPED = 6;\n  STATE_HALTED = 6;\n",
                "  STATE_HALTED = 6;\n  STATE_STOPPED = 6;\n",
            ),
        ),
    ),
    _one(
        "enum alias deleted with its number",
        ALIASES,
        edit(ALIASES, ("  STATE_STOPPED = 6;\n  STATE_HALTED = 6;\n", "  reserved 6;\n")),
    ),
    # ---- a valid schema the Python descriptor pool refuses
    _one(
        "oneof named like a field's JSON name",
        ONEOF_JSON,
        edit(ONEOF_JSON, ("oneof selector", "oneof nodeId")),
    ),
    _one(
        "oneof named like a field's JSON name, then a field moved out",
        edit(ONEOF_JSON, ("oneof selector", "oneof nodeId")),
        edit(
            ONEOF_JSON,
            ("oneof selector", "oneof nodeId"),
            ("    string addr = 3;\n  }\n", "  }\n  string addr = 3;\n"),
        ),
    ),
    _one(
        "oneof renamed",
        ONEOF_JSON,
        edit(ONEOF_JSON, ("oneof selector", "oneof target")),
    ),
    # ---- map fields
    _one(
        "map field renamed",
        MAPS,
        edit(MAPS, ("map<string, string> labels", "map<string, string> marks")),
    ),
    _one(
        "map to repeated entry message of the same name",
        MAPS,
        edit(
            MAPS,
            (
                "  map<string, string> tags = 3;\n",
                "  repeated TagsEntry tags = 3;\n"
                "  message TagsEntry {\n    string key = 1;\n    string value = 2;\n  }\n",
            ),
        ),
    ),
    _one(
        "map value int32 to int64",
        MAPS,
        edit(MAPS, ("map<string, int32> counts", "map<string, int64> counts")),
    ),
    _one(
        "map key int32 to string",
        MAPS,
        edit(MAPS, ("map<int32, Node> children", "map<string, Node> children")),
    ),
    _one(
        "map to repeated of another message",
        MAPS,
        edit(MAPS, ("map<int32, Node> children", "repeated Node children")),
    ),
    _one(
        "map deleted",
        MAPS,
        edit(MAPS, ("  map<string, int32> counts = 2;\n", "")),
    ),
    # ---- editions
    _one(
        "file JSON format changed with a map",
        EDITIONS_MAP,
        edit(
            EDITIONS_MAP,
            (
                "package t.v1;\n",
                "package t.v1;\n\noption features.json_format = LEGACY_BEST_EFFORT;\n",
            ),
        ),
    ),
    _one(
        "editions field made LEGACY_REQUIRED",
        EDITIONS_MAP,
        edit(
            EDITIONS_MAP,
            ("int32 port = 2;", "int32 port = 2 [features.field_presence = LEGACY_REQUIRED];"),
        ),
    ),
    _one(
        "editions field made implicit",
        EDITIONS_MAP,
        edit(
            EDITIONS_MAP,
            ("string name = 3;", "string name = 3 [features.field_presence = IMPLICIT];"),
        ),
    ),
    _one(
        "editions message made delimited",
        EDITIONS_MAP,
        edit(
            EDITIONS_MAP,
            ("Node parent = 4;", "Node parent = 4 [features.message_encoding = DELIMITED];"),
        ),
    ),
    _one(
        "editions enum made closed",
        EDITIONS_MAP,
        edit(
            EDITIONS_MAP, ("enum Kind {\n", "enum Kind {\n  option features.enum_type = CLOSED;\n")
        ),
    ),
    (
        "proto2 required to editions LEGACY_REQUIRED",
        {
            "t.proto": (
                'syntax = "proto2";\n'
                "package t.v1;\n"
                "\n"
                "message M {\n"
                "  required int32 a = 1;\n"
                "  optional int32 b = 2;\n"
                "}\n"
            )
        },
        {
            "t.proto": (
                'edition = "2023";\n'
                "package t.v1;\n"
                "\n"
                "message M {\n"
                "  int32 a = 1 [features.field_presence = LEGACY_REQUIRED];\n"
                "  int32 b = 2;\n"
                "}\n"
            )
        },
    ),
    (
        "proto3 to editions, same meaning",
        {
            "t.proto": (
                'syntax = "proto3";\n'
                "package t.v1;\n"
                "\n"
                "message M {\n"
                "  int32 a = 1;\n"
                "  optional int32 b = 2;\n"
                "  repeated int32 c = 3;\n"
                "}\n"
            )
        },
        {
            "t.proto": (
                'edition = "2023";\n'
                "package t.v1;\n"
                "\n"
                "option features.field_presence = IMPLICIT;\n"
                "\n"
                "message M {\n"
                "  int32 a = 1;\n"
                "  int32 b = 2 [features.field_presence = EXPLICIT];\n"
                "  repeated int32 c = 3;\n"
                "}\n"
            )
        },
    ),
    (
        "proto3 to proto2",
        {
            "t.proto": (
                'syntax = "proto3";\n'
                "package t.v1;\n"
                "\n"
                "message M {\n"
                "  optional int32 a = 1;\n"
                "}\n"
                "\n"
                "enum E {\n"
                "  E_UNSPECIFIED = 0;\n"
                "}\n"
            )
        },
        {
            "t.proto": (
                'syntax = "proto2";\n'
                "package t.v1;\n"
                "\n"
                "message M {\n"
                "  optional int32 a = 1;\n"
                "}\n"
                "\n"
                "enum E {\n"
                "  E_UNSPECIFIED = 0;\n"
                "}\n"
            )
        },
    ),
    # ---- proto2 defaults, groups and required fields
    _one(
        "proto2 enum default changed",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, ("[default = KIND_B]", "[default = KIND_C]")),
    ),
    _one(
        "proto2 enum default dropped",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, (" [default = KIND_B]", "")),
    ),
    _one(
        "proto2 bytes default changed",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, ('"a\\001b"', '"a\\002b"')),
    ),
    _one(
        "proto2 double default changed",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, ("[default = inf]", "[default = -inf]")),
    ),
    _one(
        "proto2 hex default same value",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, ("[default = 0x10]", "[default = 16]")),
    ),
    _one(
        "proto2 bool default dropped",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, (" [default = true]", "")),
    ),
    _one(
        "proto2 int default added",
        PROTO2_REQUIRED,
        edit(
            PROTO2_REQUIRED,
            (
                "optional int32 retries = 2 [default = 3]",
                "optional int32 retries = 2 [default = 3]",
            ),
            ("optional int32 n = 1;", "optional int32 n = 1 [default = 4];"),
        ),
    ),
    _one(
        "proto2 group to message",
        PROTO2_REQUIRED,
        edit(
            PROTO2_REQUIRED,
            (
                "  optional group Extra = 8 {\n    optional int32 n = 1;\n  }\n",
                "  optional Extra extra = 8;\n  message Extra {\n    optional int32 n = 1;\n  }\n",
            ),
        ),
    ),
    _one(
        "proto2 optional made required",
        PROTO2_REQUIRED,
        edit(PROTO2_REQUIRED, ("optional int32 retries", "required int32 retries")),
    ),
    _one(
        "proto2 optional made repeated",
        PROTO2_REQUIRED,
        edit(
            PROTO2_REQUIRED,
            ("optional int32 retries = 2 [default = 3]", "repeated int32 retries = 2"),
        ),
    ),
    # ---- type changes the wire may or may not allow
    _one("enum to int32", TYPES, edit(TYPES, ("Kind kind = 1", "int32 kind = 1"))),
    _one("int32 to enum", TYPES, edit(TYPES, ("int32 num = 2", "Kind num = 2"))),
    _one("message to bytes", TYPES, edit(TYPES, ("Sub sub = 3", "bytes sub = 3"))),
    _one("bytes to message", TYPES, edit(TYPES, ("bytes raw = 4", "Sub raw = 4"))),
    _one("fixed64 to int64", TYPES, edit(TYPES, ("fixed64 f64 = 5", "int64 f64 = 5"))),
    _one("int64 to uint64", TYPES, edit(TYPES, ("int64 i64 = 6", "uint64 i64 = 6"))),
    _one("int64 to sint64", TYPES, edit(TYPES, ("int64 i64 = 6", "sint64 i64 = 6"))),
    _one("float to double", TYPES, edit(TYPES, ("float ratio = 7", "double ratio = 7"))),
    _one("uint32 to bool", TYPES, edit(TYPES, ("uint32 u = 8", "bool u = 8"))),
    _one(
        "repeated to optional",
        TYPES,
        edit(TYPES, ("repeated int32 list = 9", "optional int32 list = 9")),
    ),
    _one(
        "string to repeated string", TYPES, edit(TYPES, ("string s = 10", "repeated string s = 10"))
    ),
    _one("string made optional", TYPES, edit(TYPES, ("string s = 10", "optional string s = 10"))),
    _one(
        "message moved into a new oneof",
        TYPES,
        edit(TYPES, ("  Sub sub = 3;\n", "  oneof choice {\n    Sub sub = 3;\n  }\n")),
    ),
    _one(
        "repeated message to map",
        TYPES,
        edit(TYPES, ("repeated Sub subs = 11", "map<string, Sub> subs = 11")),
    ),
    # ---- services
    _one(
        "idempotency level dropped",
        SERVICE,
        edit(SERVICE, (" {\n    option idempotency_level = NO_SIDE_EFFECTS;\n  }", ";")),
    ),
    _one("idempotency level changed", SERVICE, edit(SERVICE, ("NO_SIDE_EFFECTS", "IDEMPOTENT"))),
    _one("rpc deleted", SERVICE, edit(SERVICE, ("  rpc Put(stream Req) returns (Resp);\n", ""))),
    _one(
        "rpc added",
        SERVICE,
        edit(
            SERVICE,
            (
                "  rpc Put(stream Req) returns (Resp);\n",
                "  rpc Put(stream Req) returns (Resp);\n  rpc Del(Req) returns (Resp);\n",
            ),
        ),
    ),
    _one("service renamed", SERVICE, edit(SERVICE, ("service Svc", "service Service"))),
    _one("client streaming added", SERVICE, edit(SERVICE, ("rpc Get(Req)", "rpc Get(stream Req)"))),
    _one("request type changed", SERVICE, edit(SERVICE, ("rpc Get(Req)", "rpc Get(Resp)"))),
    _one(
        "response type changed",
        SERVICE,
        edit(SERVICE, ("rpc Put(stream Req) returns (Resp)", "rpc Put(stream Req) returns (Req)")),
    ),
    _one(
        "server streaming added to a client stream",
        SERVICE,
        edit(
            SERVICE,
            ("rpc Put(stream Req) returns (Resp)", "rpc Put(stream Req) returns (stream Resp)"),
        ),
    ),
    # ---- nested elements
    _one("nested field deleted", NESTED, edit(NESTED, ("    int32 a = 1;\n", ""))),
    _one("nested reservation dropped", NESTED, edit(NESTED, ("    reserved 5;\n", ""))),
    _one("nested enum reservation dropped", NESTED, edit(NESTED, ("      reserved 7;\n", ""))),
    _one("nested enum value renamed", NESTED, edit(NESTED, ("MODE_X = 1", "MODE_Y = 1"))),
    _one(
        "nested message deleted",
        NESTED,
        edit(
            NESTED,
            ("message Inner {", "message Gone {"),
            ("    Mode mode = 2;\n", ""),
            ("  Inner inner = 1;\n", ""),
        ),
    ),
    _one(
        "nested enum value deleted, only its name reserved",
        NESTED,
        edit(NESTED, ("      MODE_X = 1;\n", '      reserved "MODE_X";\n')),
    ),
    _one(
        "nested enum value deleted, only its number reserved",
        NESTED,
        edit(NESTED, ("      MODE_X = 1;\n      reserved 7;\n", "      reserved 1, 7;\n")),
    ),
    # ---- several files
    (
        "message moved to another file",
        {"t/v1/node.proto": NODE, "t/v1/common.proto": COMMON},
        {
            "t/v1/node.proto": edit(
                NODE,
                (
                    'import "t/v1/common.proto";\n',
                    'import "t/v1/common.proto";\n\nmessage Spare {\n  int32 n = 1;\n}\n',
                ),
            ),
            "t/v1/common.proto": edit(COMMON, ("\nmessage Spare {\n  int32 n = 1;\n}\n", "")),
        },
    ),
    (
        "file deleted",
        {
            "t/v1/node.proto": NODE,
            "t/v1/common.proto": COMMON,
            "t/v1/extra.proto": (
                'syntax = "proto3";\npackage t.v1;\n\nmessage Extra {\n  int32 n = 1;\n}\n'
            ),
        },
        {"t/v1/node.proto": NODE, "t/v1/common.proto": COMMON},
    ),
    (
        "file package changed with its import",
        {"t/v1/node.proto": NODE, "t/v1/common.proto": COMMON},
        {
            "t/v1/node.proto": edit(NODE, ("  Labels labels = 2;", "  t.v2.Labels labels = 2;")),
            "t/v1/common.proto": edit(COMMON, ("package t.v1;", "package t.v2;")),
        },
    ),
    (
        "map field in an imported file changed",
        {"t/v1/node.proto": NODE, "t/v1/common.proto": COMMON},
        {
            "t/v1/node.proto": NODE,
            "t/v1/common.proto": edit(
                COMMON, ("map<string, string> values", "map<string, bytes> values")
            ),
        },
    ),
    # ---- safe edits
    _one(
        "comments and blank lines",
        TYPES,
        edit(TYPES, ("message T {\n", "// A T.\nmessage T {\n\n  // the kind\n")),
    ),
    _one(
        "fields reordered",
        TYPES,
        edit(
            TYPES, ("  Kind kind = 1;\n  int32 num = 2;\n", "  int32 num = 2;\n  Kind kind = 1;\n")
        ),
    ),
    _one(
        "json_name spelled as the default",
        TYPES,
        edit(TYPES, ("int32 num = 2", 'int32 num = 2 [json_name = "num"]')),
    ),
    _one(
        "reservation added",
        TYPES,
        edit(
            TYPES,
            (
                "message Sub { string x = 1; }",
                'message Sub {\n  string x = 1;\n  reserved 2, 9 to 11;\n  reserved "y";\n}',
            ),
        ),
    ),
    _one(
        "message added",
        TYPES,
        edit(
            TYPES,
            (
                "message Sub { string x = 1; }",
                "message Sub { string x = 1; }\nmessage Added { int32 n = 1; }",
            ),
        ),
    ),
    _one(
        "enum added",
        TYPES,
        edit(
            TYPES,
            (
                "message Sub { string x = 1; }",
                "message Sub { string x = 1; }\nenum Color { COLOR_UNSPECIFIED = 0; }",
            ),
        ),
    ),
    _one(
        "field option added",
        TYPES,
        edit(TYPES, ("int32 num = 2", "int32 num = 2 [deprecated = true]")),
    ),
    _one("unchanged", TYPES, TYPES),
]


# ---- edits of the real schema, frozen here as it was when the corpus was made
# (`tests/schemas/buf-corpus`), and the older peers' schema (`tests/schemas/older`,
# before MIG support and compute reporting, frozen for the cross-version tests)

_HERE = Path(__file__).resolve().parent


def _schema(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.proto"))}


REAL = _schema(_HERE.parent / "schemas" / "buf-corpus")
OLDER = _schema(_HERE.parent / "schemas" / "older")
NODE_PROTO, SHARD_PROTO, SERVICE_PROTO = (
    "llmgw/v1/node.proto",
    "llmgw/v1/shard.proto",
    "llmgw/v1/agent_service.proto",
)


def _real(name: str, **edits: tuple[tuple[str, str], ...]) -> Case:
    files = {"node": NODE_PROTO, "shard": SHARD_PROTO, "service": SERVICE_PROTO}
    current = dict(REAL)
    for key, changes in edits.items():
        current[files[key]] = edit(current[files[key]], *changes)
    return (f"real schema: {name}", REAL, current)


REAL_CASES: list[Case] = [
    _real("GPU.mig deleted", node=(("  MIGDevice mig = 22;\n", ""),)),
    _real(
        "GPU.mig deleted, number and name reserved",
        node=(("  MIGDevice mig = 22;\n", '  reserved 22;\n  reserved "mig";\n'),),
    ),
    _real("a shard state renamed", shard=(("STATE_DRAINING = 5", "STATE_DRAIN = 5"),)),
    _real(
        "a shard state alias added",
        shard=(
            ("  enum State {\n", "  enum State {\n    option allow_alias = true;\n"),
            ("    STATE_DRAINING = 5;\n", "    STATE_DRAINING = 5;\n    STATE_DRAIN = 5;\n"),
        ),
    ),
    _real("a shard state deleted", shard=(("    STATE_STOPPED = 6;\n", ""),)),
    _real(
        "a shard state added",
        shard=(("    STATE_FAILED = 7;\n", "    STATE_FAILED = 7;\n    STATE_HIBERNATING = 8;\n"),),
    ),
    _real(
        "Compute.layers_total to int64",
        shard=(("int32 layers_total = 4", "int64 layers_total = 4"),),
    ),
    _real(
        "Register.labels renamed",
        node=(("map<string, string> labels = 4", "map<string, string> tags = 4"),),
    ),
    _real("ShardStatus.detail renamed", shard=(("string detail = 4", "string reason = 4"),)),
    _real(
        "RunningShard.state to int32", node=(("ShardStatus.State state = 7", "int32 state = 7"),)
    ),
    _real(
        "a heartbeat moved out of the envelope's oneof",
        service=(("    Heartbeat heartbeat = 3;\n  }\n", "  }\n  Heartbeat heartbeat = 3;\n"),),
    ),
    _real(
        "an envelope member added",
        service=(("    Ack ack = 3;\n", "    Ack ack = 3;\n    Heartbeat heartbeat = 4;\n"),),
    ),
    _real(
        "Connect no longer streams its responses",
        service=(("returns (stream ControlMessage)", "returns (ControlMessage)"),),
    ),
    _real(
        "the package renamed",
        node=(("package llmgw.v1;", "package llmgw.v2;"),),
        shard=(("package llmgw.v1;", "package llmgw.v2;"),),
        service=(("package llmgw.v1;", "package llmgw.v2;"),),
    ),
    _real(
        "RunningShard.compute made repeated",
        node=(("  Compute compute = 14;", "  repeated Compute compute = 14;"),),
    ),
    ("real schema: against the older peers' schema", OLDER, REAL),
    ("real schema: the older peers' schema against it", REAL, OLDER),
]


#: Every case of the differential test, by name.
CORPUS: list[Case] = (
    [_one(name, old, new) for name, old, new, *_ in CASES] + EXTRA + REAL_CASES + BUF_PAIRS
)
