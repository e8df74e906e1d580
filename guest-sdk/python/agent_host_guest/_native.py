"""The contract's types as plain dataclasses, for running processors natively.

They mirror what componentize-py generates from `wit/v0.2.0/history.wit`
(same class names, fields and order); `agent_host_guest.selfcheck`, run by
every build, fails when they drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, Flag, auto
from typing import List, Optional, Union


class Role(Enum):
    """Who speaks in a message."""

    SYSTEM = 0
    USER = 1
    ASSISTANT = 2
    TOOL = 3


@dataclass
class Timestamp:
    """Seconds and nanoseconds since 1970-01-01T00:00:00Z."""

    seconds: int
    nanoseconds: int


@dataclass
class MediaSource_Url:
    """A media part's URL (a `data:` URL carries the bytes inline)."""

    value: str


@dataclass
class MediaSource_Path:
    """A path in the session's media folder."""

    value: str


@dataclass
class Image:
    """An image part: where it is, and its MIME type when known."""

    source: Union[MediaSource_Url, MediaSource_Path]
    mime_type: Optional[str]


@dataclass
class FileRef:
    """A reference to a file."""

    name: str
    path: str
    mime_type: Optional[str]


@dataclass
class Part_Text:
    """A piece of text."""

    value: str


@dataclass
class Part_Image:
    """An image."""

    value: Image


@dataclass
class Part_File:
    """A file reference."""

    value: FileRef


@dataclass
class Reasoning:
    """The model's reasoning for an assistant message."""

    text: str
    signature: Optional[str]
    redacted: bool


@dataclass
class ToolCall:
    """A tool call: its id, the tool's name, the JSON arguments' text."""

    id: str
    name: str
    arguments: str


@dataclass
class Usage:
    """Token usage reported by a provider."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: Optional[int]
    cache_write_tokens: Optional[int]


class MessageFlags(Flag):
    """Flags on a message."""

    SYNTHETIC = auto()
    SUMMARY = auto()
    ERROR = auto()


@dataclass
class Message:
    """One message of a conversation (see `message()` to build one)."""

    id: str
    role: Role
    content: str
    parts: List[Union[Part_Text, Part_Image, Part_File]]
    reasoning: Optional[Reasoning]
    tool_calls: List[ToolCall]
    tool_call_id: Optional[str]
    tool_name: Optional[str]
    usage: Optional[Usage]
    model: Optional[str]
    timestamp: Optional[Timestamp]
    agent: Optional[str]
    channel: Optional[str]
    flags: MessageFlags
    metadata: Optional[str]
    tokens: int


@dataclass
class Header:
    """What a structural processor reads of a message, without its strings."""

    role: Role
    flags: MessageFlags
    tokens: int
    timestamp: Optional[Timestamp]
    answers: Optional[int]
    tool_calls: int
    parts: int
    content_bytes: int
    reasoning_bytes: Optional[int]
    metadata_bytes: int
    usage: Optional[Usage]


@dataclass
class Replacement:
    """A new message in the place of input message `index`."""

    index: int
    message: Message


@dataclass
class Item_Keep:
    """Keep the input message at this index."""

    value: int


@dataclass
class Item_Replace:
    """Put a new message where an input message was."""

    value: Replacement


@dataclass
class Item_Insert:
    """Insert a new message here."""

    value: Message


@dataclass
class RunContext:
    """What the host tells a processor about the run."""

    session_key: Optional[str]
    agent: Optional[str]
    model: Optional[str]
    context_window: int
    budget: int
    total_tokens: int
    turn: int
    usage: Usage
    now: Timestamp
    config: str


@dataclass
class Error_BadConfig:
    """The configuration is invalid."""

    value: str


@dataclass
class Error_Failed:
    """The processor failed."""

    value: str


@dataclass
class Description:
    """What a processor says about itself."""

    name: str
    version: str
    summary: str
    config_schema: Optional[str]
    config_example: Optional[str]
    reorders: bool


class Level(Enum):
    """The level of a log line (the `host` interface)."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4
