"""The public surface, held to its documented lists (as httpx's `test_exported_members`).

A name added to or removed from a public module's `__all__` is a change of
the API: it must be made here too, on purpose, and said in the changelog.
Every other module of the package is an implementation module: it may keep
an `__all__` for its own subpackage, and each name it lists must exist.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import llmgw_wire

MODELS = [
    "GPU",
    "IMEX",
    "Ack",
    "Adapter",
    "AdoptedShard",
    "Compute",
    "FabricAttachment",
    "GPUFabric",
    "GPUHealth",
    "Heartbeat",
    "Host",
    "Inventory",
    "LocalWeights",
    "MIGDevice",
    "Node",
    "NodeState",
    "Profile",
    "Registration",
    "ShardCommand",
    "ShardReport",
    "ShardSpec",
    "State",
    "StopCommand",
    "Storage",
]
ERRORS = [
    "DecodeError",
    "EncodeError",
    "JSONError",
    "StateFileError",
    "StateFileInvalid",
    "StatusCode",
    "StoreError",
    "StoreOSError",
    "UsageError",
    "WireError",
]
STORE = ["LoadedShards", "SavedShard", "ShardStore"]
STREAM_ERRORS = [
    "MessageRejected",
    "PeerUnavailable",
    "PermissionDenied",
    "RegistrationTimeout",
    "StreamClosed",
    "StreamError",
    "Unauthenticated",
]
CONVERSIONS = [
    "adopted_from_register",
    "command_from_start_shard",
    "node_from_register",
    "register_from_inventory",
    "register_from_node",
    "running_shard_from_spec",
    "shard_spec_from_start",
    "start_shard_from_command",
    "state_from_wire",
    "state_to_wire",
]

#: Each public module and its whole `__all__`.
SURFACE: dict[str, list[str]] = {
    "llmgw_wire": [
        *MODELS,
        *ERRORS,
        *CONVERSIONS,
        *STORE,
        *STREAM_ERRORS,
        "__version__",
        "converter",
        "decode",
        "encode",
    ],
    "llmgw_wire.domain": [*MODELS, "FrozenMap"],
    "llmgw_wire.errors": [
        *ERRORS,
        *STREAM_ERRORS,
        "InternalError",
        "Redacted",
        "format_path",
        "shown",
    ],
    "llmgw_wire.conversions": [*CONVERSIONS, "registration_from_inventory"],
    "llmgw_wire.codec": [
        "DEFAULT_MAX_ITEMS",
        "DEFAULT_MAX_SIZE",
        "converter",
        "decode",
        "encode",
        "make_converter",
        "wire_class",
    ],
    "llmgw_wire.codec.json": [
        "decode",
        "encode",
        "json_converter",
        "make_json_converter",
        "parse_json",
    ],
    "llmgw_wire.gc": ["AdoptionFreezer"],
    "llmgw_wire.mapping": [
        "ENVELOPES",
        "MODELS_WITH_MESSAGE",
        "NOT_CARRIED",
        "PAIRS",
        "PAIRS_WITH_MESSAGE",
        "SECRET_ATTRIBUTES",
        "SECRET_FIELDS",
        "STATES_BY_NUMBER",
        "STATE_MODELS",
        "STATE_NUMBERS",
        "Envelope",
        "ModelWithMessage",
        "Pair",
        "is_secret",
        "pair_for",
    ],
    "llmgw_wire.mapping.secrets": [
        "SECRET_ATTRIBUTES",
        "SECRET_FIELDS",
        "is_secret",
        "marked_secret",
        "secret_attributes",
    ],
    "llmgw_wire.v1.redaction": ["SECRET_FIELDS", "descriptor_set", "redact_reprs", "secret_fields"],
    "llmgw_wire.testing.laws": ["LAWS", "MODELS", "Law", "law_named", "model_named", "redacted"],
    "llmgw_wire.testing.fuzz": [
        "DEFAULT_EXAMPLES",
        "Failure",
        "Run",
        "fuzz",
        "law_seed",
        "load_converter",
    ],
    "llmgw_wire.testing.sample": [
        "sample_command",
        "sample_inventory",
        "sample_large_registration",
        "sample_node",
        "sample_registration",
    ],
    "llmgw_wire.stream": [
        "CONNECT_ROUTE",
        "REFUSED_COMMAND",
        "AgentService",
        "AgentSession",
        "Backoff",
        "ClientTLS",
        "ConnectOptions",
        "ControlPlane",
        "ControlSession",
        "FromAgent",
        "FromControl",
        "GrpcOption",
        "Keepalive",
        "MessageRejected",
        "PeerCertificate",
        "PeerUnavailable",
        "PermissionDenied",
        "RegistrationTimeout",
        "Server",
        "ServerLimits",
        "ServerTLS",
        "StreamClosed",
        "StreamError",
        "Unauthenticated",
        "add_to_server",
        "connect",
        "keep_connected",
        "node_ids_of",
        "registration_from_inventory",
        "server_options",
        "start_server",
    ],
    "llmgw_wire.stream.grpclib_codec": ["UnknownMember", "WireCodec"],
    "llmgw_wire.codec.envelope": [
        "AGENT_MESSAGE",
        "CONTROL_MESSAGE",
        "EnvelopeCodec",
        "UnknownMember",
        "decode_envelope",
        "encode_envelope",
        "envelope_codec",
    ],
    "llmgw_wire.store": [
        *STORE,
        "DEFAULT_MAX_FILE_SIZE",
        "FORMAT",
        "READS",
        "file_name",
    ],
    "llmgw_wire.compat": [
        "CATEGORIES",
        "FORMATS",
        "RULES",
        "CompatError",
        "Config",
        "Deviation",
        "Finding",
        "baseline",
        "baseline_versions",
        "check",
        "compile_protos",
        "deviations",
        "escape_text",
        "find_config",
        "find_proto_root",
        "from_git",
        "from_git_input",
        "load_config",
        "parse_git_input",
        "path_under",
        "read_at_most",
        "read_descriptor_set",
        "render",
    ],
    "llmgw_wire.testing.pytest_plugin": [
        "LawCase",
        "check_laws",
        "law_cases",
        "llmgw_wire_converter",
        "llmgw_wire_stream",
    ],
    "llmgw_wire.testing.stream": [
        "WAIT",
        "ControlPlaneDouble",
        "Loopback",
        "LoopbackAgent",
        "StreamHarness",
        "control_plane",
        "loopback",
        "registration_of",
    ],
    "llmgw_wire.testing.strategies": [
        "KNOWN_STATE_NUMBERS",
        "acks",
        "adapters",
        "adopted_shards",
        "agent_messages",
        "computes",
        "control_messages",
        "domain_values",
        "extreme_values",
        "fabric_attachments",
        "gpu_fabrics",
        "gpu_healths",
        "gpus",
        "heartbeats",
        "hosts",
        "imexes",
        "int32s",
        "int64s",
        "inventories",
        "local_weights",
        "mig_devices",
        "mutated_bytes",
        "nodes",
        "profiles",
        "register_strategies",
        "registrations",
        "shard_commands",
        "shard_reports",
        "shard_specs",
        "states",
        "stop_commands",
        "storages",
        "texts",
        "unknown_state_numbers",
        "wire_messages",
    ],
}

#: The public modules: those above, and the generated wire layer's re-export,
#: whose names are the schema's. Every one has an API page; every other
#: module is an implementation module of its subpackage.
PUBLIC_MODULES: list[str] = sorted([*SURFACE, "llmgw_wire.v1"])


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_a_public_module_exports_its_documented_names(module: str) -> None:
    # ruff (RUF022) keeps each `__all__` sorted; this holds what is in it.
    exported = importlib.import_module(module).__all__
    assert sorted(exported) == sorted(SURFACE[module])


@pytest.mark.parametrize("module", sorted(SURFACE))
def test_every_exported_name_is_there_and_documented(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        value = getattr(mod, name)
        if callable(value) and not name.isupper() and name != "converter":
            assert (value.__doc__ or "").strip(), f"{module}.{name} has no docstring"


def _all_modules() -> list[str]:
    walked = pkgutil.walk_packages(llmgw_wire.__path__, "llmgw_wire.")
    return sorted(
        m.name for m in walked if "._gen" not in m.name and m.name != "llmgw_wire._cli.__main__"
    )


@pytest.mark.parametrize("module", _all_modules())
def test_every_module_has_an_all_whose_names_exist(module: str) -> None:
    mod = importlib.import_module(module)
    exported = getattr(mod, "__all__", None)
    if module.rsplit(".", 1)[-1] in {"testing", "_version"} and exported is None:
        return  # a package whose docstring only points at its modules; the version
    assert exported is not None, f"{module} has no __all__"
    missing = [name for name in exported if not hasattr(mod, name)]
    assert missing == []


@pytest.mark.subprocess
def test_the_root_imports_nothing_heavy_until_a_name_is_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, llmgw_wire\n"
        "heavy = [m for m in ('betterproto2', 'cattrs', 'google.protobuf', 'grpclib')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
        "llmgw_wire.Node\n"
        "print('betterproto2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.split("\n")[0] == "[]"
