"""The history a processor edits: the input's headers (role, flags, token
counts, which call a tool result answers), its messages fetched from the host
on first use, what has been dropped, changed or inserted so far, and the
structure processors reason about (turns, tool exchanges).

Under contract 0.2.0 the host does not copy the history into the processor:
the headers come in one call, and the whole messages (with their texts) only
when the processor first reads one. A processor that works on structure
alone (`keep_last_turns`, `headers`, `retain_headers`, `drop`) never pays
for text.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .types import (
    Header,
    Item,
    Item_Insert,
    Item_Keep,
    Item_Replace,
    Message,
    MessageFlags,
    Replacement,
    Role,
    RunContext,
)


def header_of(m: Message, answers: Optional[int] = None) -> Header:
    """The header of `m`: what the host sends for it (`answers` needs the
    history, so it is given)."""
    return Header(
        role=m.role,
        flags=m.flags,
        tokens=m.tokens,
        timestamp=m.timestamp,
        answers=answers,
        tool_calls=len(m.tool_calls),
        parts=len(m.parts),
        content_bytes=len(m.content.encode("utf-8")),
        reasoning_bytes=None if m.reasoning is None else len(m.reasoning.text.encode("utf-8")),
        metadata_bytes=0 if m.metadata is None else len(m.metadata.encode("utf-8")),
        usage=m.usage,
    )


def headers_of(messages: List[Message]) -> List[Header]:
    """The headers of `messages`, with the host's rule for `answers`: a tool
    result answers the nearest earlier message with a call of its id."""
    calls: Dict[str, int] = {}
    out: List[Header] = []
    for i, m in enumerate(messages):
        answers = None
        if m.role == Role.TOOL and m.tool_call_id is not None:
            answers = calls.get(m.tool_call_id)
        for call in m.tool_calls:
            calls[call.id] = i
        out.append(header_of(m, answers))
    return out


def starts_turn_header(h: Header) -> bool:
    """Whether a message with header `h` starts a turn: a user message that
    is not synthetic."""
    return h.role == Role.USER and not (h.flags & MessageFlags.SYNTHETIC)


class History:
    """The session's history for one call, and the edits made to it so far.

    Every input message starts out kept. `drop`, `retain`, `retain_headers`
    and the structural helpers drop messages, `replace` and `message_mut`
    change one, `insert_before` and `push` add new ones. Reads (`messages`,
    `[i]`) see the current contents, indices are always those of the input,
    and nothing is ever reordered. Only changed and new messages go back to
    the host; kept ones are named by their index.

    The headers (`headers`, `header(i)`) are always there; the first read of
    a whole message fetches every message from the host (once), so a
    processor that reads only headers pays for no text.

    >>> from agent_host_guest import History, Role, ToolCall, message, tool_result
    >>> h = History.for_test([
    ...     message(Role.USER, "weather?"),
    ...     message(Role.ASSISTANT, tool_calls=[ToolCall("c1", "weather", "{}")]),
    ...     tool_result("c1", "sunny"),
    ...     message(Role.ASSISTANT, "It is sunny."),
    ... ])
    >>> h.drop(1)                    # the call...
    >>> h.settle_tool_exchanges()    # ...takes its result with it
    >>> h.is_kept(2), h.kept()
    (False, 2)
    """

    def __init__(self, ctx: RunContext, messages: List[Message]):
        """A history given whole (native tests, contract 0.1.0): its headers
        are worked out here, and its messages count as fetched on first read,
        as in a component."""
        self._setup(ctx, headers_of(messages))
        self._unread: Optional[List[Message]] = messages
        self._source: Any = None

    @classmethod
    def from_host(cls, ctx: RunContext, source: Any) -> "History":
        """The host's history resource (contract 0.2.0): its headers now, its
        messages when first read. `source` has the resource's `len`,
        `headers(start, end)` and `messages(start, end)`."""
        h = cls.__new__(cls)
        n = source.len()
        h._setup(ctx, list(source.headers(0, n)))
        h._unread = None
        h._source = source
        return h

    def _setup(self, ctx: RunContext, headers: List[Header]) -> None:
        self.context: RunContext = ctx
        """What the host says about this call (session, model, budget, time,
        the configuration's text)."""
        n = len(headers)
        self._headers = headers
        self._messages: Optional[List[Message]] = None
        self._dropped = [False] * n
        self._changed = [False] * n
        # New messages with the input index they go before, in the order added.
        self._inserts: List[Tuple[int, Message]] = []
        # Which call each input result answers, as in the input.
        self._callers: List[Optional[int]] = [
            h.answers if h.answers is not None and h.answers < n else None for h in headers
        ]

    @classmethod
    def for_test(cls, messages: List[Message], config: str = "{}") -> "History":
        """A history with a default run context, for tests."""
        from .testing import context

        return cls(context(config), messages)

    def _load(self) -> List[Message]:
        """The whole messages, fetched on first use."""
        if self._messages is None:
            if self._source is not None:
                self._messages = list(self._source.messages(0, len(self._headers)))
            else:
                self._messages = self._unread if self._unread is not None else []
                self._unread = None
        return self._messages

    def __len__(self) -> int:
        """How many messages the input had."""
        return len(self._headers)

    def __getitem__(self, index: int) -> Message:
        """Message `index`, as it is now (read it; to change it, use
        `message_mut`). The first read fetches the messages."""
        return self._load()[index]

    @property
    def messages(self) -> List[Message]:
        """The input's messages with the changes made so far (dropped ones
        included: see `is_kept`). Do not change them through this list. The
        first read fetches them from the host, texts included."""
        return self._load()

    @property
    def headers(self) -> List[Header]:
        """The input's headers, as the host sent them: roles, flags, token
        counts, timestamps, tool links and sizes, without any text."""
        return self._headers

    def header(self, index: int) -> Header:
        """The header of message `index` as it is now (a changed message's is
        worked out from its new contents; its `answers` stays the input's)."""
        h = self._headers[index]
        if not self._changed[index]:
            return h
        return header_of(self._load()[index], h.answers)

    def is_loaded(self) -> bool:
        """Whether the whole messages have been fetched from the host:
        whether the processor read, changed or replaced a message (or
        settled tool exchanges that link a result to a call)."""
        return self._messages is not None

    def is_kept(self, index: int) -> bool:
        """Whether message `index` is still kept."""
        return not self._dropped[index]

    def kept(self) -> int:
        """How many input messages are still kept (changed ones included)."""
        return self._dropped.count(False)

    def drop(self, index: int) -> None:
        """Drops message `index` from the output."""
        self._dropped[index] = True

    def restore(self, index: int) -> None:
        """Keeps message `index` after all (undoes `drop`)."""
        self._dropped[index] = False

    def retain(self, keep: Callable[[Message], bool]) -> None:
        """Drops every kept message for which `keep` is false. Reads whole
        messages (see `retain_headers` for a test on headers alone)."""
        for i, m in enumerate(self._load()):
            if not self._dropped[i] and not keep(m):
                self._dropped[i] = True

    def retain_headers(self, keep: Callable[[Header], bool]) -> None:
        """Drops every kept message whose current header fails `keep`,
        without reading any text."""
        for i in range(len(self)):
            if not self._dropped[i] and not keep(self.header(i)):
                self._dropped[i] = True

    def replace(self, index: int, message: Message) -> None:
        """Replaces message `index` by `message` (it stays at its place)."""
        self._load()[index] = message
        self._changed[index] = True

    def message_mut(self, index: int) -> Message:
        """Message `index`, to change in place. The host receives it back as a
        replacement, so only ask for it when you change it."""
        m = self._load()[index]
        self._changed[index] = True
        return m

    def is_changed(self, index: int) -> bool:
        """Whether message `index` was replaced or changed."""
        return self._changed[index]

    def insert_before(self, index: int, message: Message) -> None:
        """Inserts a new message before input message `index` (`len(h)`
        appends). Several inserts at one place keep the order they were made
        in."""
        if not 0 <= index <= len(self):
            raise IndexError(f"insert_before({index}) in a history of {len(self)}")
        self._inserts.append((index, message))

    def push(self, message: Message) -> None:
        """Appends a new message after the last one."""
        self._inserts.append((len(self), message))

    def turn_starts(self) -> List[int]:
        """The indices where the kept turns start (a user message that is not
        synthetic), oldest first. Reads headers only."""
        return [
            i
            for i in range(len(self))
            if not self._dropped[i] and starts_turn_header(self.header(i))
        ]

    def tool_callers(self) -> List[Optional[int]]:
        """For each input message, the index of the message whose tool call it
        answers in the input (`None` for other messages and for results whose
        call is not in the history). A result answers the nearest earlier call
        with its id."""
        return self._callers

    def tool_names(self) -> List[Optional[str]]:
        """For each message, the name of the tool whose result it is: its
        `tool_name`, or the name in the call it answers. `None` for messages
        that are not tool results or whose tool is unknown. Reads the
        messages."""
        calls: Dict[str, str] = {}
        names: List[Optional[str]] = []
        for m in self._load():
            for call in m.tool_calls:
                calls[call.id] = call.name
            if m.role != Role.TOOL:
                names.append(None)
            elif m.tool_name is not None:
                names.append(m.tool_name)
            else:
                names.append(calls.get(m.tool_call_id or ""))
        return names

    def keep_last_turns(self, turns: int) -> None:
        """Keeps the last `turns` kept turns, system messages and summaries,
        and drops everything older. The cut moves back rather than split a
        tool exchange. Does nothing when there are no more than `turns`.
        Reads headers only."""
        starts = self.turn_starts()
        if len(starts) <= turns:
            return
        cut = len(self) if turns == 0 else starts[len(starts) - turns]
        # A kept result after the cut whose call is before it pulls the cut
        # back, and the results between the old and the new cut may pull it
        # further.
        callers = self._callers
        checked = len(self)
        while cut < checked:
            earliest = min(
                (
                    callers[i]
                    for i in range(cut, checked)
                    if not self._dropped[i] and callers[i] is not None
                ),
                default=None,
            )
            checked = cut
            if earliest is not None and earliest < cut:
                cut = earliest
        for i in range(cut):
            h = self.header(i)
            if h.role != Role.SYSTEM and not (h.flags & MessageFlags.SUMMARY):
                self._dropped[i] = True

    def settle_tool_exchanges(self) -> None:
        """Makes the tool exchanges whole again after drops and changes: a
        kept result whose call was dropped, or taken out of its message, is
        dropped; a kept message whose calls lost all their results loses those
        calls (and is dropped when nothing else is left in it). Calls that had
        no result in the input are left alone. Reads the messages only when
        some result answers a call."""
        callers = self._callers
        if all(c is None for c in callers):
            return
        messages = self._load()
        for i, c in enumerate(callers):
            if c is not None and not self._dropped[i]:
                call_id = messages[i].tool_call_id or ""
                gone = self._dropped[c] or not any(k.id == call_id for k in messages[c].tool_calls)
                if gone:
                    self._dropped[i] = True
        # Calls whose results all went are taken out of their message.
        answered: Dict[int, Tuple[List[str], List[str]]] = {}
        for i, c in enumerate(callers):
            if c is not None:
                call_id = messages[i].tool_call_id or ""
                kept, gone = answered.setdefault(c, ([], []))
                (gone if self._dropped[i] else kept).append(call_id)
        for c, (kept, gone) in answered.items():
            lost = [g for g in gone if g not in kept]
            if self._dropped[c] or not lost:
                continue
            m = self.message_mut(c)
            m.tool_calls = [call for call in m.tool_calls if call.id not in lost]
            if not m.tool_calls and not m.content.strip() and not m.parts and m.reasoning is None:
                self._dropped[c] = True

    def into_items(self) -> List[Item]:
        """The answer for the host: one item per kept, changed or new message,
        in order. Messages never fetched cannot have changed."""
        inserts = sorted(self._inserts, key=lambda entry: entry[0])
        items: List[Item] = []
        k = 0
        for i in range(len(self)):
            while k < len(inserts) and inserts[k][0] == i:
                items.append(Item_Insert(inserts[k][1]))
                k += 1
            if self._dropped[i]:
                continue
            if self._changed[i] and self._messages is not None:
                items.append(Item_Replace(Replacement(i, self._messages[i])))
            else:
                items.append(Item_Keep(i))
        items.extend(Item_Insert(new) for _, new in inserts[k:])
        return items

    def into_messages(self) -> List[Message]:
        """The output the host would build from these edits (without its
        validation and id assignment): what native tests compare. Reads the
        messages."""
        items = self.into_items()
        messages = self._load()
        out: List[Message] = []
        for item in items:
            if isinstance(item, Item_Keep):
                out.append(messages[item.value])
            elif isinstance(item, Item_Replace):
                out.append(item.value.message)
            else:
                out.append(item.value)
        return out
