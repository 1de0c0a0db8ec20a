"""Who works on what when laps run side by side (`ralph run --parallel N`): claims are refs.

A claim ref (layout.RunRefs.claim) says a slot works on a TODO item; a started ref says lap n
is under way. Each is created by compare-and-swap against "no such ref", so two
slots never take the same item or the same lap number, and each points at a blob naming its
holder. A lap lets go of its claims when it ends, whatever its verdict; the claims of a lap
that died are let go of when its slot is seen dead (`release_dead`), or when the run starts
again (`clear`: no slot is running then). When the run's refs are kept on a git remote
(`ralph run --remote`), the run's RefStore makes each of these a compare-and-swap there, and a
slot is a worker on some machine (workers.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from ralph import git
from ralph.errors import RalphError
from ralph.git import layout
from ralph.git.layout import RunRefs
from ralph.git.store import RefStore
from ralph.records import ledger

NUMBER_TRIES = 200  # slots taking lap numbers at once: each try loses only to another's success


def holder(cwd: Path, slot: int, **facts: object) -> str:
    """A blob naming who holds a claim: the slot (or worker number), its pid, when, and `facts`.
    Each is new (its time), so letting go of a claim by compare-and-swap on it never lets go of
    another's."""
    return git.write_blob(cwd, json.dumps({"slot": slot, "pid": os.getpid(), "at": time.time(), **facts}))


def unclaimed(cwd: Path, run: str, items: list[str]) -> list[str]:
    """Those of `items` no slot holds now (one git process)."""
    held = set(git.refs(cwd, RunRefs(run).claims))
    return [text for text in items if RunRefs(run).claim(text) not in held]


def take_items(store: RefStore, run: str, free: list[str], count: int, mine: str) -> list[str]:
    """Up to `count` of `free` (items `unclaimed` found free, in TODO order), now held by `mine`:
    each by compare-and-swap against "no such ref", which another slot may have won since."""
    taken: list[str] = []
    for text in free:
        if len(taken) == count:
            break
        if store.swap(RunRefs(run).claim(text), mine, None):
            taken.append(text)
    return taken


def release_items(store: RefStore, run: str, items: list[str], mine: str) -> None:
    """Let go of what `mine` still holds of `items` (a lap that landed let go of its claims as it did)."""
    for text in items:
        if git.rev(store.top, RunRefs(run).claim(text)) == mine:
            store.delete(RunRefs(run).claim(text), mine, check=False)


def take_number(store: RefStore, run: str, mine: str) -> int:
    """The next lap number, now held by `mine`. The run's `numbered` ref counts the numbers
    taken, moved with the started ref in one compare-and-swap: a number is never taken twice,
    even after its holder was taken for dead and its started ref let go of (it may still
    record its lap)."""
    names = RunRefs(run)
    for _ in range(NUMBER_TRIES):
        last = git.rev(store.top, names.numbered)
        number = int(git.read_blob(store.top, last)) + 1 if last is not None else _first_number(store.top, run)
        counter = (git.write_blob(store.top, str(number)), last)
        if store.update({names.numbered: counter, names.started_lap(number): (mine, None)}):
            return number
    raise RalphError(
        f"could not take a lap number: {names.numbered} kept moving, or is locked (a `.lock` file git left)"
    )


def _first_number(cwd: Path, run: str) -> int:
    """The number after every lap recorded or started: the first, or a run a ralph without the
    counter started."""
    names = RunRefs(run)
    recorded = layout.numbered(names.laps, git.refs(cwd, names.laps))
    return max([0, *recorded, *(int(name) for name in held(cwd, names.started) if name.isdigit())]) + 1


def finish_number(store: RefStore, run: str, number: int, mine: str) -> None:
    store.delete(RunRefs(run).started_lap(number), mine, check=False)


def held(cwd: Path, prefix: str) -> dict[str, tuple[str, dict]]:
    """Every ref under `prefix`, by name: the blob it points at and the holder it names (read
    by one git process: a slot asks before every lap, and each holder was one more)."""
    # A holder is JSON, which holds no NUL: a NUL ends each field, a NUL and a newline each ref.
    listing = git.run(cwd, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(objecttype)%00%(raw)%00", prefix)
    found = {}
    for record in listing.output.split("\0\n"):
        ref, blob, kind, text = (record.split("\0", 3) + ["", "", ""])[:4]
        if not ref.startswith(prefix):  # (the end of the listing)
            continue
        try:
            holder = json.loads(text) if kind == "blob" else None
        except (ValueError, RecursionError):
            holder = None
        found[ref[len(prefix) :]] = (blob, holder if isinstance(holder, dict) else {})
    return found


def started(cwd: Path, run: str, alive: Callable[[dict], bool] | None = None) -> list[int]:
    """The laps under way: started, not yet finished, by a holder still `alive` (by default, a
    process of this machine's; one that died holding a number, in a way nothing could clean
    up after, holds nothing)."""
    alive = alive or pid_alive
    taken = held(cwd, RunRefs(run).started)
    return [int(name) for name, (_, holder) in taken.items() if name.isdigit() and alive(holder)]


def pid_alive(holder: dict) -> bool:
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:  # 0 or -1 would name a group, not a slot
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def release_dead(store: RefStore, run: str, alive: Callable[[dict], bool]) -> int:
    """Let go of the claims and started laps whose holders are not `alive` (they died holding
    them), each by compare-and-swap; returns how many. A lap of theirs recorded green that had
    not landed never will (ledger.never_landed)."""
    released, laps = 0, []
    for prefix in (RunRefs(run).claims, RunRefs(run).started):
        for name, (blob, holder) in held(store.top, prefix).items():
            if not alive(holder) and store.delete(prefix + name, blob, check=False):
                released += 1
                laps += [int(name)] if prefix == RunRefs(run).started and name.isdigit() else []
    if laps:
        ledger.never_landed(store, run, laps)
    return released


def under_way(cwd: Path, run: str) -> list[dict]:
    """The laps started and not finished: each one's number, slot and items, by lap number."""
    taken = held(cwd, RunRefs(run).started)
    laps = [
        {"lap": int(name), "slot": holder.get("slot"), "items": holder.get("items", []), "worker": holder.get("worker")}
        for name, (_, holder) in taken.items()
        if name.isdigit()
    ]
    return sorted(laps, key=lambda lap: lap["lap"])


def clear(store: RefStore, common_dir: Path, run: str) -> int:
    """Let go of every claim and started lap of `run`; returns how many. No slot of it is
    running, so a lock git left in its refs' folders (git killed mid-update) is stale: removed;
    and a lap of theirs recorded green that had not landed never will (ledger.never_landed)."""
    folders = (RunRefs(run).claims, RunRefs(run).started)
    for prefix in folders:
        for lock in (common_dir / prefix).glob("*.lock"):
            lock.unlink(missing_ok=True)
    stale = [ref for prefix in folders for ref in git.refs(store.top, prefix)]
    for ref in stale:
        try:
            store.delete(ref)
        except git.GitFailed as failed:  # a lock of git's (packed-refs.lock): a person's to remove
            raise RalphError(f"cannot let go of {ref}: {failed}") from None
    laps = [int(name) for name in (ref.removeprefix(RunRefs(run).started) for ref in stale) if name.isdigit()]
    if laps:
        ledger.never_landed(store, run, laps)
    return len(stale)
