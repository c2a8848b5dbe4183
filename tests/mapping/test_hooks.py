"""A hook registered on a converter from `make_converter()` is used wherever its model occurs.

As in cattrs: a structure or unstructure hook registered for a model with a
message of its own reaches that model inside every model that holds it,
nested (a GPU in a registration's node) or embedded in the same message (a
command's spec). A converter with no hook of its own holds the hooks compiled
once per process; the laws, run on a converter with a wrong nested hook, fail
for the models that hold it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import pytest

from llmgw_wire import (
    GPU,
    AdoptedShard,
    GPUHealth,
    Node,
    Registration,
    ShardCommand,
    ShardSpec,
    converter,
    v1,
)
from llmgw_wire.codec import make_converter
from llmgw_wire.codec._binary import compiled_upb
from llmgw_wire.codec._cattrs_converter import compiled_betterproto2
from llmgw_wire.mapping import MODELS_WITH_MESSAGE
from llmgw_wire.mapping._compiler import Hooks, compile_backend
from llmgw_wire.testing.fuzz import fuzz
from llmgw_wire.testing.laws import law_named
from llmgw_wire.testing.sample import sample_command, sample_registration

if TYPE_CHECKING:
    import cattrs


def _hooked_pool(conv: cattrs.Converter) -> None:
    """A structure hook on `ShardSpec` that puts every spec in the pool `hooked`."""
    default = conv.get_structure_hook(ShardSpec)
    conv.register_structure_hook(
        ShardSpec, lambda message, cls: attrs.evolve(default(message, cls), pool="hooked")
    )


def test_a_structure_hook_on_shard_spec_changes_a_command_s_spec() -> None:
    conv = make_converter()
    _hooked_pool(conv)
    command = sample_command()
    assert command.spec.pool != "hooked"
    back = conv.structure(conv.unstructure(command), ShardCommand)
    assert back.spec == attrs.evolve(command.spec, pool="hooked")
    assert back.startup_timeout == command.startup_timeout


def test_a_structure_hook_reaches_a_model_in_a_sequence_of_a_nested_one() -> None:
    conv = make_converter()
    default = conv.get_structure_hook(GPU)
    conv.register_structure_hook(GPU, lambda m, cls: attrs.evolve(default(m, cls), name="hooked"))
    registration = sample_registration()
    back = conv.structure(converter.unstructure(registration), Registration)
    assert registration.node.gpus
    assert {gpu.name for gpu in back.node.gpus} == {"hooked"}
    assert back.shards == registration.shards


def test_an_unstructure_hook_on_gpu_is_called_once_per_gpu_of_a_registration() -> None:
    conv = make_converter()
    default = conv.get_unstructure_hook(GPU)
    seen: list[GPU] = []

    def count(gpu: GPU) -> Any:
        seen.append(gpu)
        return default(gpu)

    conv.register_unstructure_hook(GPU, count)
    registration = sample_registration()
    message = conv.unstructure(registration)
    assert [id(gpu) for gpu in seen] == [id(gpu) for gpu in registration.node.gpus]
    assert len(seen) > 1
    assert message == converter.unstructure(registration)


def test_an_unstructure_hook_on_an_embedded_model_fills_the_enclosing_message() -> None:
    conv = make_converter()
    default = conv.get_unstructure_hook(ShardSpec)

    def pool(spec: ShardSpec) -> Any:
        message = default(spec)
        message.pool = "hooked"
        return message

    conv.register_unstructure_hook(ShardSpec, pool)
    command = sample_command()
    message = conv.unstructure(command)
    assert message.pool == "hooked"
    assert message.startup_timeout_ms == converter.unstructure(command).startup_timeout_ms
    assert converter.structure(message, ShardCommand) == attrs.evolve(
        command, spec=attrs.evolve(command.spec, pool="hooked")
    )


def test_a_hook_used_as_a_decorator_reaches_nested_models_too() -> None:
    conv = make_converter()
    default = conv.get_unstructure_hook(Node)

    @conv.register_unstructure_hook
    def hostname(node: Node) -> Any:
        message = default(node)
        message.hostname = "hooked"
        return message

    assert conv.unstructure(sample_registration()).hostname == "hooked"


def test_an_adopted_shard_s_hook_keeps_the_node_id_of_its_registration() -> None:
    # The node id is the registration's: a hook on the shard cannot know it.
    conv = make_converter()
    conv.register_structure_hook(
        AdoptedShard, lambda m, cls: attrs.evolve(converter.structure(m, cls), model="hooked")
    )
    registration = sample_registration()
    back = conv.structure(converter.unstructure(registration), Registration)
    assert registration.shards
    assert back.shards == tuple(
        attrs.evolve(shard, model="hooked") for shard in registration.shards
    )


def test_what_a_nested_hook_raises_is_raised_as_it_is() -> None:
    conv = make_converter()
    error = LookupError("the service's own")

    def refuse(message: object, cls: type) -> GPU:
        raise error

    conv.register_structure_hook(GPU, refuse)
    with pytest.raises(LookupError) as raised:
        conv.structure(converter.unstructure(sample_registration()), Registration)
    assert raised.value is error


def test_a_nested_hook_that_gives_another_type_is_a_type_error_naming_it() -> None:
    conv = make_converter()
    conv.register_unstructure_hook(ShardSpec, lambda spec: v1.Heartbeat())
    with pytest.raises(
        TypeError, match="unstructure hook registered for ShardSpec gave a Heartbeat"
    ):
        conv.unstructure(sample_command())
    conv.register_structure_hook(GPU, lambda message, cls: "a GPU")
    with pytest.raises(TypeError, match="structure hook registered for GPU gave 'a GPU'"):
        conv.structure(converter.unstructure(sample_registration()), Registration)


def test_hooks_on_one_converter_leave_the_others_alone() -> None:
    conv = make_converter()
    _hooked_pool(conv)
    command = sample_command()
    message = converter.unstructure(command)
    assert converter.structure(message, ShardCommand) == command
    assert make_converter().structure(message, ShardCommand) == command


def test_a_copy_keeps_the_hooks_and_follows_its_own() -> None:
    conv = make_converter()
    _hooked_pool(conv)
    copied = conv.copy()
    message = converter.unstructure(sample_command())
    assert copied.structure(message, ShardCommand).spec.pool == "hooked"
    copied.register_structure_hook(ShardSpec, converter.get_structure_hook(ShardSpec))
    assert copied.structure(message, ShardCommand) == sample_command()
    assert conv.structure(message, ShardCommand).spec.pool == "hooked"


def test_a_converter_with_no_hook_of_its_own_holds_the_process_s_hooks() -> None:
    # The compiled hooks, called directly: nothing is compiled again, nothing dispatched.
    fresh = make_converter()
    for model in MODELS_WITH_MESSAGE:
        assert fresh.get_structure_hook(model) is converter.get_structure_hook(model)
        assert fresh.get_unstructure_hook(model) is converter.get_unstructure_hook(model)


def test_the_library_s_hooks_registered_back_are_the_process_s_again() -> None:
    conv = make_converter()
    _hooked_pool(conv)
    assert conv.get_structure_hook(ShardCommand) is not converter.get_structure_hook(ShardCommand)
    conv.register_structure_hook(ShardSpec, converter.get_structure_hook(ShardSpec))
    for model in MODELS_WITH_MESSAGE:
        assert conv.get_structure_hook(model) is converter.get_structure_hook(model)


def test_a_hook_of_an_unrelated_type_compiles_nothing() -> None:
    conv = make_converter()
    conv.register_structure_hook(complex, lambda value, cls: complex(value))
    assert conv.get_structure_hook(ShardCommand) is converter.get_structure_hook(ShardCommand)


@pytest.mark.parametrize("law", ["domain_wire_domain", "wire_domain_wire", "backends_agree"])
def test_the_laws_catch_a_wrong_nested_hook_through_the_models_that_hold_it(law: str) -> None:
    conv = make_converter()
    _hooked_pool(conv)
    run = fuzz([law_named(law)], [ShardCommand], examples=20, seed=1, converter=conv)
    assert [(f.law, f.model) for f in run.failures] == [(law, "ShardCommand")]
    assert "pool" in str(run.failures[0].error)


def test_the_laws_hold_for_a_converter_with_a_right_nested_hook() -> None:
    conv = make_converter()
    default = conv.get_structure_hook(GPU)
    conv.register_structure_hook(GPU, lambda m, cls: attrs.evolve(default(m, cls)))
    laws = [law_named("domain_wire_domain"), law_named("wire_domain_wire")]
    run = fuzz(laws, [Registration], examples=10, seed=1, converter=conv)
    assert run.failures == ()


def test_the_compiler_takes_hooks_only_where_it_can_call_them() -> None:
    upb = compiled_upb().backend
    with pytest.raises(NotImplementedError, match="upb fills sub-messages in place"):
        compile_backend(upb, hooks=Hooks(unstructure={GPU: converter.unstructure}))
    betterproto2 = compiled_betterproto2().backend
    with pytest.raises(ValueError, match="no message of its own"):
        compile_backend(betterproto2, hooks=Hooks(structure={GPUHealth: converter.structure}))
