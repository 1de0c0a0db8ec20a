"""A pydantic validation error as the one line a user reads: `file (line N): key: what was expected`."""

from __future__ import annotations

import yaml
from pydantic import BaseModel, ValidationError


def describe(exc: ValidationError, text: str, name: str, root: type[BaseModel]) -> str:
    """The first validation error of `root` (the whole file's model) read from `text` as
    `file (line N): key: what was expected`."""
    error = exc.errors()[0]
    loc = [part for part in error["loc"] if not str(part).startswith("function-after")]
    key = ".".join(str(part) for part in loc) or "(top level)"
    line = _line_of(text, loc)
    where = f" (line {line})" if line else ""
    kind, message = error["type"], error["msg"]
    if kind == "extra_forbidden":
        section = _section(root, loc[:-1])
        message = "unknown key" + (f"; expected one of: {', '.join(section.model_fields)}" if section else "")
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "value_error":
        message = message.removeprefix("Value error, ")
        return f"{name}{where}: {message}"
    more = len(exc.errors()) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{name}{where}: {key}: {message}{tail}"


def _section(root: type[BaseModel], loc: list) -> type[BaseModel] | None:
    """The section model at `loc`, to list the keys it does know; None when `loc` is no section."""
    model = root
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = field.annotation if field else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _line_of(text: str, loc: list) -> int | None:
    """The 1-based line of a key path in the YAML source, as close as it can be found."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line
