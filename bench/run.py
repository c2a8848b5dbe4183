"""`make bench`: the library's paths against the peers a user would otherwise pick.

For three messages (an 8-GPU `Register`, a `StartShard`, a `ShardStatus`) and
four operations (bytes to domain, domain to bytes, wire object to domain,
domain to wire object), it times side by side and interleaved:

* the library: `decode`/`encode` (the upb fast path) for bytes, the cattrs
  `converter` over the betterproto2 classes for wire objects (and the upb
  functions under `decode`/`encode`, for reference);
* betterproto2 with the library's converter, and betterproto2 with a mapping
  written by hand (`bench.handwritten_bp2`);
* Google's protobuf runtime with a mapping written by hand, tuned
  (`bench.handwritten_pb`: values built as `decode` builds them, slot by
  slot, with no check beyond upb's), the baseline of every decode figure;
* each runtime's parse or serialise alone, the floor under any mapping.

And what a stream pays per message, envelope included: `stream.py` with
grpclib's default codec against `llmgw_wire.stream.grpclib_codec.WireCodec`.

Then the registration storm (`bench.storm`), the targets, each marked met
or missed, and the worst shapes of hostile input on every decode path
(`bench.hostile`). `--json PATH` writes everything as JSON as well.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from google.protobuf.internal import api_implementation
from grpclib.encoding.proto import ProtoCodec

from bench import handwritten_bp2, handwritten_pb, hostile, samples
from bench.compat import compat_bench
from bench.harness import Contender, Group, Timing, run
from bench.storm import FREEZE_EVERY, TUNED_THRESHOLDS, StormResult, fleet, storm
from llmgw_wire import converter, decode, encode, v1
from llmgw_wire.codec import _binary
from llmgw_wire.codec._binary import compiled_upb
from llmgw_wire.codec._schema import CLASSES, DOMAIN_CLASSES
from llmgw_wire.domain import Registration, ShardCommand, ShardReport
from llmgw_wire.stream.grpclib_codec import WireCodec
from llmgw_wire.v1 import AgentMessage, ControlMessage

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["main"]

BYTES_TO_DOMAIN = "bytes -> domain"
DOMAIN_TO_BYTES = "domain -> bytes"
WIRE_TO_DOMAIN = "wire -> domain"
DOMAIN_TO_WIRE = "domain -> wire"
OPERATIONS = (BYTES_TO_DOMAIN, DOMAIN_TO_BYTES, WIRE_TO_DOMAIN, DOMAIN_TO_WIRE)

LIB_BYTES_IN = "llmgw decode"
LIB_BYTES_OUT = "llmgw encode"
LIB_CONVERTER = "llmgw converter (betterproto2)"
LIB_UPB = "llmgw upb functions (internal)"
LIB_UNLIMITED = "llmgw decode without its limits (internal)"
BP2_CODEC = "betterproto2 + llmgw converter"
BP2_HAND = "betterproto2 + hand-written"
PB_HAND = "protobuf + hand-written"
BP2_ONLY_IN = "betterproto2 parse only"
BP2_ONLY_OUT = "betterproto2 serialise only"
PB_ONLY_IN = "protobuf parse only"
PB_ONLY_OUT = "protobuf serialise only"


@dataclass(frozen=True)
class Subject:
    """One message under test, with the hand-written mappings for it."""

    name: str
    domain: type
    value: Any
    bp2_class: Any
    pb_class: Any
    bp2_from_wire: Callable[[Any], Any]
    bp2_to_wire: Callable[[Any], Any]
    pb_from_wire: Callable[[Any], Any]
    pb_to_wire: Callable[[Any], Any]


SUBJECTS = (
    Subject(
        "Register",
        Registration,
        samples.registration(),
        v1.Register,
        CLASSES["llmgw.v1.Register"],
        handwritten_bp2.registration_from_wire,
        handwritten_bp2.registration_to_wire,
        handwritten_pb.registration_from_wire,
        handwritten_pb.registration_to_wire,
    ),
    Subject(
        "StartShard",
        ShardCommand,
        samples.command(),
        v1.StartShard,
        CLASSES["llmgw.v1.StartShard"],
        handwritten_bp2.command_from_wire,
        handwritten_bp2.command_to_wire,
        handwritten_pb.command_from_wire,
        handwritten_pb.command_to_wire,
    ),
    Subject(
        "ShardStatus",
        ShardReport,
        samples.report(),
        v1.ShardStatus,
        CLASSES["llmgw.v1.ShardStatus"],
        handwritten_bp2.report_from_wire,
        handwritten_bp2.report_to_wire,
        handwritten_pb.report_from_wire,
        handwritten_pb.report_to_wire,
    ),
)


def _upb_structure(message: Any, domain: type) -> Any:
    # The functions under `decode`, without the parse: private, for reference only.
    return compiled_upb().structure[domain](message)


def _unlimited(domain: type) -> Callable[[bytes], Any]:
    """`decode` without its limits (the element count, the scan for varints over 64 bits).

    upb's parse as `decode` parses, and the structure function `decode`
    calls: private, for reference only, so that the report says what of
    `decode`'s time its limits take.
    """
    decoder = _binary._DECODERS.get(domain) or _binary._upb_decoder(domain)
    if decoder is None:
        raise TypeError(f"no decoder for {domain.__name__}")
    name, structure = decoder
    parse = DOMAIN_CLASSES[name].FromString
    return lambda data: structure(parse(data))


def _upb_unstructure(value: Any) -> Any:
    # The functions under `encode`, without the serialisation: private, for reference only.
    return compiled_upb().unstructure[type(value)](value)


def groups_for(s: Subject) -> list[Group]:
    """The four groups of contenders for one message; the library's path first in each."""
    value, domain = s.value, s.domain
    data = encode(value)
    bp2_message = s.bp2_class.parse(data)
    pb_message = s.pb_class.FromString(data)
    bp2, pb = s.bp2_class, s.pb_class
    unlimited = _unlimited(domain)
    b2d = [
        Contender(LIB_BYTES_IN, lambda: decode(data, domain)),
        Contender(LIB_UNLIMITED, lambda: unlimited(data)),
        Contender(BP2_CODEC, lambda: converter.structure(bp2.parse(data), domain)),
        Contender(BP2_HAND, lambda: s.bp2_from_wire(bp2.parse(data))),
        Contender(PB_HAND, lambda: s.pb_from_wire(pb.FromString(data))),
        Contender(BP2_ONLY_IN, lambda: bp2.parse(data)),
        Contender(PB_ONLY_IN, lambda: pb.FromString(data)),
    ]
    d2b = [
        Contender(LIB_BYTES_OUT, lambda: encode(value)),
        Contender(BP2_CODEC, lambda: bytes(converter.unstructure(value))),
        Contender(BP2_HAND, lambda: bytes(s.bp2_to_wire(value))),
        Contender(PB_HAND, lambda: s.pb_to_wire(value).SerializeToString(deterministic=True)),
        Contender(BP2_ONLY_OUT, lambda: bytes(bp2_message)),
        Contender(PB_ONLY_OUT, lambda: pb_message.SerializeToString(deterministic=True)),
    ]
    w2d = [
        Contender(LIB_CONVERTER, lambda: converter.structure(bp2_message, domain)),
        Contender(BP2_HAND, lambda: s.bp2_from_wire(bp2_message)),
        Contender(LIB_UPB, lambda: _upb_structure(pb_message, domain)),
        Contender(PB_HAND, lambda: s.pb_from_wire(pb_message)),
    ]
    d2w = [
        Contender(LIB_CONVERTER, lambda: converter.unstructure(value)),
        Contender(BP2_HAND, lambda: s.bp2_to_wire(value)),
        Contender(LIB_UPB, lambda: _upb_unstructure(value)),
        Contender(PB_HAND, lambda: s.pb_to_wire(value)),
    ]
    return [
        Group(s.name, BYTES_TO_DOMAIN, b2d),
        Group(s.name, DOMAIN_TO_BYTES, d2b),
        Group(s.name, WIRE_TO_DOMAIN, w2d),
        Group(s.name, DOMAIN_TO_WIRE, d2w),
    ]


