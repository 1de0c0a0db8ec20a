"""What grants a lap a change its scope does not allow: the user's own words, in one fixed form.

An item of TODO.md ends with `(may change: PATH, PATH …)`: paths from the repository's root,
where a glob may stand (`*` within a folder, `**` across folders, a folder ending in `/` for
everything in it). A name without a folder is the file at the root, never a file of that name
elsewhere. Nothing else grants: no wording is read for permission, so no apostrophe, negation or
language can grant or forbid by accident. Which items' grants count (the user's own, in the run's
base commit) is the caller's to say.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from pathspec.util import normalize_file

from ralph.facts.paths import anchored

GRANT = re.compile(r"\s*\(may change:\s*(?P<paths>[^()]*)\)\s*$")


def of(item: str) -> tuple[str, ...]:
    """The paths an item's grant names (none without one)."""
    found = GRANT.search(item)
    if not found:
        return ()
    return tuple(path.strip() for path in found["paths"].split(",") if path.strip())


def without(item: str) -> str:
    """The item with its grant taken off: what a lap, a planner or an issue proposed and the
    user did not accept."""
    return GRANT.sub("", item)


def all_of(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(path for item in items for path in of(item)))


def allows(grants: Iterable[str], path: str) -> bool:
    """Does one of these grants name the path (anchored at the repository's root)?"""
    return matcher(tuple(grants))(path)


def matcher(grants: tuple[str, ...]) -> Callable[[str], bool]:
    """`allows` for these grants, compiled once: for many paths against many grants. A grant that
    is a plain path (most are: a file, a folder) is looked up in a set, by the path and each
    folder above it, as git's glob matches it (the path, or anything under it); the rest go to
    pathspec, whose compiling costs a regular expression each. With a `!` among them, order
    decides: pathspec has them all."""
    plain = {grant.removeprefix("/") for grant in grants if _PLAIN.fullmatch(grant)}
    if any(grant.startswith("!") for grant in grants) or not plain:
        return anchored(grants).match_file
    rest = tuple(grant for grant in grants if not _PLAIN.fullmatch(grant))
    globbed = anchored(rest) if rest else None

    def allows(path: str) -> bool:
        shown = normalize_file(path)
        if shown in plain:
            return True
        at = shown.find("/")
        while at >= 0:
            if shown[:at] in plain:
                return True
            at = shown.find("/", at + 1)
        return globbed is not None and globbed.match_file(path)

    return allows


# A path with nothing git's glob syntax reads otherwise: no wildcard, escape, class, negation,
# comment, space, empty or `.`/`..` part, trailing `/`.
_PLAIN = re.compile(r"/?(?!\.\.?(?:/|$))[\w.+,=@%~-]+(?:/(?!\.\.?(?:/|$))[\w.+,=@%~-]+)*")
