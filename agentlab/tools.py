"""Tools: what the application lets the model ask for.

A tool has two halves. `validate(args)` is the application's check of what the
model proposed: it raises on bad args and may return a parsed value. `run`
does the work, and only ever sees what `validate` accepted. The loop calls
`run(value, signal, call)`, passing as many of those as `run` accepts.

A tool a real model can call also has a `description` and `parameters`, a
JSON Schema of its args: that is what the model is *told*. It is a request,
not a guarantee: models send args that break it, so `validate` stays what
the application *checks* (`agentlab.schema.validator(schema)` builds one
from the schema itself, with the `jsonschema` library).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentlab.callees import Callee, is_async_callable
from agentlab.errors import ConfigError
from agentlab.jsonc import NotJSONError, copy_json


@dataclass(frozen=True)
class ToolCall:
    """The call a tool's `run` is executing: its id, its tool name and its checked args."""

    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Approval:
    """An approval policy's answer about one write: allowed or not, and why.

    A policy may also answer with a plain True or False.
    """

    allowed: bool
    reason: str = ""

    def __post_init__(self) -> None:
        # A real bool and a real string: Approval("no") must not approve because "no" is truthy.
        if type(self.allowed) is not bool:
            raise ConfigError(
                f"Approval(allowed, reason): allowed must be True or False, not {type(self.allowed).__name__}"
            )
        if not isinstance(self.reason, str):
            raise ConfigError(f"Approval(allowed, reason): reason must be a string, not {type(self.reason).__name__}")
        object.__setattr__(self, "reason", str.__str__(self.reason))


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: `validate` checks the args, `run` does the work.

    `writes=True` marks a tool that changes data: the loop runs it only with
    the approval of `agent_loop`'s `approve` policy, within `max_writes`, and
    passes it the `ToolCall`, from which the tool makes the write's
    idempotency key (the call id is unique only within its run: see
    `agentlab.store.Store.tools`).

    `description` and `parameters` (a JSON Schema of the args, an object
    schema) are what an adapter of `agentlab.models` tells a real model.
    """

    validate: Callable[[dict[str, Any]], Any]
    run: Callable[..., Any]
    writes: bool = False
    description: str = ""
    parameters: dict[str, Any] | None = None
    runner: Callee = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not callable(self.validate) or not callable(self.run):
            raise ConfigError("Tool needs two functions: Tool(validate=check_args, run=do_the_work)")
        if is_async_callable(self.validate):
            raise ConfigError(
                "a tool's validate must be a plain function: it is a quick, pure check of the args "
                "that runs before anything else; do slow work in run"
            )
        if not isinstance(self.description, str):
            raise ConfigError(f"a tool's description must be a string, not {type(self.description).__name__}")
        if self.parameters is not None:
            object.__setattr__(self, "parameters", _object_schema(self.parameters))
        object.__setattr__(self, "runner", Callee(self.run, 3, "tool"))

    @classmethod
    def of(cls, name: str, tool: Any) -> Tool:
        """Accept a `Tool`, or any object with `validate` and `run` methods."""
        if isinstance(tool, cls):
            return tool
        validate, run = getattr(tool, "validate", None), getattr(tool, "run", None)
        if isinstance(tool, Mapping) or not (callable(validate) and callable(run)):
            raise ConfigError(
                f"tool {name!r} must be Tool(validate=..., run=...) "
                f"(or an object with validate and run methods), not {type(tool).__name__}"
            )
        return cls(
            validate=validate,
            run=run,
            writes=bool(getattr(tool, "writes", False)),
            description=getattr(tool, "description", "") or "",
            parameters=getattr(tool, "parameters", None),
        )


def _object_schema(schema: Any) -> dict[str, Any]:
    """A private JSON copy of a tool's parameters schema, which must describe an object (the args)."""
    try:
        copied = copy_json(schema)
    except NotJSONError as error:
        raise ConfigError(f"a tool's parameters must be a JSON Schema made of JSON data: {error}") from None
    if not isinstance(copied, dict) or copied.get("type") != "object":
        raise ConfigError(
            'a tool\'s parameters must be a JSON Schema of an object, such as {"type": "object", "properties": '
            f'{{"id": {{"type": "string"}}}}, "required": ["id"]}}; got {schema!r:.120}'
        )
    return copied


def parse_lookup_args(args: Any) -> dict[str, str]:
    """Check the args of a lookup: exactly `{"id": <non-empty string, at most 64 chars>}`.

    Returns a fresh `{"id": ...}`; raises ValueError with a readable message.
    """
    expected = 'expected exactly {"id": <a non-empty string of at most 64 characters>}'
    if not isinstance(args, Mapping):
        raise ValueError(f"{expected}, got a {type(args).__name__}")
    keys = sorted(map(str, args))
    if keys != ["id"]:
        raise ValueError(f"{expected}, got the keys {keys}")
    value = args["id"]
    if not isinstance(value, str):
        raise ValueError(f'{expected}, got "id" = {value!r} ({type(value).__name__})')
    if not 0 < len(value) <= 64:
        raise ValueError(f'{expected}, got an "id" of {len(value)} characters')
    return {"id": str(value)}


__all__ = ["Approval", "Tool", "ToolCall", "parse_lookup_args"]
