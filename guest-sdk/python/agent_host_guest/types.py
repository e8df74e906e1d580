"""The data a processor sees and returns: the types of the WIT contract
`agent-host:history@0.2.0` (`wit/v0.2.0/history.wit`).

Inside the component these are the classes componentize-py generates from the
WIT (`wit_world.imports.types`), so what the host sends needs no conversion. Outside it (an author's `python3 -m unittest`) they are the plain
dataclasses of `_native`, which have the same names, fields and order. The
build checks that the two agree (`agent_host_guest.selfcheck`).

Variants are one class per case, as componentize-py makes them: a text part is
`Part_Text(value="...")` (also exported as `TextPart`), an answer item is
`Item_Keep(3)`.
"""

from __future__ import annotations

from typing import List, Optional, Union

try:  # Inside the component: the generated classes.
    from wit_world.imports.types import (  # type: ignore[import-not-found]
        Description,
        Error_BadConfig,
        Error_Failed,
        FileRef,
        Header,
        Image,
        Item_Insert,
        Item_Keep,
        Item_Replace,
        MediaSource_Path,
        MediaSource_Url,
        Message,
        MessageFlags,
        Part_File,
        Part_Image,
        Part_Text,
        Reasoning,
        Replacement,
        Role,
        RunContext,
        Timestamp,
        ToolCall,
        Usage,
    )

    IN_COMPONENT = True
except ImportError:  # Natively: the same shapes, for tests.
    IN_COMPONENT = False
    from ._native import (  # type: ignore[assignment]
        Description,
        Error_BadConfig,
        Error_Failed,
        FileRef,
        Header,
        Image,
        Item_Insert,
        Item_Keep,
        Item_Replace,
        MediaSource_Path,
        MediaSource_Url,
        Message,
        MessageFlags,
        Part_File,
        Part_Image,
        Part_Text,
        Reasoning,
        Replacement,
        Role,
        RunContext,
        Timestamp,
        ToolCall,
        Usage,
    )


# Friendlier names for the variant cases.
TextPart = Part_Text
ImagePart = Part_Image
FilePart = Part_File
Part = Union[Part_Text, Part_Image, Part_File]
Item = Union[Item_Keep, Item_Replace, Item_Insert]

#: Every type of the contract, by its generated name (for the self-check).
CONTRACT_TYPES = {
    "Role": Role,
    "Timestamp": Timestamp,
    "MediaSource_Url": MediaSource_Url,
    "MediaSource_Path": MediaSource_Path,
    "Image": Image,
    "FileRef": FileRef,
    "Part_Text": Part_Text,
    "Part_Image": Part_Image,
    "Part_File": Part_File,
    "Reasoning": Reasoning,
    "ToolCall": ToolCall,
    "Usage": Usage,
    "MessageFlags": MessageFlags,
    "Message": Message,
    "Header": Header,
    "Replacement": Replacement,
    "Item_Keep": Item_Keep,
    "Item_Replace": Item_Replace,
    "Item_Insert": Item_Insert,
    "RunContext": RunContext,
    "Error_BadConfig": Error_BadConfig,
    "Error_Failed": Error_Failed,
    "Description": Description,
}


def message(
    role: Role,
    content: str = "",
    *,
    id: str = "",
    parts: Optional[List[Part]] = None,
    reasoning: Optional[Reasoning] = None,
    tool_calls: Optional[List[ToolCall]] = None,
    tool_call_id: Optional[str] = None,
    tool_name: Optional[str] = None,
    flags: Optional[MessageFlags] = None,
    metadata: Optional[str] = None,
) -> Message:
    """A message with `role` and `content`; every other field empty unless
    given. Messages a processor inserts are usually `synthetic()` ones.

    >>> message(Role.USER, "hello").content
    'hello'
    """
    return Message(
        id=id,
        role=role,
        content=content,
        parts=list(parts or []),
        reasoning=reasoning,
        tool_calls=list(tool_calls or []),
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        usage=None,
        model=None,
        timestamp=None,
        agent=None,
        channel=None,
        flags=flags if flags is not None else MessageFlags(0),
        metadata=metadata,
        tokens=0,
    )


def synthetic(role: Role, content: str) -> Message:
    """A message the processor wrote, flagged `synthetic` (the host gives it
    an id)."""
    return message(role, content, flags=MessageFlags.SYNTHETIC)


def tool_result(call_id: str, content: str, tool_name: Optional[str] = None) -> Message:
    """A tool's result for the call `call_id`."""
    return message(Role.TOOL, content, tool_call_id=call_id, tool_name=tool_name)


def text_pieces(m: Message) -> List[str]:
    """The content, then each text part, in order (empty ones included, so
    piece `k > 0` is the `k`-th text part)."""
    return [m.content] + [p.value for p in m.parts if isinstance(p, Part_Text)]


def text(m: Message) -> str:
    """The message's text: the non-empty pieces joined by a blank line (as the
    host's `Message::text`)."""
    return "\n\n".join(piece for piece in text_pieces(m) if piece)


def texts(m: Message) -> List[str]:
    """Every text a processor may read or rewrite, in order: the content, the
    text parts, readable reasoning and the tool-call arguments. Redacted
    (opaque) reasoning is left out: it is the provider's."""
    out = text_pieces(m)
    if m.reasoning is not None and not m.reasoning.redacted:
        out.append(m.reasoning.text)
    out.extend(call.arguments for call in m.tool_calls)
    return out


def set_texts(m: Message, new: List[str]) -> None:
    """Writes back what `texts(m)` gave, changed, in the same order and
    number."""
    it = iter(new)
    m.content = next(it)
    for k, part in enumerate(m.parts):
        if isinstance(part, Part_Text):
            m.parts[k] = Part_Text(next(it))
    if m.reasoning is not None and not m.reasoning.redacted:
        m.reasoning.text = next(it)
    for call in m.tool_calls:
        call.arguments = next(it)
    if next(it, None) is not None:
        raise ValueError("set_texts: more texts than the message has")


def is_synthetic(m: Message) -> bool:
    """Whether the host or an earlier stage wrote it."""
    return bool(m.flags & MessageFlags.SYNTHETIC)


def is_summary(m: Message) -> bool:
    """Whether it is part of a summary checkpoint."""
    return bool(m.flags & MessageFlags.SUMMARY)


def starts_turn(m: Message) -> bool:
    """Whether it starts a turn: a user message that is not synthetic."""
    return m.role == Role.USER and not is_synthetic(m)


def plural(n: int, word: str) -> str:
    """`word`, with an `s` unless `n` is 1, for log lines."""
    return word if n == 1 else word + "s"


def group_thousands(n: int) -> str:
    """`12345678` as `12,345,678`, for log lines."""
    return f"{n:,}"


__all__ = [name for name in CONTRACT_TYPES] + [
    "TextPart",
    "ImagePart",
    "FilePart",
    "Part",
    "Item",
    "IN_COMPONENT",
    "message",
    "synthetic",
    "tool_result",
    "text_pieces",
    "text",
    "texts",
    "set_texts",
    "is_synthetic",
    "is_summary",
    "starts_turn",
    "plural",
    "group_thousands",
]
