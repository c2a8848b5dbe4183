# The schemas are data: long lines and joined strings keep each case compact.
# ruff: noqa: E501, ISC003
"""Cases after buf's own breaking test pairs (`bufcheck/testdata/breaking`), written anew.

Each case takes the theme of one of buf's previous/current pairs that its
`WIRE` or `WIRE_JSON` rules judge (nested messages, several files, proto2
and proto3 and editions, extensions, well-known imports) and exercises it
with small schemas of its own. `make interop-buf` runs buf on them beside the
checker, as on the rest of the corpus.
"""

from __future__ import annotations

import textwrap

__all__ = ["BUF_PAIRS"]

Case = tuple[str, dict[str, str], dict[str, str]]


def _d(text: str) -> str:
    return textwrap.dedent(text)


def _pair(name: str, old: dict[str, str], new: dict[str, str]) -> Case:
    return (
        f"buf pair: {name}",
        {k: _d(v) for k, v in old.items()},
        {k: _d(v) for k, v in new.items()},
    )


P2 = 'syntax = "proto2";\npackage a;\n'
P3 = 'syntax = "proto3";\npackage a;\n'
ED = 'edition = "2023";\npackage a;\n'

# A schema's own copy of a file grpcio-tools ships too (buf reads it; protoc
# must not be fed it twice).
CPP_FEATURES = _d(
    """\
                edition = "2023";
                package pb;
                import "google/protobuf/descriptor.proto";
                extend google.protobuf.FeatureSet { CppFeatures cpp = 1000; }
                message CppFeatures {
                  enum StringType { STRING_TYPE_UNKNOWN = 0; VIEW = 1; CORD = 2; STRING = 3; }
                  StringType string_type = 3;
                }
                """
)

