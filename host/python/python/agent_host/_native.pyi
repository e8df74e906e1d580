"""Type stubs of the extension module ``agent_host._native`` (Rust, PyO3)."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, Union

__version__: str

_StrPath = Union[str, "os.PathLike[str]"]

class History:
    """A history: messages in agent-host's model, with where they came from
    and the format they were read as. Immutable."""

    @staticmethod
    def from_path(path: _StrPath, format: Optional[str] = None) -> History:
        """Reads the history in the file at ``path``, in ``format`` or a
        detected one, within the default limits."""
    @staticmethod
    def from_string(text: str, format: Optional[str] = None, source: Optional[str] = None) -> History:
        """Reads a history from ``text`` (any supported format)."""
    @staticmethod
    def from_messages(messages: Any, format: Optional[str] = None) -> History:
        """Reads a history from Python objects (a list of message dicts, or a
        whole document such as an Anthropic request)."""
    @property
    def format(self) -> str:
        """The format it was read as (``openai``, ``jsonl``, ``claude-code``, ...)."""
    @property
    def source(self) -> str:
        """Where it came from: a path, ``<string>``, ``<messages>``, ``<run>``
        or ``session ID``."""
    @property
    def title(self) -> Optional[str]:
        """The title the source carries, if any."""
    @property
    def quarantined(self) -> List[str]:
        """Records of a line-based log that could not be read and were left out."""
    @property
    def tokens(self) -> int:
        """Its size in tokens, by agent-host's heuristic counter."""
    @property
    def roles(self) -> List[str]:
        """The roles of its messages, in order."""
    def violations(self) -> List[str]:
        """The provider rules it breaks; empty when it can be sent as it is."""
    def dumps(self, format: str = "openai") -> str:
        """The history as text in ``format`` (``openai``, ``anthropic``,
        ``responses``, ``pydantic-ai``, ``jsonl``)."""
    def to_messages(self, format: str = "openai") -> Any:
        """The history as Python objects in ``format``: a list of dicts (the
        request dict for ``anthropic``)."""
    def __len__(self) -> int: ...

class Processor:
    """A history processor: a WebAssembly component run in agent-host's sandbox."""

    def __init__(
        self,
        path: _StrPath,
        config: Union[None, str, Dict[str, Any], List[Any]] = None,
        *,
        deadline_ms: Optional[int] = None,
        memory_mib: Optional[int] = None,
        on_failure: str = "fail",
        on_invalid: str = "reject",
        allow_dirs: Sequence[_StrPath] = (),
        allow_clocks: bool = False,
        allow_random: bool = False,
    ) -> None:
        """Loads (compiles, or reads from the compile cache) the component at
        ``path``. ``on_failure`` is ``"fail"`` (raise) or ``"skip"`` (keep the
        input); ``on_invalid`` is ``"reject"`` or ``"repair"``."""
    @property
    def name(self) -> str:
        """The processor's name, from its description."""
    @property
    def version(self) -> str:
        """The processor's version, from its description."""
    @property
    def hash(self) -> str:
        """The SHA-256 of the component."""
    def describe(self) -> Dict[str, Any]:
        """What the component says of itself (name, version, summary, config
        schema and example, reorders)."""
    def run(self, history: Any, *, context_limit: Optional[int] = None) -> RunResult:
        """Runs this processor alone over ``history``."""

class RunResult:
    """What a run made: the resulting history and the report of every stage."""

    @property
    def history(self) -> History:
        """The history after the pipeline and the processors."""
    @property
    def report(self) -> Dict[str, Any]:
        """The report: ``input``, ``pipeline``, ``processors``, ``output``, ``failure``."""

class Store:
    """A session store: a folder, ``sqlite:PATH`` or a ``postgres://`` URL."""

    def __init__(self, spec: _StrPath) -> None:
        """Opens the store (a folder that does not exist is created)."""
    @property
    def spec(self) -> str:
        """The store's spec, any password redacted."""
    def session(self, key: str, *, agent: str = "default", title: Optional[str] = None) -> Session:
        """The session ``key`` of ``agent``, created when it has none yet."""
    def get(self, name: str, *, agent: str = "default") -> Optional[Session]:
        """The session ``name`` (an id, or a key of ``agent``) stands for, or ``None``."""
    def sessions(self) -> List[Session]:
        """Every session, most recently updated first."""
    def delete(self, name: str, *, agent: str = "default") -> None:
        """Deletes the session ``name`` stands for."""

