"""The component's `processor` export, over the class `@export` chose.

Only imported inside the component: the build's entry module is

    import <the author's module>          # runs @export
    from agent_host_guest.component import Processor

and componentize-py wires this `Processor` class to the WIT export. It also
sends `print` (standard output, at `info`) and standard error (at `warn`) to
the host's log. An author never imports it.
"""

import io
import sys

from componentize_py_types import Err  # type: ignore[import-not-found]
from wit_world import exports  # type: ignore[import-not-found]

from . import processor as _processor
from .errors import BadConfig, Failed
from .host import Level, log
from .types import Error_BadConfig, Error_Failed


class _LogStream(io.TextIOBase):
    """Standard output or error, sent to the host's log a line at a time:
    with WASI stubbed out, writing to the real ones would trap."""

    def __init__(self, level: Level):
        self._level = level
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            log(self._level, line)
        return len(text)

    def flush(self) -> None:
        if self._pending:
            log(self._level, self._pending)
            self._pending = ""


sys.stdout = _LogStream(Level.INFO)
sys.stderr = _LogStream(Level.WARN)


def _chosen() -> type:
    if _processor.exported is None:
        raise RuntimeError("no processor: decorate your Processor subclass with @export")
    return _processor.exported


class Processor(exports.Processor):
    """The `processor` interface of the world `history-processor`."""

    def describe(self):  # type: ignore[no-untyped-def]
        return _chosen().describe()

    def process(self, ctx, history):  # type: ignore[no-untyped-def]
        # `history` is the host's history resource, borrowed for the call:
        # the SDK reads its headers, and its messages on first use.
        try:
            return _processor.answer(_chosen(), ctx, history)
        except BadConfig as e:
            raise Err(Error_BadConfig(e.message)) from None
        except Failed as e:
            raise Err(Error_Failed(e.message)) from None
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
