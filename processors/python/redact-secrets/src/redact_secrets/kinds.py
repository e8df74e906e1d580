"""The built-in kinds of secret: each one's name, literal trigger, pattern and
the checks a match must pass.

This follows the specification in the Rust processor's crate doc
(`processors/redact-secrets/src/lib.rs`, "The scan" and "The kinds") and uses
the same patterns, less their `\\A`: they are matched *at* a position with
`pattern.match(text, pos)`. Every pattern is compiled with `re.ASCII`, so
that `(?i:...)` folds ASCII letters only, as Rust's `regex-lite` does (in
Unicode mode Python would also take `ſ` for `s` and the Kelvin sign for `k`).
Every class a pattern or check looks at is ASCII, so counting positions in
code points (Python) rather than bytes (Rust) finds the same secrets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Pattern

ASCII_DIGITS = frozenset("0123456789")
ASCII_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
ASCII_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
ASCII_ALNUM = ASCII_DIGITS | ASCII_UPPER | ASCII_LOWER
#: What may not stand right before a token (so `task-sk-list` holds no key).
WORD = ASCII_ALNUM | frozenset("_-")

_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=]{16}", re.ASCII)


@dataclass(frozen=True)
class Hit:
    """Where a kind matched: the match, and the part that is replaced."""

    start: int
    end: int
    secret_start: int
    secret_end: int


def is_mixed(s: str) -> bool:
    """At least one ASCII digit, one uppercase and one lowercase letter:
    random keys have all three, words and identifiers rarely do."""
    chars = set(s)
    return bool(chars & ASCII_DIGITS and chars & ASCII_UPPER and chars & ASCII_LOWER)


@dataclass(frozen=True)
class Kind:
    """A built-in kind of secret.

    `trigger` is a regex for the text every match starts with; the scan only
    tries the pattern where it matches. Triggers are written as plain
    alternations and classes (`[sS][eE]...` rather than `(?i:...)`, `xox[a-z]-`
    rather than 26 literals) so that `re` can skip ahead on their first
    characters: that makes the search several times faster.

    `check(text, start, end, secret_start, secret_end)` is the test a match
    must pass besides the pattern.
    """

    name: str
    pattern: str
    trigger: Optional[str]
    boundary: bool
    check: Callable[[str, int, int, int, int], bool]

    def compiled(self) -> Pattern[str]:
        """The pattern, compiled (at import, so at build time: the
        component's snapshot holds it)."""
        return _COMPILED[self.name]

    def match_at(self, text: str, at: int, prev: Optional[str]) -> Optional[Hit]:
        """The kind's match at `at` of `text`, if it has one there. `prev` is
        the character before `at` as it stands in the redacted text (the
        placeholder's last one right after a redaction), `None` at the
        start."""
        if self.boundary and prev is not None and prev in WORD:
            return None
        m = self.compiled().match(text, at)
        if m is None:
            return None
        if m.re.groups:
            secret_start, secret_end = m.span("secret")
        else:
            secret_start, secret_end = m.span()
        if not self.check(text, at, m.end(), secret_start, secret_end):
            return None
        return Hit(at, m.end(), secret_start, secret_end)


def _after(text: str, end: int) -> str:
    return text[end] if end < len(text) else ""


def _always(text: str, start: int, end: int, s: int, e: int) -> bool:
    return True


def _private_key(text: str, start: int, end: int, s: int, e: int) -> bool:
    # Some key material: markers quoted in prose or code are left alone.
    return _BASE64_RUN.search(text, start, end) is not None


def _anthropic(text: str, start: int, end: int, s: int, e: int) -> bool:
    return is_mixed(text[start + len("sk-ant-") : end])


def _openai(text: str, start: int, end: int, s: int, e: int) -> bool:
    # An Anthropic key is never an OpenAI key, even when that kind is off.
    return not text.startswith("sk-ant-", start) and is_mixed(text[start + len("sk-") : end])


def _aws_access(text: str, start: int, end: int, s: int, e: int) -> bool:
    return _after(text, end) not in ASCII_ALNUM


def _aws_secret(text: str, start: int, end: int, s: int, e: int) -> bool:
    after = _after(text, end)
    return after == "" or (after not in ASCII_ALNUM and after not in "/+=")


def _slack_token(text: str, start: int, end: int, s: int, e: int) -> bool:
    return any(c in ASCII_DIGITS for c in text[start:end])


def _bearer(text: str, start: int, end: int, s: int, e: int) -> bool:
    token = text[s:e]
    return len(token) >= 16 and any(c in ASCII_DIGITS for c in token)


def _url_password(text: str, start: int, end: int, s: int, e: int) -> bool:
    return text[s] not in "${"


#: Every built-in kind, in priority order: at one position, the first kind
#: that matches wins. The patterns are the Rust processor's, without `\A`.
BUILTINS: List[Kind] = [
    Kind(
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=:, \t\r\n\\-]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=:, \t\r\n\\-]*)",
        "-----BEGIN ",
        False,
        _private_key,
    ),
    Kind("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{16,}", "sk-ant-", True, _anthropic),
    Kind("openai-key", r"sk-[A-Za-z0-9_-]{20,}", "sk-", True, _openai),
    Kind("aws-access-key", r"(?:AKIA|ASIA)[A-Z0-9]{16}", "A[KS]IA", True, _aws_access),
    Kind(
        "aws-secret-key",
        r"""(?i:secret_?access_?key)(?:\\?["'])?[ \t]*(?:=>|:|=)[ \t]*(?:\\?["'])?(?P<secret>[A-Za-z0-9/+]{40})""",
        "[sS][eE][cC][rR][eE][tT]",
        False,
        _aws_secret,
    ),
    Kind(
        "github-token",
        r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
        "gh[pousr]_|github_pat_",
        True,
        _always,
    ),
    Kind(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/-]{20,})",
        r"hooks\.slack\.com/",
        False,
        _always,
    ),
    Kind(
        "slack-token",
        r"(?:xox[a-z]|xapp)-[A-Za-z0-9-]{10,}",
        "xox[a-z]-|xapp-",
        True,
        _slack_token,
    ),
    Kind(
        "bearer-token",
        r"(?i:bearer)[ \t]+(?P<secret>[A-Za-z0-9._~+/-]+=*)",
        "[bB][eE][aA][rR][eE][rR]",
        True,
        _bearer,
    ),
    Kind(
        "url-password",
        r"""://[^\t\n\x0B\x0C\r :/?#@\[\]"'<>\\`]*:(?P<secret>[^\t\n\x0B\x0C\r /?#"'<>\\`]+)@""",
        "://",
        False,
        _url_password,
    ),
    Kind(
        "email",
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
        None,  # Found from the `@` back (see the redactor).
        False,
        _always,
    ),
]

BY_NAME: Dict[str, Kind] = {kind.name: kind for kind in BUILTINS}
EMAIL = BY_NAME["email"]
_COMPILED: Dict[str, Pattern[str]] = {k.name: re.compile(k.pattern, re.ASCII) for k in BUILTINS}
