"""Check a tool's args against its JSON Schema, with the `jsonschema` library (optional: `agentlab[schema]`).

    tool = Tool(validate=validator(SCHEMA), run=reserve, parameters=SCHEMA)

The schema in `parameters` is what a real model is told; a model may still
send args that break it. `validator(schema)` makes the schema a check too, so
that the args the model was told about are exactly the args that can run.
Rules a schema cannot say (the book must exist, the customer may hold at most
ten copies) stay in a `validate` of your own, which may call this one first.

`import agentlab` does not import this module; it imports `jsonschema` only
when a validator is made. A well-kept validator, not a hand-written one: JSON
Schema has many corners (formats, `$ref`, `oneOf`) that a dozen lines get wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentlab.errors import ConfigError


def validator(schema: dict[str, Any]) -> Callable[[Any], None]:
    """A `validate` for a `Tool`: raises ValueError naming every place where the args break `schema`."""
    try:
        import jsonschema
    except ImportError:
        raise ConfigError(
            "agentlab.schema needs the jsonschema library: pip install 'agentlab[schema]' (or jsonschema)"
        ) from None
    kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        kind.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise ConfigError(f"not a valid JSON Schema: {error.message}") from None
    checker = kind(schema)

    def validate(args: Any) -> None:
        problems = sorted(checker.iter_errors(args), key=lambda error: list(error.absolute_path))
        if problems:
            raise ValueError("; ".join(_say(problem) for problem in problems))

    return validate


def _say(error: Any) -> str:
    """One schema error as "at args.city: 42 is not of type 'string'" (or "args: ..." at the top)."""
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
    return f"args{where}: {error.message}"


__all__ = ["validator"]
