"""`llmgw-wire demo`: the sample registration across the wire, shown readably."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llmgw_wire.codec import decode, encode
from llmgw_wire.domain import Registration
from llmgw_wire.sample import sample_registration

if TYPE_CHECKING:
    import argparse

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo takes no arguments."""
    del parser


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]
    lines = [headers, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def render(registration: Registration) -> str:
    """A registration as text: the node, a table of its GPUs, a table of its shards."""
    node = registration.node
    out = [
        f"node {node.id} ({node.hostname}, {node.mgmt_addr}) state={node.state.value}",
        f"  agent {node.agent_version}, {node.cpu_count} CPUs, "
        f"{node.memory_total_mb // 1024} GiB, {node.host.os_id} {node.host.os_version}",
        (
            f"  IMEX {node.imex.state or '-'} ({node.imex.channels} channels); fabrics: "
            + ", ".join(
                f"{f.fabric} {f.rate_gbps} Gb/s via {'+'.join(f.hcas)}" for f in node.fabrics
            )
        ),
        "",
    ]
    gpu_rows = [
        [
            str(g.index),
            g.mig.profile if g.mig else "whole",
            f"{g.memory_used_mb}/{g.memory_total_mb} MiB",
            f"{g.utilization_percent}%",
            f"{g.health.temperature_c} C",
            f"{g.fabric.state} clique {g.fabric.clique_id}" if g.fabric else "-",
            ",".join(map(str, g.nvlink_peers)) or "-",
            "; ".join(g.health.problems) or "ok",
        ]
        for g in node.gpus
    ]
    headers = ["gpu", "slice", "memory", "util", "temp", "fabric", "nvlink", "health"]
    out += [_table(headers, gpu_rows), ""]
    shard_rows = [
        [
            s.shard_id,
            str(s.rank),
            s.state.value,
            ",".join(map(str, s.gpu_indices)),
            s.model,
            f"{s.compute.backend} {s.compute.offloaded}/{s.compute.total} layers"
            if s.compute
            else "-",
            s.endpoint or "-",
        ]
        for s in registration.shards
    ]
    headers = ["shard", "rank", "state", "gpus", "model", "compute", "endpoint"]
    out.append(_table(headers, shard_rows))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """Encode the sample registration, decode it, and show what crossed the wire."""
    del args
    sent = sample_registration()
    data = encode(sent)
    received = decode(data, Registration)
    print(f"agent -> control plane: Register, {len(data)} bytes on the wire\n")
    print(render(received))
    if received != sent:
        print("\nerror: what arrived differs from what was sent")
        return 1
    print("\nround trip exact: the control plane sees what the agent sent")
    return 0