NEGATIVE = "Register (numa_node -1)"


def negative_groups() -> tuple[Subject, list[Group]]:
    """Decoding the registration with a negative number in every GPU (10-byte varints).

    Next to the `Register` rows, the same registration with non-negative
    values: the difference is what a negative number costs.
    """
    s = dataclasses.replace(SUBJECTS[0], name=NEGATIVE, value=samples.registration_negative())
    return s, [_decode_group(s)]


#: The registration with this many GPUs, beside the 8-GPU `Register` rows.
GPU_COUNTS = (1, 64, 512)


def by_gpus(count: int) -> str:
    """The name of the rows of the registration with `count` GPUs."""
    return f"Register ({count} GPU{'' if count == 1 else 's'})"


def size_groups() -> list[tuple[Subject, list[Group]]]:
    """Decoding the registration by size: 1, 64 and 512 GPUs (the 8-GPU one is `Register`)."""
    out = []
    for count in GPU_COUNTS:
        s = dataclasses.replace(
            SUBJECTS[0], name=by_gpus(count), value=samples.registration_with_gpus(count)
        )
        out.append((s, [_decode_group(s)]))
    return out


def _decode_group(s: Subject) -> Group:
    """`decode` against upb + the hand-written mapping, and upb's parse alone, for `s`."""
    data, pb, domain = encode(s.value), s.pb_class, s.domain
    unlimited = _unlimited(domain)
    return Group(
        s.name,
        BYTES_TO_DOMAIN,
        [
            Contender(LIB_BYTES_IN, lambda: decode(data, domain)),
            Contender(LIB_UNLIMITED, lambda: unlimited(data)),
            Contender(PB_HAND, lambda: s.pb_from_wire(pb.FromString(data))),
            Contender(PB_ONLY_IN, lambda: pb.FromString(data)),
        ],
    )


