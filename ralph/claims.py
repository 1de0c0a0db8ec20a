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


def _held(cwd: Path, prefix: str) -> dict[str, tuple[str, dict]]:
    """Every ref under `prefix`, by name: the blob it points at and the holder it names."""
    found = {}
    for ref, blob in git.refs(cwd, prefix).items():
        try:
            holder = json.loads(git.read_blob(cwd, blob))
        except ValueError:
            holder = None
        found[ref[len(prefix) :]] = (blob, holder if isinstance(holder, dict) else {})
    return found


def started(cwd: Path, run: str) -> list[int]:
    """The laps under way: started, not yet finished, by a slot that is still alive (one that
    died holding a number, in a way nothing could clean up after, holds nothing)."""
    held = _held(cwd, started_prefix(run))
    return [int(name) for name, (_, holder) in held.items() if name.isdigit() and _alive(holder.get("pid"))]


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:  # 0 or -1 would name a group, not a slot
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_slot(cwd: Path, run: str, slot: int) -> None:
    """Let go of what slot `slot` holds (it died holding it), each by compare-and-swap."""
    for prefix in (claims_prefix(run), started_prefix(run)):
        for name, (blob, holder) in _held(cwd, prefix).items():
            if holder.get("slot") == slot:
                git.delete_ref(cwd, prefix + name, blob, check=False)


def under_way(cwd: Path, run: str) -> list[dict]:
    """The laps started and not finished: each one's number, slot and items, by lap number."""
    held = _held(cwd, started_prefix(run))
    laps = [
        {"lap": int(name), "slot": holder.get("slot"), "items": holder.get("items", [])}
        for name, (_, holder) in held.items()
        if name.isdigit()
    ]
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
