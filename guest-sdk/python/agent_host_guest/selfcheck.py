"""Checks that the native mirror of the contract's types (`_native`) agrees
with what componentize-py generates from the WIT: same classes, same fields
in the same order, same enum and flag members; and that the host services'
types (`services`) match the generated `services` interface. The build runs it, so a
changed contract cannot leave native tests passing over stale shapes.

    python3 -m agent_host_guest.selfcheck BINDINGS_DIR

where BINDINGS_DIR holds the output of `componentize-py ... bindings`.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import sys
from typing import List


def differences(generated_module: object, native_module: object, names: List[str]) -> List[str]:
    """What differs between the two modules' classes `names`."""
    problems = []
    for name in names:
        gen = getattr(generated_module, name, None)
        nat = getattr(native_module, name, None)
        if gen is None or nat is None:
            problems.append(f"{name}: missing in {'the bindings' if gen is None else '_native'}")
            continue
        if dataclasses.is_dataclass(gen):
            g = [f.name for f in dataclasses.fields(gen)]
            n = [f.name for f in dataclasses.fields(nat)] if dataclasses.is_dataclass(nat) else []
        elif isinstance(gen, type) and issubclass(gen, enum.Enum):
            g = [m.name for m in gen]
            n = [m.name for m in nat] if isinstance(nat, type) and issubclass(nat, enum.Enum) else []
        else:
            continue
        if g != n:
            problems.append(f"{name}: generated {g}, native {n}")
    return problems


def service_differences(generated: object) -> List[str]:
    """What differs between the generated `services` interface and what
    `agent_host_guest.services` converts it to and from: the summary's and
    the fact's fields, the caps' fields, the error's cases."""
    from . import services

    problems = differences(generated, services, ["Summary", "Fact"])
    caps = getattr(generated, "SummarizeCaps", None)
    g = [f.name for f in dataclasses.fields(caps)] if dataclasses.is_dataclass(caps) else []
    n = [f.name for f in dataclasses.fields(services.SummaryCaps)]
    if g != n:
        problems.append(f"SummarizeCaps: generated {g}, SummaryCaps {n}")
    for case in ("Denied", "OverBudget", "Failed"):
        if getattr(generated, f"ServiceError_{case}", None) is None:
            problems.append(f"ServiceError_{case}: missing in the bindings")
    return problems


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, argv[1])
    from . import _native
    from .types import CONTRACT_TYPES

    generated = importlib.import_module("wit_world.imports.types")
    host = importlib.import_module("wit_world.imports.host")
    problems = differences(generated, _native, list(CONTRACT_TYPES))
    problems += differences(host, _native, ["Level"])
    problems += service_differences(importlib.import_module("wit_world.imports.services"))
    for p in problems:
        print(f"agent_host_guest._native is out of date with the WIT: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
