"""Importing the library changes nothing in the process: no environment, no patched classes."""

from __future__ import annotations

import os
import subprocess
import sys

_SCRIPT = """
import gc, inspect, logging, os, sys, warnings
from llmgw_wire._gen.message_pool import default_message_pool
import llmgw_wire._gen.llmgw.v1

classes = list(default_message_pool.url_to_type.values())
assert len(classes) >= 19, classes
environment = dict(os.environ)
parsers = {cls: inspect.getattr_static(cls, "FromString") for cls in classes}
# The process-wide settings a codec or the collector's helper might be tempted to touch.
def settings():
    return (
        gc.isenabled(), gc.get_threshold(), gc.get_freeze_count(), sys.getrecursionlimit(),
        sys.get_int_max_str_digits(), list(warnings.filters), list(logging.root.handlers),
        logging.root.level,
    )
before = settings()

import llmgw_wire.stream, llmgw_wire.codec, llmgw_wire.store
import llmgw_wire as wire
for name in wire.__all__:
    getattr(wire, name)
wire.decode(wire.encode(wire.Node()), wire.Node)

assert dict(os.environ) == environment, set(os.environ.items()) ^ set(environment.items())
assert settings() == before, (settings(), before)
changed = [c.__name__ for c in classes if inspect.getattr_static(c, "FromString") is not parsers[c]]
assert changed == [], changed
print("unchanged", len(classes))
"""


def test_importing_the_stream_and_the_codec_leaves_the_process_as_it_was() -> None:
    # Without grpc's variables, so that a default set by an import would show.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPC_")}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("unchanged ")


_CODEC_ONLY = """
import sys
from llmgw_wire import decode, encode, Registration, v1
from llmgw_wire.testing.sample import sample_registration

value = sample_registration()
assert decode(encode(value), Registration) == value
assert decode(encode(value), v1.Register).node_id == value.node.id
print(" ".join(sorted(sys.modules)))
"""


def test_decoding_and_encoding_import_no_cattrs_grpc_or_grpclib() -> None:
    """The converter is built on first use; bytes go through upb alone."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _CODEC_ONLY],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # `-X importtime` writes one line per module imported: "import time: self | cumulative | name".
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line]
    assert "llmgw_wire.codec._binary" in imported
    for modules in (imported, done.stdout.split()):
        heavy = [m for m in modules if m.split(".")[0] in ("cattrs", "grpc", "grpclib")]
        assert heavy == [], heavy


_DOMAIN_ONLY = """
import sys
from llmgw_wire import decode, encode, Registration
from llmgw_wire.domain import GPU, Node

value = Registration(Node(id="n1", labels={"zone": "a"}, gpus=(GPU(index=0, uuid="GPU-0"),)))
assert decode(encode(value), Registration) == value
print(" ".join(sorted(sys.modules)))
"""


def test_the_domain_codec_loads_no_betterproto2_or_wire_classes() -> None:
    """Bytes to domain values and back need upb alone: the wire classes load on first use."""
    done = subprocess.run(
        [sys.executable, "-c", _DOMAIN_ONLY],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert "llmgw_wire.codec._binary" in loaded
    wire = [
        m
        for m in loaded
        if m.split(".")[0] in ("betterproto2", "cattrs")
        or m.startswith(("llmgw_wire.v1", "llmgw_wire._gen.llmgw", "llmgw_wire._gen.message_pool"))
    ]
    assert wire == [], wire


_ON_FIRST_USE = """
import sys
from llmgw_wire import decode, encode, Registration

def loaded():
    ours = ("llmgw_wire.mapping.", "llmgw_wire.domain.")
    return sorted(m for m in sys.modules if m.startswith(ours))

at_import = loaded()
value = Registration()
assert decode(encode(value), Registration) == value
print(" ".join(at_import))
print(" ".join(loaded()))
"""


def test_the_mapping_and_the_other_models_load_on_first_use() -> None:
    """The import loads what compiled code runs with, and the models of a registration.

    The mapping's table, rules and compiler come with the first conversion,
    which needs every model; the shard spec, its commands and the keepalive
    messages with it.
    """
    done = subprocess.run(
        [sys.executable, "-c", _ON_FIRST_USE],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    at_import, after = (set(line.split()) for line in done.stdout.splitlines())
    later = {
        "llmgw_wire.mapping._table",
        "llmgw_wire.mapping._rules",
        "llmgw_wire.mapping._compiler",
        "llmgw_wire.domain._engines",
        "llmgw_wire.domain._commands",
        "llmgw_wire.domain._keepalive",
    }
    assert "llmgw_wire.mapping._runtime" in at_import
    assert at_import & later == set()
    assert later <= after
