"""How a job is cut from a package's source, by its syntax tree: function bodies replaced by
`raise NotImplementedError`, annotations taken out, a name renamed. Each cut also says how to
undo it, unit by unit, as text replacements (`Edit`): what the scripted model sends, and how a
job's reference solution is checked to pass."""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass

STUB = "raise NotImplementedError"


@dataclass(frozen=True)
class Edit:
    """Replace `old` by `new` in `path` (once: `old` occurs once); `old` None: write the file."""

    path: str
    old: str | None
    new: str


@dataclass(frozen=True)
class Unit:
    """A top-level function or class (`Name`), or a method of one (`Class.name`), as it reads
    in the original source and after the cut."""

    name: str
    original: str
    cut: str


def units(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]]:
    """The module's top-level functions and classes, and the classes' methods, in source order."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            found.append((node.name, node))
            found += [
                (f"{node.name}.{child.name}", child)
                for child in node.body
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
    return found


def stub_bodies(source: str, names: set[str]) -> tuple[str, list[Unit]]:
    """`source` with the bodies of the functions `names` (as `units` names them) replaced by
    `raise NotImplementedError`, docstrings and signatures kept."""
    lines = source.splitlines(keepends=True)
    found = {name: node for name, node in units(ast.parse(source)) if name in names}
    if missing := names - set(found):
        raise ValueError(f"no function {', '.join(sorted(missing))} in the module")
    cut: list[Unit] = []
    for name, node in sorted(found.items(), key=lambda item: -item[1].lineno):  # bottom up: lines stay put
        assert not isinstance(node, ast.ClassDef) and node.end_lineno is not None
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if not body or body[0].lineno == node.lineno:
            raise ValueError(f"{name}: no body of its own lines to stub")
        first, start = _first_line(node), body[0].lineno - 1
        original = "".join(lines[first : node.end_lineno])
        lines[start : node.end_lineno] = [" " * body[0].col_offset + STUB + "\n"]
        cut.append(Unit(name, original, "".join(lines[first : start + 1])))
    return "".join(lines), cut[::-1]


def strip_annotations(source: str) -> tuple[str, list[Unit]]:
    """`source` without the annotations of its functions' arguments and returns (variables keep
    theirs), one Unit per top-level function or class."""
    tree = ast.parse(source)
    offsets = _line_offsets(source)
    spans: list[tuple[int, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            spans += _annotation_spans(node, source, offsets)
    stripped = _without(source, spans)
    old_lines, new_lines = source.splitlines(keepends=True), stripped.splitlines(keepends=True)
    if len(old_lines) != len(new_lines):
        raise ValueError("an annotation spans lines: the module cannot be cut unit by unit")
    cut = []
    for name, node in units(tree):
        if "." in name:  # a method is part of its class's unit
            continue
        assert node.end_lineno is not None
        whole = slice(_first_line(node), node.end_lineno)
        original, after = "".join(old_lines[whole]), "".join(new_lines[whole])
        if original != after:
            cut.append(Unit(name, original, after))
    return stripped, cut


def rename(source: str, old: str, new: str) -> str:
    """`source` with every name token `old` spelled `new` (identifiers only: strings and
    comments are left as they are)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    offsets = _line_offsets(source)
    spans = [
        (offsets[token.start[0] - 1] + token.start[1], offsets[token.end[0] - 1] + token.end[1])
        for token in tokens
        if token.type == tokenize.NAME and token.string == old
    ]
    text = source
    for start, end in reversed(spans):
        text = text[:start] + new + text[end:]
    return text


def unique(edits: list[Edit], files: dict[str, str]) -> None:
    """Raise unless each replacement's `old` occurs exactly once in its file as the job has it."""
    for edit in edits:
        if edit.old is not None and (count := files[edit.path].count(edit.old)) != 1:
            raise ValueError(f"{edit.path}: the text to replace occurs {count} times, not once")


def _first_line(node: ast.AST) -> int:
    """The 0-based first line of a definition: its first decorator's, else its own."""
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(decorator.lineno for decorator in decorators)]) - 1  # type: ignore[attr-defined]


def _annotation_spans(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, source: str, offsets: list[int]
) -> list[tuple[int, int]]:
    def at(line: int, column: int) -> int:  # ast's columns count UTF-8 bytes
        text = source[offsets[line - 1] :].encode()[:column].decode()
        return offsets[line - 1] + len(text)

    spans = []
    arguments = node.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    for argument in every:
        if argument is not None and argument.annotation is not None:
            name_end = at(argument.lineno, argument.col_offset) + len(argument.arg)
            annotation = argument.annotation
            assert annotation.end_lineno is not None and annotation.end_col_offset is not None
            spans.append((name_end, at(annotation.end_lineno, annotation.end_col_offset)))
    returns = getattr(node, "returns", None)
    if returns is not None:
        start = source.rindex("->", 0, at(returns.lineno, returns.col_offset))
        while source[start - 1] in " \t":
            start -= 1
        spans.append((start, at(returns.end_lineno, returns.end_col_offset)))
    return spans


def _without(source: str, spans: list[tuple[int, int]]) -> str:
    text = source
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text


def _line_offsets(source: str) -> list[int]:
    offsets, total = [], 0
    for line in source.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets + [total]
