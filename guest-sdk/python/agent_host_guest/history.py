"""The history a processor edits: the input messages, what has been dropped,
changed or inserted so far, and the structure processors reason about (turns,
tool exchanges)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from .types import (
    Item,
    Item_Insert,
    Item_Keep,
    Item_Replace,
    Message,
    Replacement,
    Role,
    RunContext,
    is_summary,
    starts_turn,
)


class History:
    """The session's history for one call, and the edits made to it so far.

    Every input message starts out kept. `drop`, `retain` and the structural
    helpers drop messages, `replace` and `message_mut` change one,
    `insert_before` and `push` add new ones. Reads (`messages`, `[i]`) see the
    current contents, indices are always those of the input, and nothing is
    ever reordered. Only changed and new messages go back to the host; kept
    ones are named by their index.

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
        self.context: RunContext = ctx
        """What the host says about this call (session, model, budget, time,
        the configuration's text)."""
        self._messages = messages
        self._dropped = [False] * len(messages)
        self._changed = [False] * len(messages)
        # New messages with the input index they go before, in the order added.
        self._inserts: List[Tuple[int, Message]] = []
        # Which call each input result answers, as in the input.
        self._callers: Optional[List[Optional[int]]] = None

    @classmethod
    def for_test(cls, messages: List[Message], config: str = "{}") -> "History":
        """A history with a default run context, for tests."""
        from .testing import context

        return cls(context(config), messages)

    def __len__(self) -> int:
        """How many messages the input had."""
        return len(self._messages)

    def __getitem__(self, index: int) -> Message:
        """Message `index`, as it is now (read it; to change it, use
        `message_mut`)."""
        return self._messages[index]

    @property
    def messages(self) -> List[Message]:
        """The input's messages with the changes made so far (dropped ones
        included: see `is_kept`). Do not change them through this list."""
        return self._messages

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
        """Drops every kept message for which `keep` is false."""
        for i, m in enumerate(self._messages):
            if not self._dropped[i] and not keep(m):
                self._dropped[i] = True

    def replace(self, index: int, message: Message) -> None:
        """Replaces message `index` by `message` (it stays at its place)."""
        self.tool_callers()
        self._messages[index] = message
        self._changed[index] = True

    def message_mut(self, index: int) -> Message:
        """Message `index`, to change in place. The host receives it back as a
        replacement, so only ask for it when you change it."""
        self.tool_callers()
        self._changed[index] = True
        return self._messages[index]

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
        synthetic), oldest first."""
        return [
            i for i, m in enumerate(self._messages) if not self._dropped[i] and starts_turn(m)
        ]

    def tool_callers(self) -> List[Optional[int]]:
        """For each input message, the index of the message whose tool call it
        answers in the input (`None` for other messages and for results whose
        call is not in the history). A result answers the nearest earlier call
        with its id."""
        if self._callers is None:
            calls: Dict[str, int] = {}
            callers: List[Optional[int]] = [None] * len(self._messages)
            for i, m in enumerate(self._messages):
                if m.role == Role.TOOL and m.tool_call_id is not None:
                    callers[i] = calls.get(m.tool_call_id)
                for call in m.tool_calls:
                    calls[call.id] = i
            self._callers = callers
        return self._callers

    def tool_names(self) -> List[Optional[str]]:
        """For each message, the name of the tool whose result it is: its
        `tool_name`, or the name in the call it answers. `None` for messages
        that are not tool results or whose tool is unknown."""
        calls: Dict[str, str] = {}
        names: List[Optional[str]] = []
        for m in self._messages:
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
        tool exchange. Does nothing when there are no more than `turns`."""
        starts = self.turn_starts()
        if len(starts) <= turns:
            return
        cut = len(self) if turns == 0 else starts[len(starts) - turns]
        # A kept result after the cut whose call is before it pulls the cut
        # back, and the results between the old and the new cut may pull it
        # further.
        callers = self.tool_callers()
        checked = len(self)
        while cut < checked:
            earliest = min(
                (callers[i] for i in range(cut, checked) if not self._dropped[i] and callers[i] is not None),
                default=None,
            )
            checked = cut
            if earliest is not None and earliest < cut:
                cut = earliest
        for i in range(cut):
            m = self._messages[i]
            if m.role != Role.SYSTEM and not is_summary(m):
                self._dropped[i] = True

    def settle_tool_exchanges(self) -> None:
        """Makes the tool exchanges whole again after drops and changes: a
        kept result whose call was dropped, or taken out of its message, is
        dropped; a kept message whose calls lost all their results loses those
        calls (and is dropped when nothing else is left in it). Calls that had
        no result in the input are left alone."""
        callers = self.tool_callers()
        for i, c in enumerate(callers):
            if c is not None and not self._dropped[i]:
                call_id = self._messages[i].tool_call_id or ""
                gone = self._dropped[c] or not any(
                    k.id == call_id for k in self._messages[c].tool_calls
                )
                if gone:
                    self._dropped[i] = True
        # Calls whose results all went are taken out of their message.
        answered: Dict[int, Tuple[List[str], List[str]]] = {}
        for i, c in enumerate(callers):
            if c is not None:
                call_id = self._messages[i].tool_call_id or ""
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
        in order."""
        inserts = sorted(self._inserts, key=lambda entry: entry[0])
        items: List[Item] = []
        k = 0
        for i, m in enumerate(self._messages):
            while k < len(inserts) and inserts[k][0] == i:
                items.append(Item_Insert(inserts[k][1]))
                k += 1
            if self._dropped[i]:
                continue
            if self._changed[i]:
                items.append(Item_Replace(Replacement(i, m)))
            else:
                items.append(Item_Keep(i))
        items.extend(Item_Insert(new) for _, new in inserts[k:])
        return items

    def into_messages(self) -> List[Message]:
        """The output the host would build from these edits (without its
        validation and id assignment): what native tests compare."""
        out: List[Message] = []
        for item in self.into_items():
            if isinstance(item, Item_Keep):
                out.append(self._messages[item.value])
            elif isinstance(item, Item_Replace):
                out.append(item.value.message)
            else:
                out.append(item.value)
        return out
