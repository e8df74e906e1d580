"""Why a call failed, as the host reports it.

Raise `BadConfig` when the configuration is not what the processor takes and
`Failed` when it cannot do its work on this history. The host names the
processor and its hash around the message, so say what was wrong, not who
you are. Any other exception escaping `process` is reported as `Failed`
with its type, message and where it was raised.
"""


class ProcessorError(Exception):
    """A refusal to answer; the host then keeps the processor's input."""

    @property
    def message(self) -> str:
        """The text the host shows."""
        return str(self.args[0]) if self.args else ""


class BadConfig(ProcessorError):
    """The configuration is invalid; the message says which key and why."""


class Failed(ProcessorError):
    """The processor could not do its work; the message says why."""
