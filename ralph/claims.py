"""Who works on what when laps run side by side (`ralph run --parallel N`): claims are refs.

`refs/ralph/<run>/claims/<item>` says a slot works on a TODO item; `refs/ralph/<run>/started/<n>`
says lap n is under way. Each is created by compare-and-swap against "no such ref", so two
slots never take the same item or the same lap number, and each points at a blob naming its
holder. A lap lets go of its claims when it ends, whatever its verdict; the claims of a lap
that died are let go of when the run starts again (`clear`: no slot is running then).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from ralph import git
from ralph.errors import RalphError


def claims_prefix(run: str) -> str:
    return f"refs/ralph/{run}/claims/"


def started_prefix(run: str) -> str:
    return f"refs/ralph/{run}/started/"


def item_id(text: str) -> str:
    """A TODO item's name among refs: its text's hash (ticking it does not change its text)."""
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _holder(cwd: Path, slot: int, **facts: object) -> str:
    return git.write_blob(cwd, json.dumps({"slot": slot, "pid": os.getpid(), "at": time.time(), **facts}))


def take_items(cwd: Path, run: str, open_items: list[str], count: int, slot: int) -> list[str]:
    """Up to `count` of `open_items` (unticked, in TODO order) no other slot holds, now held."""
    taken: list[str] = []
    holder = _holder(cwd, slot)
    held = set(git.refs(cwd, claims_prefix(run)))
    for text in open_items:
        ref = claims_prefix(run) + item_id(text)
        if len(taken) == count:
            break
        if ref not in held and git.update_ref(cwd, ref, holder, None):
            taken.append(text)
    return taken


def release_items(cwd: Path, run: str, items: list[str]) -> None:
    for text in items:
        git.delete_ref(cwd, claims_prefix(run) + item_id(text), check=False)


def held_items(cwd: Path, run: str) -> int:
    return len(git.refs(cwd, claims_prefix(run)))


def take_number(cwd: Path, run: str, slot: int, items: list[str]) -> int:
    """The first lap number past every lap recorded or started."""
    holder = _holder(cwd, slot, items=items)
    laps = f"refs/ralph/{run}/laps/"
    recorded = [int(ref[len(laps) :]) for ref in git.refs(cwd, laps) if ref[len(laps) :].isdigit()]
    number = max([0, *recorded, *started(cwd, run)]) + 1
    while not git.update_ref(cwd, started_prefix(run) + str(number), holder, None):
        number += 1
    return number


def finish_number(cwd: Path, run: str, number: int) -> None:
    git.delete_ref(cwd, started_prefix(run) + str(number), check=False)


def started(cwd: Path, run: str) -> list[int]:
    """The laps under way: started, not yet finished, by a slot that is still alive (one that
    died holding a number, in a way nothing could clean up after, holds nothing)."""
    prefix, numbers = started_prefix(run), []
    for ref, blob in git.refs(cwd, prefix).items():
        if ref[len(prefix) :].isdigit() and _alive(cwd, blob):
            numbers.append(int(ref[len(prefix) :]))
    return numbers


def _alive(cwd: Path, blob: str) -> bool:
    try:
        pid = json.loads(git.read_blob(cwd, blob)).get("pid")
        os.kill(pid, 0)
    except (ValueError, AttributeError, TypeError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def release_slot(cwd: Path, run: str, slot: int) -> None:
    """Let go of what slot `slot` holds (it died holding it), each by compare-and-swap."""
    for prefix in (claims_prefix(run), started_prefix(run)):
        for ref, blob in git.refs(cwd, prefix).items():
            try:
                holder = json.loads(git.read_blob(cwd, blob))
            except ValueError:
                continue
            if isinstance(holder, dict) and holder.get("slot") == slot:
                git.delete_ref(cwd, ref, blob, check=False)


def under_way(cwd: Path, run: str) -> list[dict]:
    """The laps started and not finished: each one's number, slot and items, by lap number."""
    prefix, laps = started_prefix(run), []
    for ref, blob in git.refs(cwd, prefix).items():
        try:
            holder = json.loads(git.read_blob(cwd, blob))
        except ValueError:
            holder = {}
        if ref[len(prefix) :].isdigit() and isinstance(holder, dict):
            laps.append({"lap": int(ref[len(prefix) :]), "slot": holder.get("slot"), "items": holder.get("items", [])})
    return sorted(laps, key=lambda lap: lap["lap"])


def clear(cwd: Path, common_dir: Path, run: str) -> int:
    """Let go of every claim and started lap of `run`; returns how many. No slot of it is
    running, so a lock git left in its refs' folders (git killed mid-update) is stale: removed."""
    for prefix in (claims_prefix(run), started_prefix(run)):
        for lock in (common_dir / prefix).glob("*.lock"):
            lock.unlink(missing_ok=True)
    stale = [*git.refs(cwd, claims_prefix(run)), *git.refs(cwd, started_prefix(run))]
    for ref in stale:
        try:
            git.delete_ref(cwd, ref)
        except git.GitFailed as failed:  # a lock of git's (packed-refs.lock): a person's to remove
            raise RalphError(f"cannot let go of {ref}: {failed}") from None
    return len(stale)