#: Registrations of a fleet, each its own (`samples.registration_of_its_own`), decoded
#: in turn: more of them than a table of shared values keeps (`INTERNED_MAX`).
FLEET = "Register (a fleet, each its own)"
FLEET_SIZE = 5000


def fleet_group() -> tuple[Subject, Group]:
    """`decode` against upb + the hand-written mapping over a fleet's registrations, in turn.

    The rows above decode one message again and again, so `decode` shares
    every value of it with the last decoding; here nothing of a node's GPUs
    (their UUIDs) or storage (its free bytes) repeats. Each contender takes
    the next registration at each call.
    """
    s = dataclasses.replace(SUBJECTS[0], name=FLEET, value=samples.registration_of_its_own(0))
    datas = [encode(samples.registration_of_its_own(n)) for n in range(FLEET_SIZE)]
    pb, unlimited = s.pb_class, _unlimited(Registration)
    for data in datas[:: FLEET_SIZE // 50]:
        value = decode(data, Registration)
        for name, other in (
            (PB_HAND, s.pb_from_wire(pb.FromString(data))),
            (LIB_UNLIMITED, unlimited(data)),
        ):
            if other != value:
                raise AssertionError(f"{FLEET}: {name} disagrees")
    lib, bare, hand, parse = (itertools.cycle(datas) for _ in range(4))
    return s, Group(
        FLEET,
        BYTES_TO_DOMAIN,
        [
            Contender(LIB_BYTES_IN, lambda: decode(next(lib), Registration)),
            Contender(LIB_UNLIMITED, lambda: unlimited(next(bare))),
            Contender(PB_HAND, lambda: s.pb_from_wire(pb.FromString(next(hand)))),
            Contender(PB_ONLY_IN, lambda: pb.FromString(next(parse))),
        ],
    )


AGENT_MESSAGE = "AgentMessage(register)"
CONTROL_MESSAGE = "ControlMessage(start_shard)"
LIB_CODEC = "llmgw WireCodec (upb)"
STREAM_TODAY = "grpclib ProtoCodec + the converter"


def envelope_groups() -> tuple[list[Group], dict[str, int]]:
    """What a stream pays per message: its grpclib codec and the envelope's converter.

    grpclib's default codec reads and writes with betterproto2's parser and
    serialiser, and the envelope is opened or filled with the converter;
    `llmgw_wire.stream.grpclib_codec.WireCodec` (and the stream's own
    envelope codec) does both at once with upb.
    """
    registration, command = SUBJECTS[0].value, SUBJECTS[1].value
    wire_codec, proto_codec = WireCodec(), ProtoCodec()
    inbound = wire_codec.encode(registration, AgentMessage)
    groups = [
        Group(
            AGENT_MESSAGE,
            BYTES_TO_DOMAIN,
            [
                Contender(LIB_CODEC, lambda: wire_codec.decode(inbound, AgentMessage)),
                Contender(
                    STREAM_TODAY,
                    lambda: converter.structure(
                        cast("AgentMessage", proto_codec.decode(inbound, AgentMessage)).register,
                        Registration,
                    ),
                ),
            ],
        ),
        Group(
            CONTROL_MESSAGE,
            DOMAIN_TO_BYTES,
            [
                Contender(LIB_CODEC, lambda: wire_codec.encode(command, ControlMessage)),
                Contender(
                    STREAM_TODAY,
                    lambda: proto_codec.encode(
                        ControlMessage(start_shard=converter.unstructure(command)), ControlMessage
                    ),
                ),
            ],
        ),
    ]
    for group, value in zip(groups, (registration, command), strict=True):
        for contender in group.contenders:
            result = contender.call()
            if isinstance(result, bytes):
                result = wire_codec.decode(result, ControlMessage)
            if result != value:
                raise AssertionError(f"{group.message}: {contender.name} disagrees")
    sizes = {
        AGENT_MESSAGE: len(inbound),
        CONTROL_MESSAGE: len(wire_codec.encode(command, ControlMessage)),
    }
    return groups, sizes


def _as_domain(result: object, s: Subject) -> object:
    if isinstance(result, bytes):
        return decode(result, s.domain)
    if isinstance(result, s.bp2_class):
        return converter.structure(result, s.domain)
    if isinstance(result, s.pb_class):
        return decode(result.SerializeToString(), s.domain)
    return result


def check_agreement(s: Subject, groups: list[Group]) -> None:
    """Every contender computes the same thing, or the timings compare nothing."""
    for group in groups:
        for contender in group.contenders:
            got = _as_domain(contender.call(), s)
            if got != s.value:
                raise AssertionError(f"{s.name} {group.operation}: {contender.name} disagrees")


# --- import -----------------------------------------------------------------------------

#: What a service runs to decode registrations.
IMPORT_LINE = "from llmgw_wire import decode, encode, Registration"
#: Its floor: attrs and the schema's upb classes, as generated `_pb2` modules give them.
IMPORT_FLOOR = """
import attrs
from importlib import resources
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
data = resources.files("llmgw_wire._gen").joinpath("llmgw_v1.binpb").read_bytes()
files = descriptor_pb2.FileDescriptorSet.FromString(data).file
pool = descriptor_pool.DescriptorPool()
for file in files:
    pool.Add(file)
classes = [
    message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{file.package}.{m.name}"))
    for file in files
    for m in file.message_type
]
"""


@dataclass(frozen=True)
class ImportCost:
    """Wall time of a fresh interpreter running each line, medians of interleaved runs."""

    bare_s: float  # `pass`
    floor_s: float  # IMPORT_FLOOR
    library_s: float  # IMPORT_LINE

    @property
    def ratio(self) -> float:
        """The library's import over its floor's, the interpreter's own start taken out."""
        return (self.library_s - self.bare_s) / (self.floor_s - self.bare_s)


def import_cost(runs: int) -> ImportCost:
    """Each of `pass`, the floor and the library's line, in fresh interpreters, interleaved.

    Every module is imported from its compiled bytecode, as from an installed
    wheel (pip compiles it) and as the floor's packages are: an untimed first
    run of each line writes it to a cache of its own, whatever
    `PYTHONDONTWRITEBYTECODE` says, so that the library's import is not timed
    with the compilation of its source.
    """
    lines = {"bare": "pass", "floor": IMPORT_FLOOR, "library": IMPORT_LINE}
    times: dict[str, list[float]] = {name: [] for name in lines}
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        for line in lines.values():
            subprocess.run([sys.executable, "-c", line], check=True, env=env)
        for _ in range(runs):
            for name, line in lines.items():
                start = time.perf_counter()
                subprocess.run([sys.executable, "-c", line], check=True, env=env)
                times[name].append(time.perf_counter() - start)
    bare, floor, library = (statistics.median(times[name]) for name in lines)
    return ImportCost(bare, floor, library)


# --- targets --------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One target: `measured` against `bound`, met when on the right side of it."""

    name: str
    measured: float
    bound: float
    at_least: bool  # True: measured >= bound; False: measured <= bound
    unit: str = "x"
    context: str = ""  # the measurement that bounds it, for a target that may be missed

    @property
    def met(self) -> bool:
        """Whether the measurement meets the target."""
        return self.measured >= self.bound if self.at_least else self.measured <= self.bound

    def line(self) -> str:
        """The target as one line of the report."""
        sign = ">=" if self.at_least else "<="
        mark = "met   " if self.met else "MISSED"
        bound = f"{sign} {self.bound:g}{self.unit}"
        line = f"  [{mark}] {self.name}: {self.measured:.2f}{self.unit} (target {bound})"
        return f"{line}\n           {self.context}" if self.context else line


def targets(
    medians: dict[tuple[str, str, str], float],
    storm_result: StormResult,
    imports: ImportCost,
) -> list[Target]:
    """The targets, computed from one run's medians."""

    def m(message: str, op: str, contender: str) -> float:
        return medians[message, op, contender]

    def to_hand(message: str, contender: str) -> float:
        return m(message, BYTES_TO_DOMAIN, contender) / m(message, BYTES_TO_DOMAIN, PB_HAND)

    def decode_context(message: str) -> str:
        # What of decode's time is its limits, which the hand-written mapping does not apply.
        context = f"without its limits: {to_hand(message, LIB_UNLIMITED):.2f}x"
        if message == "Register":
            context += (
                "; over a fleet's registrations, each its own: "
                f"{to_hand(FLEET, LIB_BYTES_IN):.2f}x ({to_hand(FLEET, LIB_UNLIMITED):.2f}x "
                "without its limits)"
            )
        return context

    negative, plain = to_hand(NEGATIVE, LIB_BYTES_IN), to_hand("Register", LIB_BYTES_IN)
    slower = m(NEGATIVE, BYTES_TO_DOMAIN, LIB_BYTES_IN) / m(
        "Register", BYTES_TO_DOMAIN, LIB_BYTES_IN
    )
    out = [
        Target(
            "Register with numa_node -1 bytes -> Registration: decode vs protobuf + "
            "hand-written (times slower)",
            negative,
            1.0,
            at_least=False,
            context=(
                f"{decode_context(NEGATIVE)}; non-negative: {plain:.2f}x; "
                f"decode with -1 vs without: {slower:.2f}x"
            ),
        ),
        Target(
            "Register bytes -> Registration: decode vs betterproto2 + codec (times faster)",
            m("Register", BYTES_TO_DOMAIN, BP2_CODEC)
            / m("Register", BYTES_TO_DOMAIN, LIB_BYTES_IN),
            10,
            at_least=True,
        ),
    ]
    out.extend(
        Target(
            f"{message} bytes -> Registration: decode vs protobuf + hand-written (times slower)",
            to_hand(message, LIB_BYTES_IN),
            1.0,
            at_least=False,
            context=decode_context(message),
        )
        for message in ("Register", *map(by_gpus, GPU_COUNTS))
    )
    out.extend(
        Target(
            f"{message} domain -> bytes: encode vs {peer} (times faster)",
            m(message, DOMAIN_TO_BYTES, peer) / m(message, DOMAIN_TO_BYTES, LIB_BYTES_OUT),
            20,
            at_least=True,
            context=(
                "the best hand-written mapping over protobuf: "
                f"{m(message, DOMAIN_TO_BYTES, peer) / m(message, DOMAIN_TO_BYTES, PB_HAND):.2f}x"
            ),
        )
        for message in ("Register", "StartShard")
        for peer in (BP2_CODEC, BP2_ONLY_OUT)
    )
    on, off = storm_result.gc_on, storm_result.gc_off
    out.append(
        Target(
            f"storm of {storm_result.registrations} registrations, gc on, wall (seconds)",
            storm_result.wall_s,
            2.0,
            at_least=False,
            unit=" s",
            context=(
                f"CPU {on.cpu_s:.2f} s, of which {on.gc_s:.2f} s in the garbage collector; "
                f"decoding alone (gc off) {off.wall_s:.2f} s wall, {off.cpu_s:.2f} s CPU"
            ),
        )
    )
    out.append(
        Target(
            f"storm, objects the collector tracks per registration of {storm_result.bytes_each} "
            "bytes",
            storm_result.tracked_each,
            25,
            at_least=False,
            unit="",
        )
    )
    out.append(
        Target(
            f"import of `{IMPORT_LINE}` vs its floor (attrs and the upb classes)",
            imports.ratio,
            1.5,
            at_least=False,
            context=(
                f"{(imports.library_s - imports.bare_s) * 1e3:.0f} ms against "
                f"{(imports.floor_s - imports.bare_s) * 1e3:.0f} ms, the interpreter's own "
                f"{imports.bare_s * 1e3:.0f} ms taken out"
            ),
        )
    )
    frozen = storm_result.gc_frozen
    out.extend(
        Target(
            f"storm, {name} vs gc off, CPU (times slower)",
            run.cpu_s / off.cpu_s,
            1.3,
            at_least=False,
            context=f"{sum(run.collections)} collections ({run.collections[2]} full), "
            f"{run.gc_s:.2f} s in the collector",
        )
        for name, run in (
            ("default gc", on),
            (f"default gc with llmgw_wire.gc.AdoptionFreezer({FREEZE_EVERY})", frozen),
        )
    )
    out.extend(
        Target(
            f"{message} {op}: converter vs betterproto2 hand-written (times slower)",
            m(message, op, LIB_CONVERTER) / m(message, op, BP2_HAND),
            1.25,
            at_least=False,
        )
        for message in ("Register", "StartShard", "ShardStatus")
        for op in (WIRE_TO_DOMAIN, DOMAIN_TO_WIRE)
    )
    return out


# --- report -----------------------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _environment(cpu: int | None) -> dict[str, object]:
    dists = ("llmgw-wire", "betterproto2", "protobuf", "cattrs", "attrs", "grpclib")
    versions = {dist: _version(dist) for dist in dists}
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_model": model,
        "pinned_cpu": cpu,
        "protobuf_backend": api_implementation.Type(),
        "versions": versions,
    }


