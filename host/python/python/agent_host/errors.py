"""The exceptions agent-host raises: one class per kind of error.

Every class derives from :class:`AgentHostError`, whose ``kind`` is the
stable name of the kind (the same names the CLI's exit codes and the
server's ``{"error": {"kind": ...}}`` bodies use). Where a built-in
exception means the same, the class derives from it too, so
``except ValueError`` catches a malformed history and ``except LookupError``
a missing session or file.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type


class AgentHostError(Exception):
    """Any error agent-host reports; ``kind`` names its kind."""

    kind: str = "internal"


class NotFoundError(AgentHostError, LookupError):
    """The session, message or file named does not exist."""

    kind = "not_found"


class ConflictError(AgentHostError):
    """The request conflicts with what exists (a taken key, a newer write)."""

    kind = "conflict"


class InvalidInputError(AgentHostError, ValueError):
    """The input is malformed or inconsistent (a bad history, a bad argument)."""

    kind = "invalid_input"


class LimitExceededError(InvalidInputError):
    """A size, count, time or memory limit was exceeded."""

    kind = "limit_exceeded"


class ProcessorFailedError(AgentHostError):
    """A history processor failed (trapped, ran out of time or memory, answered
    wrongly) under the ``fail`` policy, or could not be loaded.

    ``report`` holds the run's report (a dict) when the failure happened during
    a run, else ``None``.
    """

    kind = "processor_failed"
    report: Optional[Dict[str, Any]] = None


class ProviderFailedError(AgentHostError):
    """The model provider failed (after retries) or refused the request."""

    kind = "provider_failed"


class ConfigurationError(AgentHostError):
    """The configuration is wrong or incomplete."""

    kind = "configuration"


class StorageError(AgentHostError, OSError):
    """Reading or writing storage failed."""

    kind = "io"


class InternalError(AgentHostError):
    """A bug or an unexpected state in agent-host itself."""

    kind = "internal"


class UnauthorizedError(AgentHostError):
    """The caller did not say who it is, or its credential is wrong."""

    kind = "unauthorized"


class ForbiddenError(AgentHostError):
    """The caller is known but may not do this."""

    kind = "forbidden"


BY_KIND: Dict[str, Type[AgentHostError]] = {
    cls.kind: cls
    for cls in (
        NotFoundError,
        ConflictError,
        InvalidInputError,
        LimitExceededError,
        ProcessorFailedError,
        ProviderFailedError,
        ConfigurationError,
        StorageError,
        InternalError,
        UnauthorizedError,
        ForbiddenError,
    )
}
