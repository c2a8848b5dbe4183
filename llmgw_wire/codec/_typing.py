"""What the codec uses of upb's messages and descriptors, as typed protocols.

protobuf ships no type information of its own, so its classes are `Any` to a
type checker; these protocols say what the codec reads of them, so that a
misspelt attribute or a wrong type is caught. They are imported under
`TYPE_CHECKING` alone: nothing of them exists at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["FieldDescriptorLike", "MessageDescriptorLike", "MessageOptionsLike", "UpbMessage"]


class FieldDescriptorLike(Protocol):
    """A field's descriptor (`google.protobuf.descriptor.FieldDescriptor`), as read here."""

    @property
    def name(self) -> str: ...
    @property
    def number(self) -> int: ...
    @property
    def is_repeated(self) -> bool: ...
    @property
    def message_type(self) -> MessageDescriptorLike | None: ...
    @property
    def containing_oneof(self) -> object | None: ...


class MessageOptionsLike(Protocol):
    """A message's options (`google.protobuf.descriptor_pb2.MessageOptions`), as read here."""

    @property
    def map_entry(self) -> bool: ...


class MessageDescriptorLike(Protocol):
    """A message's descriptor (`google.protobuf.descriptor.Descriptor`), as read here."""

    def GetOptions(self) -> MessageOptionsLike: ...  # noqa: N802 - protobuf's name

    @property
    def full_name(self) -> str: ...
    @property
    def fields(self) -> Sequence[FieldDescriptorLike]: ...
    @property
    def fields_by_name(self) -> Mapping[str, FieldDescriptorLike]: ...
    @property
    def nested_types(self) -> Sequence[MessageDescriptorLike]: ...


class UpbMessage(Protocol):
    """A message of upb's (`google.protobuf.message.Message`), as used here."""

    @property
    def DESCRIPTOR(self) -> MessageDescriptorLike: ...  # noqa: N802 - protobuf's name
    def ByteSize(self) -> int: ...  # noqa: N802 - protobuf's name
    def CopyFrom(self, other: UpbMessage, /) -> None: ...  # noqa: N802 - protobuf's name
    def DiscardUnknownFields(self) -> None: ...  # noqa: N802 - protobuf's name
    def HasField(self, name: str, /) -> bool: ...  # noqa: N802 - protobuf's name
    def ListFields(self) -> list[tuple[FieldDescriptorLike, object]]: ...  # noqa: N802
    def ParseFromString(self, data: bytes, /) -> int: ...  # noqa: N802 - protobuf's name
