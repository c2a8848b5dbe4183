"""The messages the benchmarks time, built from the library's sample node.

The registration is what one agent sends when the control plane fails over:
the sample 8-GPU node (seven whole H100 cards in one NVLink fabric, the eighth
split into MIG slices) with four shards running, each with its compute
placement. It encodes to about 3.5 kB.
"""

from __future__ import annotations

import attrs

from llmgw_wire.domain import AdoptedShard, Compute, Registration, ShardCommand, ShardReport, State
from llmgw_wire.testing.sample import sample_command, sample_registration

__all__ = [
    "command",
    "registration",
    "registration_for",
    "registration_negative",
    "registration_of_its_own",
    "registration_with_gpus",
    "report",
]


def _with_compute(shard: AdoptedShard) -> AdoptedShard:
    devices = tuple(f"cuda:{i}" for i in range(len(shard.gpu_indices)))
    compute = shard.compute or Compute("cuda", devices, 28, 28)
    return attrs.evolve(shard, state=State.READY, compute=compute)


def registration() -> Registration:
    """The sample node with four running shards, each with its compute placement."""
    sample = sample_registration()
    llama, qwen = (_with_compute(shard) for shard in sample.shards)
    # Two more replicas on the cards the sample leaves free.
    more = (
        attrs.evolve(
            qwen,
            replica_id=f"qwen7b-r{n}",
            shard_id=f"qwen7b-r{n}-s0",
            gpu_indices=(gpu,),
            http_port=port,
            profile_fp=f"sha256:{port:08x}",
            endpoint=f"http://{sample.node.mgmt_addr}:{port}",
        )
        for n, gpu, port in ((2, 4, 8011), (3, 5, 8012))
    )
    return Registration(sample.node, (llama, qwen, *more))


def registration_negative() -> Registration:
    """The same registration with a negative number in every GPU: `numa_node=-1`.

    The reference agent sends -1 for a GPU without NUMA affinity; on the wire
    every negative int32 is a 10-byte varint.
    """
    reg = registration()
    gpus = tuple(attrs.evolve(gpu, numa_node=-1) for gpu in reg.node.gpus)
    return Registration(attrs.evolve(reg.node, gpus=gpus), reg.shards)


def registration_with_gpus(count: int) -> Registration:
    """The registration with `count` GPUs: the sample's eight, repeated, each its own index."""
    reg = registration()
    sample = reg.node.gpus
    gpus = tuple(
        attrs.evolve(
            sample[n % len(sample)], index=n, uuid=f"GPU-{n:08d}-0000-0000-0000-000000000000"
        )
        for n in range(count)
    )
    return Registration(attrs.evolve(reg.node, gpus=gpus), reg.shards)


def registration_for(number: int) -> Registration:
    """The registration as agent `number` of a fleet sends it: same shape, its own names."""
    reg = registration()
    node_id = f"gpu-node-{number:05d}"
    node = attrs.evolve(reg.node, id=node_id, hostname=f"{node_id}.dc1.example.net")
    shards = tuple(attrs.evolve(shard, node_id=node_id) for shard in reg.shards)
    return Registration(node=node, shards=shards)


def registration_of_its_own(number: int) -> Registration:
    """Agent `number`'s registration with what differs from node to node in a real fleet.

    Besides its names: each GPU's UUID (unique to its card) and each
    storage's free bytes. Decoding a run of these, `decode` finds little of
    a node to share with the nodes before it.
    """
    reg = registration_for(number)
    gpus = tuple(
        attrs.evolve(gpu, uuid=f"GPU-{number:08d}-{position:04d}-0000-0000-000000000000")
        for position, gpu in enumerate(reg.node.gpus)
    )
    storage = tuple(
        attrs.evolve(each, free_bytes=each.free_bytes - number * 4096) for each in reg.node.storage
    )
    return Registration(attrs.evolve(reg.node, gpus=gpus, storage=storage), reg.shards)


def command() -> ShardCommand:
    """A command to start one shard: the library's sample command."""
    return sample_command()


def report() -> ShardReport:
    """A shard reporting that it is ready, with its compute placement."""
    return ShardReport(
        replica_id="llama70b-r3",
        shard_id="llama70b-r3-s0",
        state=State.READY,
        detail="engine healthy; 80/80 layers on GPU",
        compute=Compute(
            backend="cuda", devices=("cuda:0", "cuda:1", "cuda:2", "cuda:3"), offloaded=80, total=80
        ),
    )
