"""The scan: finds secrets in a text, left to right, and replaces them.

The rule (the Rust processor's crate doc, "The scan"): at each position the
enabled kinds are tried in priority order, extra patterns last, and the first
that matches wins; the scan goes on after its match, or at the next character
when none matches. The code below only finds, cheaply, the positions where
some kind can start: one regex search for the built-in kinds' literal
triggers, the next `@` for e-mail addresses, and each extra pattern's next
match (remembered until the scan passes it).
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Pattern, Set, Tuple, Union

from agent_host_guest import BadConfig

from .kinds import BUILTINS, BY_NAME, EMAIL, Hit, Kind

if TYPE_CHECKING:
    from . import Config

#: The characters of an e-mail address's local part.
_LOCAL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-")
_NAME_OK = re.compile(r"[A-Za-z0-9_.-]+\Z", re.ASCII)
_LITERAL_START = re.compile(r"[A-Za-z0-9_-]*", re.ASCII)


class _Never:
    """No match in the rest of the text."""


#: An extra pattern's next match: not looked for yet (None), found, or never.
NEVER = _Never()
Next = Union[None, Hit, _Never]


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def literal_prefix(pattern: str) -> Optional[str]:
    """The literal text every match of `pattern` starts with, if it is plain
    to see: the ASCII letters, digits, `_` and `-` it opens with (after a
    `\\b`), less the last one when a quantifier follows it. None when the
    pattern has a `|` anywhere (an alternative could start otherwise)."""
    if "|" in pattern:
        return None
    rest = pattern[2:] if pattern.startswith(r"\b") else pattern
    prefix = _LITERAL_START.match(rest).group()
    if rest[len(prefix) : len(prefix) + 1] in ("*", "+", "?", "{"):
        prefix = prefix[:-1]
    return prefix or None


def _unsupported(pattern: str) -> Optional[str]:
    """The first construct of `pattern` that Rust's `regex-lite` (the
    specification's engine) does not have, so that a configuration the Rust
    processor refuses is refused here too."""
    parser = getattr(re, "_parser", None)
    if parser is None:  # Not this CPython's internals: skip the check.
        return None
    names = {
        parser.ASSERT: "look-around",
        parser.ASSERT_NOT: "look-around",
        parser.GROUPREF: "back-reference",
        parser.GROUPREF_EXISTS: "conditional group",
        parser.ATOMIC_GROUP: "atomic group",
        parser.POSSESSIVE_REPEAT: "possessive repetition",
    }

    def walk(items: object) -> Optional[str]:
        for op, arg in items:  # type: ignore[attr-defined]
            if op in names:
                return names[op]
            for sub in arg if isinstance(arg, (list, tuple)) else ():
                if isinstance(sub, parser.SubPattern):
                    found = walk(sub)
                elif isinstance(sub, list) and all(isinstance(s, parser.SubPattern) for s in sub):
                    found = next((f for f in map(walk, sub) if f), None)
                else:
                    found = None
                if found:
                    return found
        return None

    return walk(parser.parse(pattern, re.ASCII))


@dataclass
class Extra:
    """A pattern from `extra`."""

    name: str
    regex: Pattern[str]
    #: Whether it has a group named `secret`.
    secret_group: bool
    #: What every match starts with, when the pattern says so plainly: the
    #: regex only runs where it occurs.
    prefix: Optional[str]

    def find(self, text: str, start: int) -> Union[Hit, _Never]:
        """The pattern's first usable match at or after `start`: not empty,
        and with a non-empty `secret` group when it has that group."""
        while start <= len(text):
            if self.prefix is not None:
                start = text.find(self.prefix, start)
                if start < 0:
                    return NEVER
            m = self.regex.search(text, start)
            if m is None:
                return NEVER
            s, e = m.span("secret") if self.secret_group else m.span()
            if s >= 0 and e > s:
                return Hit(m.start(), m.end(), s, e)
            start = m.start() + 1
        return NEVER


def next_email(text: str, floor: int, search: int) -> Optional[Tuple[int, int]]:
    """The first e-mail candidate with an `@` at or after `search`: where its
    local part starts (the longest run of local-part characters before the
    `@`, not reaching before `floor`) and the `@`."""
    while True:
        at = text.find("@", search)
        if at < 0:
            return None
        start = at
        while start > floor and text[start - 1] in _LOCAL:
            start -= 1
        if start < at:
            return start, at
        search = at + 1


class Redactor:
    """The secrets a configuration looks for, compiled once and applied to
    any number of texts.

    >>> from redact_secrets import Config
    >>> r = Redactor(Config())
    >>> r.redact("psql postgres://app:hunter2@db.internal/app")
    'psql postgres://app:[REDACTED:url-password]@db.internal/app'
    >>> r.redact("nothing to see") is None
    True
    """

    def __init__(self, config: "Config"):
        """Compiles `config`, or raises `BadConfig` saying what is wrong."""
        if config.kinds is None:
            builtins = [k for k in BUILTINS if k is not EMAIL]
        else:
            for name in config.kinds:
                if name not in BY_NAME:
                    valid = ", ".join(k.name for k in BUILTINS)
                    raise BadConfig(
                        f"unknown kind {_quoted(name)} in `kinds`; the kinds are {valid}"
                    )
            builtins = [k for k in BUILTINS if k.name in config.kinds]
        if config.emails and EMAIL not in builtins:
            builtins.append(EMAIL)
        self.builtins: List[Kind] = builtins
        self.email = EMAIL in builtins

        self.extras: List[Extra] = []
        for pattern in config.extra:
            name = pattern.name
            if not _NAME_OK.match(name):
                raise BadConfig(
                    f"extra pattern name {_quoted(name)}: use ASCII letters, digits, `-`, `_` and `.`"
                )
            if name in BY_NAME or any(e.name == name for e in self.extras):
                raise BadConfig(
                    f"extra pattern name {_quoted(name)} is already taken; give each pattern its own name"
                )
            try:
                regex = re.compile(pattern.pattern, re.ASCII)
                unsupported = _unsupported(pattern.pattern)
            except re.error as e:
                raise BadConfig(f"extra pattern {_quoted(name)} is not a valid regex: {e}") from None
            if unsupported:
                raise BadConfig(
                    f"extra pattern {_quoted(name)} is not a valid regex: {unsupported} is not supported"
                )
            if regex.search("") is not None:
                raise BadConfig(
                    f"extra pattern {_quoted(name)} matches the empty string; it must match at least one character"
                )
            self.extras.append(
                Extra(name, regex, "secret" in regex.groupindex, literal_prefix(pattern.pattern))
            )
        if not self.builtins and not self.extras:
            raise BadConfig(
                "nothing to look for: `kinds` is empty, `emails` is false and there is no `extra` pattern"
            )
        if not config.placeholder:
            raise BadConfig(
                "`placeholder` is empty; a reader could not tell that something was removed"
            )
        names = [k.name for k in self.builtins] + [e.name for e in self.extras]
        self.placeholders: List[str] = [config.placeholder.replace("{kind}", n) for n in names]

        # Where a built-in kind may start, and what each kind starts with.
        triggers = [k.trigger for k in self.builtins if k.trigger is not None]
        self._triggers: Optional[Pattern[str]] = (
            re.compile("|".join(triggers), re.ASCII) if triggers else None
        )
        if self.email:
            triggers.append("@")
        self._candidate: Optional[Pattern[str]] = (
            re.compile("|".join(triggers), re.ASCII) if triggers else None
        )
        self._starts: List[Optional[Pattern[str]]] = [
            re.compile(k.trigger, re.ASCII) if k.trigger is not None else None
            for k in self.builtins
        ]

        # A placeholder that would itself be redacted would make a second run
        # change the text again.
        for placeholder in self.placeholders:
            found = self.matches(placeholder)
            if found:
                raise BadConfig(
                    f"`placeholder` {_quoted(placeholder)} would itself be redacted as {found[0][0]}; choose one that holds no secret"
                )

    def candidates(self, texts: List[List[str]]) -> Optional[Set[int]]:
        """Of a history's messages, given as each one's texts, the indices of
        those where a secret may be: one search over all the texts at once,
        for a built-in kind's trigger or an `@`. None (all may) when there are
        extra patterns, which could start anywhere."""
        if self.extras:
            return None
        pattern = self._candidate
        if pattern is None:
            return set()
        # Texts joined by NUL, which no trigger holds, so a trigger found in
        # the joined text lies within one message.
        ends = list(itertools.accumulate(sum(len(t) + 1 for t in m) for m in texts))
        joined = "\0".join("\0".join(m) for m in texts)
        found: Set[int] = set()
        for m in pattern.finditer(joined):
            found.add(bisect.bisect_right(ends, m.start()))
        return found

    def kind_count(self) -> int:
        """How many kinds run: the built-in ones, then the extra patterns."""
        return len(self.placeholders)

    def kind_name(self, index: int) -> str:
        """The name of kind `index` (see `kind_count`)."""
        if index < len(self.builtins):
            return self.builtins[index].name
        return self.extras[index - len(self.builtins)].name

    def redact(self, text: str, counts: Optional[List[int]] = None) -> Optional[str]:
        """`text` with its secrets replaced, or None when it holds none. Adds
        one to `counts[kind]` for each secret replaced, when given."""
        found = self.scan(text)
        if not found:
            return None
        out = []
        copied = 0
        for kind, start, end in found:
            out.append(text[copied:start])
            out.append(self.placeholders[kind])
            copied = end
            if counts is not None:
                counts[kind] += 1
        out.append(text[copied:])
        return "".join(out)

    def matches(self, text: str) -> List[Tuple[str, int, int]]:
        """The secrets in `text`: each one's kind name and where it is."""
        return [(self.kind_name(k), s, e) for k, s, e in self.scan(text)]

    def _next_trigger(self, text: str, start: int) -> int:
        if self._triggers is None:
            return len(text)
        m = self._triggers.search(text, start)
        return m.start() if m else len(text)

    def scan(self, text: str) -> List[Tuple[int, int, int]]:
        """The secrets in `text`, left to right: (kind index, start, end) of
        each part to replace."""
        n = len(text)
        found: List[Tuple[int, int, int]] = []
        if not self.email and not self.extras and self._next_trigger(text, 0) >= n:
            return found  # The common case: nothing can start anywhere.
        # The next e-mail candidate: where its local part starts, and its `@`.
        email: Optional[Tuple[int, int]] = None
        email_from = 0
        extras: List[Next] = [None] * len(self.extras)
        # The end of the last replacement and its kind, for the character
        # before a position as it stands in the output.
        last: Optional[Tuple[int, int]] = None
        trigger = self._next_trigger(text, 0)
        i = 0
        while i < n:
            if trigger < i:
                trigger = self._next_trigger(text, i)
            c = trigger
            if self.email:
                if email is not None and email[0] < i:
                    email = None
                if email is None and email_from < n:
                    email = next_email(text, i, max(email_from, i))
                    email_from = email[1] if email is not None else n
                if email is not None:
                    c = min(c, email[0])
            for x, extra in enumerate(self.extras):
                nxt = extras[x]
                if isinstance(nxt, Hit) and nxt.start < i:
                    nxt = None
                if nxt is None:
                    nxt = extras[x] = extra.find(text, i)
                if isinstance(nxt, Hit):
                    c = min(c, nxt.start)
            if c >= n:
                break

            if last is not None and last[0] == c:
                prev: Optional[str] = self.placeholders[last[1]][-1]
            else:
                prev = text[c - 1] if c > 0 else None
            hit: Optional[Tuple[int, Hit]] = None
            for k, kind in enumerate(self.builtins):
                if kind is EMAIL:
                    if email is None or email[0] != c:
                        continue
                else:
                    start = self._starts[k]
                    if start is None or not start.match(text, c):
                        continue
                h = kind.match_at(text, c, prev)
                if h is None:
                    continue
                if kind.name == "bearer-token" and self._taken_by_another(text, h.secret_start):
                    continue
                if text[h.secret_start : h.secret_end] != self.placeholders[k]:
                    hit = (k, h)
                    break
            if hit is None:
                for x, nxt in enumerate(extras):
                    k = len(self.builtins) + x
                    if (
                        isinstance(nxt, Hit)
                        and nxt.start == c
                        and text[nxt.secret_start : nxt.secret_end] != self.placeholders[k]
                    ):
                        hit = (k, nxt)
                        break
            if hit is not None:
                k, h = hit
                found.append((k, h.secret_start, h.secret_end))
                last = (h.secret_end, k)
                i = h.end
            else:
                # An address that fails at the start of its local part fails
                # from every later start too: go past its `@`.
                if email is not None and email[0] == c:
                    email_from = email[1] + 1
                    email = None
                i = c + 1
        return found

    def _taken_by_another(self, text: str, at: int) -> bool:
        """Whether another built-in kind matches where a bearer token starts
        (it is then typed by that kind, which the scan reaches next)."""
        prev = text[at - 1] if at > 0 else None
        return any(
            kind.name != "bearer-token" and kind.match_at(text, at, prev) is not None
            for kind in self.builtins
        )
