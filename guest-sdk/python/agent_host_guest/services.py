"""The host services a processor may ask for (contract 0.2.0): a summary
written by the session's model, token counts with the session's tokenizer,
and a read of the session's long-term memory.

Each is closed unless the user grants it to the processor
(`--allow-summarize`, `--allow-count-tokens`, `--allow-memory`, or
`allow_summarize = true` ... in its `[[processors]]` entry), and each call
spends the processor's budget for the run. A call that is not granted, or
over the budget, or that fails raises a `ServiceError` (`ServiceDenied`,
`ServiceOverBudget`, `ServiceFailed`), never a trap: catch it, usually by
leaving the history as it is:

    try:
        summary = summarize("Summarize in one line.", text)
    except ServiceError as e:
        warn(f"no summary ({e}); the history is kept")
        return

The host calls the model: the processor never sees a key or an endpoint.
Natively (an author's tests), `summarize` answers with what
`testing.serve_summaries` set (else it raises `ServiceFailed`),
`count_tokens` with the host's default estimate, and `read_memory` with no
facts, as the Rust SDK does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional

from .host import estimate_tokens
from .types import IN_COMPONENT, Timestamp

if IN_COMPONENT:
    from componentize_py_types import Err  # type: ignore[import-not-found]
    from wit_world.imports import services as _services  # type: ignore[import-not-found]
else:
    _services = None


class ServiceError(Exception):
    """Why a host service gave no answer. `kind` is `"denied"`,
    `"over-budget"` or `"failed"` (the contract's names); `message` is the
    host's reason; `str(e)` says both as the Rust SDK's error does
    (`"denied: ..."`, `"over budget: ..."`, `"failed: ..."`)."""

    kind = ""

    @property
    def message(self) -> str:
        """The host's reason."""
        return str(self.args[0]) if self.args else ""

    def __str__(self) -> str:
        return f"{self.kind.replace('-', ' ')}: {self.message}"


class ServiceDenied(ServiceError):
    """The user has not granted the service to this processor; the message
    names the grant that would open it."""

    kind = "denied"


class ServiceOverBudget(ServiceError):
    """The call would go over the processor's budget for the run (calls,
    model tokens or time); the message says which."""

    kind = "over-budget"


class ServiceFailed(ServiceError):
    """The service was tried and failed (the model refused or timed out, no
    model or memory is configured); the message says why."""

    kind = "failed"


@dataclass
class SummaryCaps:
    """What a processor asks of one `summarize` call; the host lowers each
    cap to what the budget leaves. 0 (the default) is the host's cap."""

    #: The most tokens the summary may take.
    max_tokens: int = 0
    #: The most time the call may take, in milliseconds.
    timeout_ms: int = 0


@dataclass
class Summary:
    """A summary the model wrote, and what it cost."""

    #: Its text.
    text: str
    #: Tokens the model read.
    input_tokens: int
    #: Tokens the model wrote.
    output_tokens: int


@dataclass
class Fact:
    """A fact of the session's long-term memory."""

    #: Its id.
    id: str
    #: What it is about.
    entity: str
    #: The fact, as a sentence.
    text: str
    #: The single-valued attribute it fills.
    attribute: Optional[str]
    #: The attribute's value.
    value: Optional[str]
    #: When it was recorded.
    recorded: Timestamp


#: What answers `summarize` natively: (prompt, text) to the summary's text,
#: or a `ServiceError` raised. Set by `testing.serve_summaries`.
native_summaries: Optional[Callable[[str, str], str]] = None


def _error(e: object) -> ServiceError:
    """The SDK's error for the generated `service-error` case `e`."""
    name = type(e).__name__
    reason = str(getattr(e, "value", e))
    if name.endswith("_Denied"):
        return ServiceDenied(reason)
    if name.endswith("_OverBudget"):
        return ServiceOverBudget(reason)
    return ServiceFailed(reason)


def summarize(prompt: str, text: str, caps: Optional[SummaryCaps] = None) -> Summary:
    """Has the session's model write `text` up as `prompt` (the instructions)
    asks, within `caps`. Blocks while the model answers; the time is not
    counted against the processor's deadline. Needs the `summarize` grant;
    raises a `ServiceError` when it gives no summary."""
    caps = caps if caps is not None else SummaryCaps()
    if _services is not None:
        try:
            wit_caps = _services.SummarizeCaps(caps.max_tokens, caps.timeout_ms)
            s = _services.summarize(prompt, text, wit_caps)
        except Err as e:
            raise _error(e.value) from None
        return Summary(s.text, s.input_tokens, s.output_tokens)
    if native_summaries is None:
        raise ServiceFailed(
            "no summaries are served outside WebAssembly unless a test sets them "
            "(testing.serve_summaries)"
        )
    answer = native_summaries(prompt, text)
    return Summary(
        answer,
        estimate_tokens(prompt) + estimate_tokens(text),
        estimate_tokens(answer),
    )


def count_tokens(text: str) -> int:
    """The number of tokens `text` takes with the session's tokenizer. Needs
    the `count-tokens` grant (`estimate_tokens` needs none, and is the host's
    quick estimate); raises a `ServiceError` when it gives no count."""
    if _services is not None:
        try:
            return _services.count_tokens(text)
        except Err as e:
            raise _error(e.value) from None
    return estimate_tokens(text)


def read_memory(query: str, limit: int) -> List[Fact]:
    """The facts of the session's long-term memory that best match `query`
    (the newest for an empty one), at most `limit` (the host caps it): the
    run's user's facts with the run's agent only. Needs the `memory` grant;
    raises a `ServiceError` when it reads none."""
    if _services is not None:
        try:
            facts = _services.read_memory(query, limit)
        except Err as e:
            raise _error(e.value) from None
        return [Fact(f.id, f.entity, f.text, f.attribute, f.value, f.recorded) for f in facts]
    return []