class Memory:
    """Long-term memory beside a store's sessions (a folder, ``sqlite:PATH`` or a
    ``postgres://`` URL): facts about entities, scoped by user and agent, as dicts."""

    def __init__(self, spec: _StrPath) -> None:
        """Opens the store's memory."""
    @property
    def spec(self) -> str:
        """The store's spec, any password redacted."""
    def add(
        self,
        text: str,
        *,
        user: str,
        agent: str = "default",
        entity: Optional[str] = None,
        attribute: Optional[str] = None,
        value: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Adds a fact; ``{"fact", "duplicate", "invalidated"}``."""
    def extract(
        self, history: History, *, user: str, agent: str = "default", session: Optional[str] = None
    ) -> List[Dict[str, Any]]:
        """Adds the facts the offline extractor finds in ``history``."""
    def search(
        self,
        query: str,
        *,
        user: str,
        agent: Optional[str] = None,
        limit: int = 10,
        include_invalid: bool = False,
    ) -> List[Dict[str, Any]]:
        """The best matches, ``{"fact", "score"}``, best first."""
    def get(self, id: str, *, user: str) -> Dict[str, Any]:
        """Fact ``id`` of ``user`` (``NotFoundError`` when there is none)."""
    def list(
        self,
        *,
        user: str,
        agent: Optional[str] = None,
        entity: Optional[str] = None,
        after: Optional[str] = None,
        limit: int = 100,
    ) -> List[Dict[str, Any]]:
        """``user``'s facts, oldest first."""
    def update(
        self,
        id: str,
        *,
        user: str,
        text: Optional[str] = None,
        entity: Optional[str] = None,
        attribute: Optional[str] = None,
        value: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Changes fact ``id``; the fact as it is now."""
    def delete(self, id: str, *, user: str) -> None:
        """Deletes fact ``id`` of ``user``."""

class Session:
    """A stored session: an append-only log of messages."""

    @property
    def id(self) -> str:
        """The session's id (a UUID)."""
    @property
    def key(self) -> Optional[str]:
        """The session's key within its agent."""
    @property
    def agent(self) -> str:
        """The agent the session belongs to."""
    @property
    def title(self) -> Optional[str]:
        """The session's title."""
    @property
    def message_count(self) -> int:
        """Messages in the log when this object was made."""
    def append(self, messages: Any) -> int:
        """Appends messages durably; returns the new message count."""
    def load(self) -> History:
        """The whole log, in order."""
    def query(
        self,
        *,
        since: Optional[str] = None,
        until: Optional[str] = None,
        contains: Optional[str] = None,
        roles: Sequence[str] = (),
        limit: Optional[int] = None,
        include_forwarded: bool = False,
    ) -> History:
        """The messages that match every condition given."""
    def context(self, *, context_limit: Optional[int] = None) -> Dict[str, Any]:
        """The context report: what the next view holds, how close each summary trigger is."""
    def clear(self) -> None:
        """Removes every message and checkpoint of the log; the session stays."""
    def current(self) -> int:
        """The number of messages the log holds now."""
    def __len__(self) -> int: ...

def run(
    history: Any,
    processors: Sequence[Processor] = ...,
    *,
    context_limit: Optional[int] = None,
    response_reserve: Optional[int] = None,
    min_recent_messages: Optional[int] = None,
    compact: bool = True,
    pipeline: bool = True,
) -> RunResult:
    """Core's pipeline (unless ``pipeline=False``), then the processors."""

def formats() -> List[Tuple[str, bool]]:
    """Every supported format's name, with whether it can be written."""

def register_errors(classes: Dict[str, Type[BaseException]]) -> None:
    """Registers the exception class of each error kind (done by the package)."""