BUF_PAIRS: list[Case] = [
    _pair(
        "required fields added and deleted in nested messages",
        {
            "1.proto": P2
            + """
            message One { required string one = 1; }
            message Outer {
              message Mid {
                message Deep { required string one = 1; }
                message Gone { required string one = 1; }
              }
              message Empty {}
              required string one = 1;
            }
            """,
            "2.proto": P2 + "message Other { required string one = 1; }\n",
        },
        {
            "1.proto": P2
            + """
            message One { required string two = 2; }
            message Added { required string two = 2; }
            message Outer {
              message Mid {
                message Deep { required string two = 2; }
                message Gone {}
              }
              message Empty { required string two = 2; }
              required string two = 2;
            }
            """,
            "2.proto": P2 + "message Other { required string two = 2; }\n",
        },
    ),
    _pair(
        "required fields in editions",
        {
            "e.proto": ED
            + """
            message M {
              int32 a = 1 [features.field_presence = LEGACY_REQUIRED];
              int32 b = 2;
              int32 c = 3 [features.field_presence = LEGACY_REQUIRED];
            }
            """,
        },
        {
            "e.proto": ED
            + """
            message M {
              int32 a = 1 [features.field_presence = LEGACY_REQUIRED];
              int32 b = 2 [features.field_presence = LEGACY_REQUIRED];
              int32 c = 3;
            }
            """,
        },
    ),
    _pair(
        "defaults of every kind",
        {
            "d.proto": P2
            + """
            enum E { ZERO = 0; ABC = 1; XYZ = 3; }
            message D {
              optional string s1 = 1 [default = "abc"];
              optional string s2 = 2 [default = "abc"];
              optional string s3 = 3 [default = "abc"];
              optional bytes b1 = 4 [default = "xyz"];
              optional bytes b2 = 5 [default = "xyz"];
              optional bytes b3 = 6 [default = "xyz"];
              optional int32 i1 = 7 [default = 123];
              optional int32 i2 = 8 [default = 123];
              optional int32 i3 = 9 [default = 123];
              optional uint64 u1 = 10 [default = 123];
              optional sint64 s64 = 11 [default = -456];
              optional fixed32 f32 = 12 [default = 123];
              optional float fl1 = 13 [default = 0.1020304];
              optional float fl2 = 14 [default = 123];
              optional double d1 = 15 [default = 123];
              optional bool t1 = 16 [default = true];
              optional bool t2 = 17 [default = true];
              optional E e1 = 18 [default = ABC];
              optional E e2 = 19 [default = ABC];
              optional E e3 = 20 [default = ABC];
              optional int32 n1 = 21 [default = 5];
              optional string z1 = 22 [default = "0"];
              repeated int32 r1 = 23;
              optional D m1 = 24;
              optional double nan1 = 25 [default = nan];
              extensions 100 to 200;
            }
            extend D {
              optional uint32 x1 = 100 [default = 3456];
              optional bytes x2 = 101 [default = "a\\x01b"];
              optional float x3 = 102 [default = 1.5];
            }
            """,
        },
        {
            "d.proto": P2
            + """
            enum E { ZERO = 0; ABC = 1; XYZ = 3; }
            message D {
              optional string s1 = 1 [default = "abc"];
              optional string s2 = 2;
              optional bytes s3 = 3 [default = "abc"];
              optional bytes b1 = 4 [default = "xyz"];
              optional bytes b2 = 5;
              optional string b3 = 6 [default = "abc"];
              optional int32 i1 = 7 [default = 123];
              optional int32 i2 = 8;
              optional double i3 = 9 [default = 123];
              optional uint64 u1 = 10 [default = 124];
              optional sint64 s64 = 11 [default = -456];
              optional fixed32 f32 = 12 [default = 7];
              optional double fl1 = 13 [default = 0.1020304];
              optional float fl2 = 14 [default = 123.0];
              optional float d1 = 15 [default = 123];
              optional int32 t1 = 16 [default = 1];
              optional bool t2 = 17 [default = false];
              optional E e1 = 18 [default = ABC];
              optional E e2 = 19;
              optional uint32 e3 = 20 [default = 1];
              optional string n1 = 21 [default = "5"];
              optional int64 z1 = 22;
              repeated int32 r1 = 23;
              optional D m1 = 24;
              optional double nan1 = 25 [default = nan];
              extensions 100 to 200;
            }
            extend D {
              optional uint32 x1 = 100 [default = 9876];
              optional bytes x2 = 101 [default = "a\\001b"];
              optional double x3 = 102 [default = 1.5];
            }
            """,
        },
    ),
    _pair(
        "a well-known features file of its own",
        {
            "google/protobuf/cpp_features.proto": CPP_FEATURES,
            "s.proto": ED
            + """
            import "google/protobuf/cpp_features.proto";
            message S {
              string a = 1 [features.(pb.cpp).string_type = CORD];
              bytes b = 2;
              int32 gone = 3;
            }
            """,
        },
        {
            "google/protobuf/cpp_features.proto": CPP_FEATURES,
            "s.proto": ED
            + """
            import "google/protobuf/cpp_features.proto";
            message S {
              string a = 1 [features.(pb.cpp).string_type = STRING];
              bytes b = 2 [features.(pb.cpp).string_type = CORD];
            }
            """,
        },
    ),
    _pair(
        "cardinality across syntaxes and nesting",
        {
            "1.proto": P3
            + """
            message One {
              int32 a = 1;
              One b = 2;
              repeated int32 c = 3;
              repeated One d = 4;
              map<int32, int32> e = 5;
              map<int32, One> f = 6;
              optional int32 g = 7;
              oneof o { int32 h = 8; One i = 9; }
              message Inner { int32 a = 1; repeated int32 b = 2; optional int32 c = 3; }
            }
            """,
            "2.proto": P2
            + """
            message Two {
              optional int32 a = 1;
              optional Two b = 2;
              repeated int32 c = 3;
              required int32 d = 4;
              optional group G = 5 { optional int32 x = 1; }
            }
            """,
            "3.proto": ED
            + """
            message Three {
              int32 a = 1;
              int32 b = 2 [features.field_presence = IMPLICIT];
              repeated int32 c = 3;
              Three d = 4 [features.message_encoding = DELIMITED];
            }
            """,
        },
        {
            "1.proto": P3
            + """
            message One {
              repeated int32 a = 1;
              repeated One b = 2;
              int32 c = 3;
              map<int32, One> d = 4;
              repeated int32 e = 5;
              One f = 6;
              int32 g = 7;
              int32 h = 8;
              One i = 9;
              message Inner { optional int32 a = 1; map<int32, int32> b = 2; int32 c = 3; }
            }
            """,
            "2.proto": P2
            + """
            message Two {
              repeated int32 a = 1;
              required Two b = 2;
              optional int32 c = 3;
              optional int32 d = 4;
              repeated group G = 5 { optional int32 x = 1; }
            }
            """,
            "3.proto": ED
            + """
            message Three {
              int32 a = 1 [features.field_presence = IMPLICIT];
              int32 b = 2 [features.field_presence = LEGACY_REQUIRED];
              int32 c = 3;
              repeated Three d = 4;
            }
            """,
        },
    ),
    _pair(
        "wire types of every scalar",
        {
            "t.proto": P3
            + """
            enum E { E_ZERO = 0; }
            message Sub {}
            message T {
              int32 a = 1; int64 b = 2; uint32 c = 3; uint64 d = 4; bool e = 5;
              sint32 f = 6; sint64 g = 7; fixed32 h = 8; sfixed32 i = 9; fixed64 j = 10;
              sfixed64 k = 11; float l = 12; double m = 13; string n = 14; bytes o = 15;
              E p = 16; Sub q = 17; int32 r = 18; string s = 19; int64 t = 20;
            }
            """,
        },
        {
            "t.proto": P3
            + """
            enum E { E_ZERO = 0; }
            message Sub {}
            message T {
              uint64 a = 1; bool b = 2; int64 c = 3; int32 d = 4; uint32 e = 5;
              sint64 f = 6; int64 g = 7; sfixed32 h = 8; fixed64 i = 9; sfixed64 j = 10;
              double k = 11; double l = 12; float m = 13; bytes n = 14; string o = 15;
              int32 p = 16; bytes q = 17; E r = 18; Sub s = 19; string t = 20;
            }
            """,
        },
    ),
    _pair(
        "int to enum, enum to message, message to int, message to message",
        {
            "x.proto": P3
            + """
            enum E { E_ZERO = 0; }
            enum F { F_ZERO = 0; }
            message A {}
            message B {}
            message X { int32 a = 1; E b = 2; A c = 3; A d = 4; E e = 5; }
            """,
        },
        {
            "x.proto": P3
            + """
            enum E { E_ZERO = 0; }
            enum F { F_ZERO = 0; }
            message A {}
            message B {}
            message X { E a = 1; A b = 2; int32 c = 3; B d = 4; F e = 5; }
            """,
        },
    ),
    _pair(
        "names and JSON names in nested messages and files",
        {
            "1.proto": P3
            + """
            message N {
              int32 one = 1;
              int32 two_words = 2;
              int32 three = 3 [json_name = "tres"];
              int32 four = 4 [json_name = "four"];
              message In { int32 a_b = 1; int32 c = 2 [json_name = "C"]; }
            }
            """,
            "2.proto": P2 + "message M2 { optional int32 x = 1; optional int32 y_z = 2; }\n",
        },
        {
            "1.proto": P3
            + """
            message N {
              int32 uno = 1;
              int32 two_Words = 2;
              int32 three = 3;
              int32 four = 4 [json_name = "cuatro"];
              message In { int32 aB = 1; int32 c = 2 [json_name = "c"]; }
            }
            """,
            "2.proto": P2
            + 'message M2 { optional int32 X = 1; optional int32 y_z = 2 [json_name = "yZ"]; }\n',
        },
    ),
    _pair(
        "oneofs entered, left and swapped",
        {
            "o.proto": P3
            + """
            message O {
              oneof a { int32 one = 1; int32 two = 2; }
              oneof b { int32 three = 3; }
              int32 four = 4;
              optional int32 five = 5;
              int32 six = 6;
            }
            """,
        },
        {
            "o.proto": P3
            + """
            message O {
              oneof a { int32 one = 1; }
              oneof b { int32 two = 2; int32 four = 4; }
              int32 three = 3;
              oneof c { int32 five = 5; }
              optional int32 six = 6;
            }
            """,
        },
    ),
    _pair(
        "fields deleted with and without reservations, in several files",
        {
            "1.proto": P3
            + """
            message F {
              int32 a = 1; int32 b = 2; int32 c = 3; int32 d = 4; int32 e = 5;
              message Nested { int32 x = 1; int32 y = 2; }
            }
            """,
            "2.proto": P2
            + "message G { optional int32 a = 1; optional int32 b = 2; extensions 10 to 20; }\n",
            "3.proto": P3 + "message H { int32 gone = 1; }\n",
        },
        {
            "1.proto": P3
            + """
            message F {
              int32 a = 1;
              reserved 2, 10 to 12;
              reserved "c";
              reserved 4;
              reserved "d";
              message Nested { reserved "x"; }
            }
            """,
            "2.proto": P2 + "message G { optional int32 a = 1; extensions 2 to 20; }\n",
            "3.proto": P3 + "message H {}\n",
        },
    ),
    _pair(
        "enum values deleted with and without reservations",
        {
            "e.proto": P3
            + """
            enum E { E_ZERO = 0; E_ONE = 1; E_TWO = 2; E_THREE = 3; E_FOUR = 4; E_FIVE = 5; }
            message M {
              enum Inner { INNER_ZERO = 0; INNER_ONE = 1; INNER_TWO = 2; }
            }
            """,
        },
        {
            "e.proto": P3
            + """
            enum E {
              E_ZERO = 0;
              reserved 1, 3 to 4;
              reserved "E_TWO", "E_THREE";
            }
            message M {
              enum Inner { INNER_ZERO = 0; reserved "INNER_ONE"; reserved 2; }
            }
            """,
        },
    ),
    _pair(
        "enum values renamed, aliased and renumbered",
        {
            "e.proto": P3
            + """
            enum E { option allow_alias = true; E_ZERO = 0; E_ONE = 1; E_UNO = 1; E_TWO = 2; E_THREE = 3; }
            message M { enum Inner { IN_ZERO = 0; IN_ONE = 1; } }
            """,
        },
        {
            "e.proto": P3
            + """
            enum E { option allow_alias = true; E_ZERO = 0; E_ONE = 1; E_TWO = 1; E_DOS = 2; E_THREE = 4; }
            message M { enum Inner { IN_NONE = 0; IN_ONE = 1; IN_UNO = 1; option allow_alias = true; } }
            """,
        },
    ),
    _pair(
        "reserved ranges and names of messages shrunk and grown",
        {
            "r.proto": P3
            + """
            message R {
              reserved 1, 2, 5 to 10, 20 to max;
              reserved "a", "b";
              message In { reserved 3 to 6; reserved "x"; }
            }
            enum E { E_ZERO = 0; reserved 1 to 3, 10 to max; reserved "E_A", "E_B"; }
            """,
        },
        {
            "r.proto": P3
            + """
            message R {
              reserved 1, 6 to 8, 30 to max;
              reserved "b", "c";
              message In { reserved 3 to 6, 9; reserved "x", "y"; }
            }
            enum E { E_ZERO = 0; reserved 1, 3, 100 to max; reserved "E_B"; }
            """,
        },
    ),
    _pair(
        "JSON format of messages and enums in editions",
        {
            "j.proto": 'edition = "2023";\npackage a;\noption features.json_format = ALLOW;\n'
            + """
            message A { int32 x = 1; }
            message B { option features.json_format = LEGACY_BEST_EFFORT; int32 x = 1; }
            message C { int32 x = 1; message D { int32 y = 1; } }
            enum E { E_ZERO = 0; }
            enum F { option features.json_format = LEGACY_BEST_EFFORT; F_ZERO = 0; }
            """,
            "k.proto": ED + "message K { map<string, int32> m = 1; }\n",
        },
        {
            "j.proto": 'edition = "2023";\npackage a;\noption features.json_format = ALLOW;\n'
            + """
            message A { option features.json_format = LEGACY_BEST_EFFORT; int32 x = 1; }
            message B { int32 x = 1; }
            message C { int32 x = 1; message D { option features.json_format = LEGACY_BEST_EFFORT; int32 y = 1; } }
            enum E { option features.json_format = LEGACY_BEST_EFFORT; E_ZERO = 0; }
            enum F { F_ZERO = 0; }
            """,
            "k.proto": 'edition = "2023";\npackage a;\noption features.json_format = LEGACY_BEST_EFFORT;\n'
            + "message K { map<string, int32> m = 1; }\n",
        },
    ),
    _pair(
        "packages of files changed",
        {
            "a/1.proto": 'syntax = "proto3";\npackage a;\nmessage One {}\n',
            "a/2.proto": 'syntax = "proto3";\npackage a;\nmessage Two {}\n',
            "b/3.proto": 'syntax = "proto3";\nmessage Three {}\n',
            "c/4.proto": 'syntax = "proto3";\npackage c;\nmessage Four {}\n',
        },
        {
            "a/1.proto": 'syntax = "proto3";\npackage a;\nmessage One {}\n',
            "a/2.proto": 'syntax = "proto3";\npackage b;\nmessage Two {}\n',
            "b/3.proto": 'syntax = "proto3";\npackage b;\nmessage Three {}\n',
            "c/4.proto": 'syntax = "proto3";\nmessage Four {}\n',
        },
    ),
    _pair(
        "RPC types, streaming and idempotency",
        {
            "s.proto": P3
            + """
            message Req {}
            message Res {}
            message Other {}
            service S {
              rpc A(Req) returns (Res);
              rpc B(Req) returns (Res);
              rpc C(Req) returns (Res);
              rpc D(stream Req) returns (stream Res);
              rpc E(Req) returns (Res) { option idempotency_level = NO_SIDE_EFFECTS; }
              rpc F(Req) returns (Res) { option idempotency_level = IDEMPOTENT; }
              rpc G(Req) returns (Res);
            }
            service T { rpc A(Req) returns (Res); }
            """,
        },
        {
            "s.proto": P3
            + """
            message Req {}
            message Res {}
            message Other {}
            service S {
              rpc A(Other) returns (Res);
              rpc B(Req) returns (Other);
              rpc C(stream Req) returns (Res);
              rpc D(Req) returns (Res);
              rpc E(Req) returns (Res) { option idempotency_level = IDEMPOTENT; }
              rpc F(Req) returns (Res) { option idempotency_level = IDEMPOTENT; }
              rpc G(Req) returns (Res) { option idempotency_level = NO_SIDE_EFFECTS; }
            }
            service T { rpc A(Req) returns (stream Res); }
            """,
        },
    ),
    _pair(
        "messages, enums, services and files deleted",
        {
            "1.proto": P3
            + """
            message Kept { int32 a = 1; }
            message Gone { int32 a = 1; }
            enum GoneEnum { GONE_ENUM_ZERO = 0; }
            service GoneService { rpc A(Kept) returns (Kept); }
            message Outer { message Inner { int32 a = 1; } }
            """,
            "2.proto": P3 + "message Two { int32 a = 1; }\n",
        },
        {
            "1.proto": P3
            + """
            message Kept { int32 a = 1; }
            message Outer {}
            """,
        },
    ),
    _pair(
        "extensions of every scope changed",
        {
            "x.proto": P2
            + """
            message Base { extensions 100 to 200; }
            extend Base {
              optional int32 a = 100;
              optional string b = 101;
              repeated int32 c = 102;
              optional Base d = 103;
            }
            message Scope {
              extend Base { optional int64 e = 110; optional int32 f = 111; }
            }
            """,
        },
        {
            "x.proto": P2
            + """
            message Base { extensions 100 to 200; }
            extend Base {
              optional sint32 a = 100;
              optional string bb = 101;
              optional int32 c = 102;
              optional Scope d = 103;
            }
            message Scope {
              extend Base { optional uint64 e = 110; }
            }
            """,
        },
    ),
    _pair(
        "C++ and JavaScript representations changed",
        {
            "c.proto": P2
            + """
            message C {
              optional string a = 1 [ctype = CORD];
              optional string b = 2;
              optional int64 c = 3 [jstype = JS_STRING];
              optional uint64 d = 4;
              repeated bytes e = 5 [ctype = STRING_PIECE];
            }
            """,
        },
        {
            "c.proto": P2
            + """
            message C {
              optional string a = 1;
              optional string b = 2 [ctype = STRING_PIECE];
              optional int64 c = 3 [jstype = JS_NUMBER];
              optional uint64 d = 4 [jstype = JS_STRING];
              repeated bytes e = 5;
            }
            """,
        },
    ),
    _pair(
        "UTF-8 validation changed",
        {
            "u.proto": ED
            + """
            message U {
              string a = 1;
              string b = 2 [features.utf8_validation = NONE];
              repeated string c = 3;
              map<string, string> d = 4;
            }
            """,
        },
        {
            "u.proto": ED
            + """
            message U {
              string a = 1 [features.utf8_validation = NONE];
              string b = 2;
              repeated string c = 3 [features.utf8_validation = NONE];
              map<string, string> d = 4 [features.utf8_validation = NONE];
            }
            """,
        },
    ),
    _pair(
        "enums made open and closed",
        {
            "e.proto": ED
            + """
            enum Open { OPEN_ZERO = 0; OPEN_ONE = 1; }
            enum Closed { option features.enum_type = CLOSED; CLOSED_ZERO = 0; CLOSED_ONE = 1; }
            message M { Open o = 1; Closed c = 2; }
            """,
        },
        {
            "e.proto": ED
            + """
            enum Open { option features.enum_type = CLOSED; OPEN_ZERO = 0; OPEN_ONE = 1; }
            enum Closed { CLOSED_ZERO = 0; CLOSED_ONE = 1; }
            message M { Open o = 1; Closed c = 2; }
            """,
        },
    ),
    _pair(
        "proto2 file moved to proto3 and editions",
        {
            "a.proto": P2
            + """
            enum E { E_ZERO = 0; E_ONE = 1; }
            message A { optional int32 x = 1; repeated int32 y = 2; optional E e = 3; optional string s = 4; }
            """,
            "b.proto": P2
            + "message B { optional int32 x = 1; repeated int32 y = 2 [packed = true]; }\n",
        },
        {
            "a.proto": P3
            + """
            enum E { E_ZERO = 0; E_ONE = 1; }
            message A { optional int32 x = 1; repeated int32 y = 2; optional E e = 3; string s = 4; }
            """,
            "b.proto": ED + "message B { int32 x = 1; repeated int32 y = 2; }\n",
        },
    ),
    _pair(
        "file options changed",
        {
            "f.proto": P3
            + """
            option java_package = "com.a";
            option java_multiple_files = true;
            option go_package = "example.com/a";
            option optimize_for = SPEED;
            option cc_enable_arenas = true;
            option csharp_namespace = "A";
            message F { int32 x = 1; }
            """,
        },
        {
            "f.proto": P3
            + """
            option java_package = "com.b";
            option go_package = "example.com/b;b";
            option optimize_for = LITE_RUNTIME;
            option cc_enable_arenas = false;
            option objc_class_prefix = "AB";
            message F { int32 x = 1; }
            """,
        },
    ),
    _pair(
        "message and field options changed",
        {
            "m.proto": P2
            + """
            message M {
              option no_standard_descriptor_accessor = true;
              option deprecated = true;
              optional int32 a = 1 [deprecated = true];
              repeated int32 b = 2 [packed = true];
              optional int32 c = 3 [lazy = false];
              optional M d = 4 [lazy = true];
            }
            """,
        },
        {
            "m.proto": P2
            + """
            message M {
              optional int32 a = 1;
              repeated int32 b = 2;
              optional int32 c = 3;
              optional M d = 4 [unverified_lazy = true];
            }
            """,
        },
    ),
    _pair(
        "a oneof deleted, its fields kept or gone",
        {
            "o.proto": P3
            + """
            message O {
              oneof gone { int32 a = 1; string b = 2; }
              oneof kept { int32 c = 3; }
              oneof emptied { int32 d = 4; }
            }
            """,
        },
        {
            "o.proto": P3
            + """
            message O {
              int32 a = 1;
              oneof kept { int32 c = 3; }
              reserved 2, 4;
              reserved "b", "d";
            }
            """,
        },
    ),
    _pair(
        "extension ranges and extended messages changed",
        {
            "x.proto": P2
            + """
            message Ext { extensions 10 to 20, 100 to max; optional int32 a = 1; }
            message Gone { extensions 5 to 9; }
            extend Ext { optional int32 e = 10; }
            extend Gone { optional int32 g = 5; }
            """,
        },
        {
            "x.proto": P2
            + """
            message Ext { extensions 10 to 15; optional int32 a = 1; }
            extend Ext { optional int32 e = 10; }
            """,
        },
    ),
    _pair(
        "packages deleted and split across files",
        {
            "a/v1/a.proto": 'syntax = "proto3";\npackage a.v1;\nmessage A { int32 x = 1; }\n',
            "a/v1/b.proto": 'syntax = "proto3";\npackage a.v1;\nmessage B { int32 x = 1; }\n',
            "b/v1/c.proto": 'syntax = "proto3";\npackage b.v1;\nmessage C { int32 x = 1; }\n',
        },
        {
            "a/v1/a.proto": _d(
                """\
                syntax = "proto3";
                package a.v1;
                message A { int32 x = 1; }
                message B { int32 x = 1; }
                """
            ),
        },
    ),
    _pair(
        "labels of proto2 and proto3 fields changed",
        {
            "2.proto": P2
            + """
            message L2 {
              optional int32 a = 1;
              required int32 b = 2;
              repeated int32 c = 3;
              optional int32 d = 4;
            }
            """,
            "3.proto": P3
            + """
            message L3 {
              optional int32 a = 1;
              int32 b = 2;
              repeated int32 c = 3;
              int32 d = 4;
            }
            """,
        },
        {
            "2.proto": P2
            + """
            message L2 {
              required int32 a = 1;
              optional int32 b = 2;
              optional int32 c = 3;
              repeated int32 d = 4;
            }
            """,
            "3.proto": P3
            + """
            message L3 {
              int32 a = 1;
              optional int32 b = 2;
              optional int32 c = 3;
              repeated int32 d = 4;
            }
            """,
        },
    ),
    _pair(
        "services and RPCs deleted, RPC options changed",
        {
            "s.proto": P3
            + """
            message Req {}
            message Res {}
            service Kept {
              rpc A(Req) returns (Res) { option deprecated = true; }
              rpc B(Req) returns (Res);
            }
            service Gone { rpc A(Req) returns (Res); }
            """,
        },
        {
            "s.proto": P3
            + """
            message Req {}
            message Res {}
            service Kept {
              option deprecated = true;
              rpc A(Req) returns (Res);
            }
            """,
        },
    ),
    _pair(
        "enum values given JSON-visible prefixes",
        {
            "p.proto": P3
            + """
            enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; }
            message M { enum Inner { INNER_UNSPECIFIED = 0; ON = 1; } Color c = 1; Inner i = 2; }
            """,
        },
        {
            "p.proto": P3
            + """
            enum Color { COLOR_UNSPECIFIED = 0; COLOR_RED = 1; GREEN = 2; COLOR_BLUE = 3; }
            message M { enum Inner { INNER_UNSPECIFIED = 0; INNER_ON = 1; reserved "ON"; } Color c = 1; Inner i = 2; }
            """,
        },
    ),
]
