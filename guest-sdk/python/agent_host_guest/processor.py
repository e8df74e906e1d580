"""The `Processor` base class and `export`, which makes one the component's
`processor` export."""

from __future__ import annotations

import traceback
from typing import Any, ClassVar, List, Optional, Type, Union

from .config import NoConfig, parse_config, prepare
from .errors import BadConfig, Failed, ProcessorError
from .history import History
from .types import Description, Item, Message, RunContext


class Processor:
    """A history processor. Subclass it, set the class attributes, write
    `process`, and decorate the class with `@export`:

        @export
        class DropSystem(Processor):
            name = "drop-system"
            version = "0.1.0"
            summary = "Drops system messages"

            def process(self, history, config):
                history.retain(lambda m: m.role != Role.SYSTEM)
    """

    #: Short name (`keep-last-turns`), shown by `agent-host processor inspect`.
    name: ClassVar[str] = ""
    #: Its version (semver).
    version: ClassVar[str] = "0.1.0"
    #: What it does, in a sentence or two.
    summary: ClassVar[str] = ""
    #: The configuration's dataclass; every field should have a default.
    Config: ClassVar[Type[Any]] = NoConfig
    #: An example configuration, as JSON text.
    config_example: ClassVar[Optional[str]] = None
    #: The JSON Schema of the configuration, when you publish one.
    config_schema: ClassVar[Optional[str]] = None

    def process(self, history: History, config: Any) -> None:
        """Edits `history` in place: drop, replace and insert messages.
        Whatever it leaves untouched is kept as it was. Raise `BadConfig` or
        `Failed` to refuse; the host then keeps the input."""
        raise NotImplementedError

    @classmethod
    def describe(cls) -> Description:
        """The description the host asks for before the first call."""
        return Description(
            name=cls.name,
            version=cls.version,
            summary=cls.summary,
            config_schema=cls.config_schema,
            config_example=cls.config_example,
            reorders=False,
        )

    @classmethod
    def run(cls, ctx: RunContext, messages: Union[List[Message], History]) -> History:
        """One call: parse the configuration, run `process` over the history
        (a list of messages, or a `History` such as `History.from_host`
        makes), and return the edited history. Exceptions other than
        `BadConfig` and `Failed` become `Failed`, with where they were
        raised."""
        config = parse_config(ctx.config, cls.Config)
        history = messages if isinstance(messages, History) else History(ctx, messages)
        try:
            cls().process(history, config)
        except ProcessorError:
            raise
        except Exception as e:  # A bug: say what and where, not just "trap".
            frame = traceback.extract_tb(e.__traceback__)[-1]
            where = f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno}"
            raise Failed(f"{type(e).__name__}: {e} (at {where} in {frame.name})") from e
        return history


#: The processor the component exports (set by `export`).
exported: Optional[Type[Processor]] = None


def export(cls: Type[Processor]) -> Type[Processor]:
    """Makes `cls` the processor the component exports (one per component).
    Natively it only records the class, so the module can be imported by
    tests."""
    global exported
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no `name`")
    if exported is not None and exported is not cls:
        raise TypeError(f"a component exports one processor: {exported.__name__} already is")
    exported = cls
    prepare(cls.Config)
    return cls


def answer(cls: Type[Processor], ctx: RunContext, history: Any) -> List[Item]:
    """The items for the host (raises `BadConfig` or `Failed`). `history` is
    the host's history resource (contract 0.2.0), or a list of messages
    (0.1.0)."""
    if not isinstance(history, list):
        history = History.from_host(ctx, history)
    return cls.run(ctx, history).into_items()


__all__ = ["Processor", "export", "exported", "answer", "BadConfig", "Failed"]