def _table(timings: list[Timing], sizes: dict[str, int]) -> list[str]:
    lines = []
    current = ("", "")
    base = 0.0
    header = f"  {'':44} {'median us':>11} {'spread':>7} {'vs first':>9} {'cpu us':>10}"
    for timing in timings:
        group = timing.group
        if (group.message, group.operation) != current:
            if group.message != current[0]:
                lines.append("")
                lines.append(f"{group.message} ({sizes[group.message]} bytes on the wire)")
                lines.append(header)
            current = (group.message, group.operation)
            lines.append(f"  {group.operation}")
            base = timing.median
        lines.append(
            f"    {timing.contender.name:42} {timing.median / 1e3:11.2f} "
            f"{timing.spread * 100:6.1f}% {timing.median / base:8.2f}x "
            f"{timing.cpu_median / 1e3:10.2f}"
        )
    return lines


def _pin(cpu: int | None) -> int | None:
    # Everything runs in this one thread anyway; pinning only stops migrations,
    # and on a shared machine it can pin the run to the busiest core.
    if cpu is None or not hasattr(os, "sched_setaffinity"):
        return None
    os.sched_setaffinity(0, {cpu})
    return cpu


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument("--repetitions", type=int, default=101, help="timed batches per contender")
    parser.add_argument("--batch-ms", type=float, default=1.0, help="length of one batch")
    parser.add_argument("--storm", type=int, default=10_000, help="registrations in the storm")
    parser.add_argument(
        "--storm-runs", type=int, default=4, help="timed storms of each way (median kept)"
    )
    parser.add_argument(
        "--compat-runs", type=int, default=11, help="runs of the schema checker and of buf"
    )
    parser.add_argument(
        "--import-runs", type=int, default=15, help="fresh interpreters per import line"
    )
    parser.add_argument("--cpu", type=int, help="pin the run to this core (default: no pinning)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--quick", action="store_true", help="a few repetitions and a small storm (smoke test)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repetitions, args.batch_ms, args.storm, args.storm_runs = 3, 0.2, 200, 1
        args.compat_runs, args.import_runs = 1, 1
    return args


def all_groups() -> tuple[list[Group], dict[str, int]]:
    """Every group timed, each contender checked against the library; the size of each message."""
    groups: list[Group] = []
    for subject in SUBJECTS:
        subject_groups = groups_for(subject)
        check_agreement(subject, subject_groups)
        groups += subject_groups
    extra = [negative_groups(), *size_groups()]
    for subject, subject_groups in extra:
        check_agreement(subject, subject_groups)
        groups += subject_groups
    fleet_subject, fleet_decode = fleet_group()
    groups.append(fleet_decode)
    subjects = (*SUBJECTS, *(s for s, _ in extra), fleet_subject)
    sizes = {s.name: len(encode(s.value)) for s in subjects}
    stream_groups, stream_sizes = envelope_groups()
    return groups + stream_groups, sizes | stream_sizes


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmarks and print the report; 1 with `--check` when a target is missed."""
    args = _parse_args(argv)
    cpu = _pin(args.cpu)
    load_start = os.getloadavg()
    # The storm first, while the process holds little but the library: every
    # full collection walks whatever else is alive, and the timings' own
    # samples and inputs are not what the library's values cost.
    storm_result = storm(fleet(args.storm), runs=args.storm_runs)
    groups, sizes = all_groups()
    timings = run(groups, args.repetitions, round(args.batch_ms * 1e6))
    compat_result = compat_bench(args.compat_runs)
    imports = import_cost(args.import_runs)
    medians = {(t.group.message, t.group.operation, t.contender.name): t.median for t in timings}
    results = targets(medians, storm_result, imports)

    env = _environment(cpu)
    load_end = os.getloadavg()
    env["loadavg_start"], env["loadavg_end"] = load_start, load_end
    pinned = "not pinned" if cpu is None else f"pinned to CPU {cpu}"
    print(
        f"llmgw-wire benchmarks: Python {env['python']}, protobuf backend "
        f"{env['protobuf_backend']}, {env['cpu_model'] or 'unknown CPU'} x{os.cpu_count()}, "
        f"{pinned}, load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end"
    )
    print(
        f"{args.repetitions} interleaved repetitions of ~{args.batch_ms:g} ms batches per "
        "contender; medians per call of wall time (perf_counter_ns) and of this thread's CPU "
        "time; gc off while timing; 'vs first' is the wall-time ratio to the first row of the "
        "operation (the library's path); spread is the interquartile range over the median"
    )
    for line in _table(timings, sizes):
        print(line)
    print()
    on, off = storm_result.gc_on, storm_result.gc_off
    print(
        f"Storm: {storm_result.registrations} registrations of {storm_result.bytes_each} bytes, "
        "each decoded and adopted (kept by node id), one thread"
    )
    print(
        f"  gc on (default thresholds): {on.wall_s:.3f} s wall, {on.cpu_s:.3f} s CPU, of which "
        f"{on.gc_s:.3f} s in {sum(on.collections)} collections ({on.collections[2]} full); "
        "runs: " + ", ".join(f"{w:.3f}" for w in storm_result.runs_gc_on_s)
    )
    tuned = storm_result.gc_tuned
    print(
        f"  gc on, thresholds {TUNED_THRESHOLDS}: {tuned.wall_s:.3f} s wall, {tuned.cpu_s:.3f} s "
        f"CPU, of which {tuned.gc_s:.3f} s in {sum(tuned.collections)} collections "
        f"({tuned.collections[2]} full)"
    )
    frozen = storm_result.gc_frozen
    print(
        f"  gc on, frozen after every {FREEZE_EVERY} adopted (llmgw_wire.gc.AdoptionFreezer): "
        f"{frozen.wall_s:.3f} s wall, {frozen.cpu_s:.3f} s CPU, of which {frozen.gc_s:.3f} s in "
        f"{sum(frozen.collections)} collections ({frozen.collections[2]} full)"
    )
    print(f"  gc off: {off.wall_s:.3f} s wall, {off.cpu_s:.3f} s CPU")
    print(
        f"  memory: tracemalloc peak {storm_result.traced_peak_bytes / 2**20:.1f} MiB (Python "
        f"allocations, adopted values included), ru_maxrss growth "
        f"{storm_result.maxrss_delta_bytes / 2**20:.1f} MiB"
    )
    print(
        f"  objects the collector tracks per registration adopted: {storm_result.tracked_each:.1f}"
    )
    print()
    print(
        f"Import, fresh interpreters, medians of {args.import_runs} interleaved runs: "
        f"`{IMPORT_LINE}` {imports.library_s * 1e3:.0f} ms, its floor (attrs and the upb "
        f"classes) {imports.floor_s * 1e3:.0f} ms, `pass` {imports.bare_s * 1e3:.0f} ms"
    )
    print()
    for line in compat_result.lines():
        print(line)
    print()
    print("Targets")
    for target in results:
        print(target.line())

    # The worst shapes of hostile input, each on every decode path.
    hostile_size = 64 * 1024 if args.quick else 4 * 1024 * 1024 - 64
    with tempfile.TemporaryDirectory() as tmp:
        shapes = hostile.QUICK_SHAPES if args.quick else None
        hostile_cells = hostile.run_all(hostile_size, Path(tmp), shapes)
    print()
    print(
        f"Hostile input: the worst shapes at {hostile_size / 2**20:.2f} MiB, each decoded once "
        "per path in a process of its own; CPU time, tracemalloc peak and peak-RSS growth "
        "per MiB of input"
    )
    for line in hostile.table(hostile_cells):
        print(line)

    if args.json is not None:
        report = {
            "environment": env,
            "settings": {
                "repetitions": args.repetitions,
                "batch_ms": args.batch_ms,
                "storm": args.storm,
                "storm_runs": args.storm_runs,
                "quick": args.quick,
                "gc": "off while timing, collected between repetitions; the storm runs both ways",
            },
            "sizes": sizes,
            "results": [
                {
                    "message": t.group.message,
                    "operation": t.group.operation,
                    "contender": t.contender.name,
                    "median_ns": t.median,
                    "cpu_median_ns": t.cpu_median,
                    "spread": t.spread,
                    "calls_per_batch": t.number,
                    "samples_ns": t.samples,
                    "cpu_samples_ns": t.cpu_samples,
                    "ratio_to_first": t.median
                    / medians[t.group.message, t.group.operation, t.group.contenders[0].name],
                }
                for t in timings
            ],
            "storm": storm_result.as_dict(),
            "import": {
                "line": IMPORT_LINE,
                "runs": args.import_runs,
                "bare_s": imports.bare_s,
                "floor_s": imports.floor_s,
                "library_s": imports.library_s,
                "ratio": imports.ratio,
            },
            "compat": compat_result.as_dict(),
            "hostile": [cell.as_dict() for cell in hostile_cells],
            "targets": [
                {
                    "name": t.name,
                    "measured": t.measured,
                    "bound": t.bound,
                    "at_least": t.at_least,
                    "met": t.met,
                    "context": t.context,
                }
                for t in results
            ],
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if args.check and not all(t.met for t in results) else 0
