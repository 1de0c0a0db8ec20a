"""The workers of a run whose refs a git remote keeps (`ralph run --remote`): clones on any
machines, which share nothing but the remote.

A worker takes a number, its worker ref (layout.RunRefs.worker), created there by compare-and-swap:
it is the worker's slot (its PROGRESS.md section, what its claims name). A heartbeat, a small
process of the worker's own, moves that ref to a new blob every sixth of `timeout`, and
deletes it when the worker ends, however it ends (after a `kill -9` the kernel tells it).

A worker whose ref another sees unchanged for `timeout` seconds of that other's own clock
(machines' clocks disagree; how long a ref stayed the same does not depend on them) is taken
for dead, and its ref deleted, by compare-and-swap. The claims and started laps of a worker
no longer present are let go of (claims.release_dead): others take its items. A worker taken
for dead that was only slow finds its number gone and takes a new one; its lap is judged as
any other, since the green line only moves by compare-and-swap.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ralph import git
from ralph.errors import RalphError
from ralph.git import layout
from ralph.git.layout import RunRefs
from ralph.git.remote import NETWORK_TIMEOUT, Remote, check_remote
from ralph.git.store import RefStore
from ralph.isolation import hardening, proc
from ralph.records import ledger
from ralph.run import claims
from ralph.show import ui

BEATS_PER_TIMEOUT = 6


def fetch(cwd: Path, keeper: Remote, runs: list[str]) -> None:
    """These runs' refs made the remote's here; refused for a run this clone started itself
    (not with --remote), whose refs the remote's would replace."""
    for run in runs:
        try:
            state = ledger.load(cwd, run)
        except RalphError:  # one that does not read here is the remote's, fetched again
            state = None
        if state is not None and not state.record.on_remote:
            raise RalphError(
                f"this clone has a run named {run} of its own, not on a remote: fetching the remote's "
                "would replace its refs — use another --name"
            )
    keeper.sync(cwd)


def fetch_runs(cwd: Path, remote: str, run: str | None) -> str:
    """The refs of `run` (by default, of every run) as `remote` has them, here (`ralph status
    --remote`); the run named, or else the remote's most recent."""
    check_remote(cwd, remote)
    listed = git.run(cwd, "ls-remote", remote, layout.RECORDS, check=False, timeout=NETWORK_TIMEOUT)
    if not listed.ok:
        raise RalphError(f"cannot reach the remote {remote}: {ui.one_line(listed.stderr, 400)}")
    found = (layout.run_of_record(line.partition("\t")[2]) for line in listed.output.splitlines())
    runs = [name for name in found if name is not None]
    if run is not None:
        runs = [ledger.check_name(run)] if run in runs else []
    if not runs:
        which = f"no run named {run!r}" if run else "no ralph run"
        raise RalphError(f"{remote} has {which} — workers start one with `ralph run --remote {remote} --name NAME`")
    fetch(cwd, Remote.keeping(remote, runs), runs)
    return ledger.latest(cwd, runs)


@dataclass
class Crew:
    """The workers of a run as this one sees them, this one among them."""

    store: RefStore  # with the remote that keeps the run
    run: str
    timeout: float  # seconds a worker's heartbeat may stay unchanged before it is taken for dead
    log: Path  # where the heartbeat says what went wrong
    worker: str  # this worker's name (modes.Worker.name)
    slot: int = 0  # this worker's number; 0 before it has one
    present: dict[int, object] = field(default_factory=dict)  # number: worker, of those not taken for dead
    _seen: dict[str, tuple[str, float]] = field(default_factory=dict)  # ref: its blob, since when unchanged
    _heart: subprocess.Popen | None = None

    def sync(self) -> int:
        """The remote's refs here, the dead let go of; this worker's number, a new one when it
        was taken for dead itself."""
        self.store.sync()
        self._look()
        claims.release_dead(self.store, self.run, self.alive)
        if self.present.get(self.slot) != self.worker:
            self._join()
        return self.slot

    def alive(self, holder: dict) -> bool:
        """Whether the holder of a claim is a worker still present, under the same number."""
        worker = holder.get("worker")
        return worker is not None and self.present.get(holder.get("slot")) == worker  # type: ignore[arg-type]

    def leave(self) -> None:
        """The heartbeat ends, and this worker's ref goes (the heartbeat deletes it on its way
        out, unless it ended before it could: then here)."""
        if self._heart is None:
            return
        proc.end([self._heart], 30)
        self._heart = None
        name, prefix = str(self.slot), RunRefs(self.run).workers
        try:
            self.store.sync()
            blob, facts = claims.held(self.store.top, prefix).get(name, ("", {}))
            if facts.get("worker") == self.worker:
                self.store.delete(prefix + name, blob, check=False)
        except RalphError:  # the remote is out of reach: the others take this worker for dead in time
            pass

    def _look(self) -> None:
        now, prefix = time.monotonic(), RunRefs(self.run).workers
        seen, present = {}, {}
        for name, (blob, facts) in claims.held(self.store.top, prefix).items():
            was, since = self._seen.get(name, (blob, now))
            seen[name] = (blob, since if was == blob else now)
            if not name.isdigit():
                continue
            if now - seen[name][1] >= self.timeout and int(name) != self.slot:
                self.store.delete(prefix + name, blob, check=False)  # it stopped beating
                continue
            present[int(name)] = facts.get("worker")
        self._seen, self.present = seen, present

    def _join(self) -> None:
        self.leave()
        number = 1
        while True:
            mine = claims.holder(self.store.top, number, worker=self.worker, host=socket.gethostname())
            ref = RunRefs(self.run).worker(number)
            if number not in self.present and self.store.swap(ref, mine, None):
                break
            number += 1
        self.slot, self.present[number] = number, self.worker
        self._seen[str(number)] = (mine, time.monotonic())
        every = self.timeout / BEATS_PER_TIMEOUT
        assert self.store.remote is not None, "a crew works on a run a remote keeps"
        command = [sys.executable, "-P", "-m", "ralph.run.workers", self.store.remote.name, ref, mine, f"{every:g}"]
        command.append(str(os.getpid()))
        with open(self.log, "a") as log:
            self._heart = proc.start(command, self.store.top, proc.clean_env(), output=log)


def roster(cwd: Path, run: str) -> list[dict]:
    """The workers whose refs are there, by number: each one's facts and its heartbeat's age
    by the reader's clock (machines' clocks disagree: a hint, not a verdict)."""
    found = []
    for name, (_, facts) in sorted(claims.held(cwd, RunRefs(run).workers).items(), key=lambda item: item[0]):
        at = facts.get("at")
        age = round(time.time() - at) if isinstance(at, int | float) else None
        found.append({"number": name, "worker": facts.get("worker"), "host": facts.get("host"), "beat_s_ago": age})
    return found


def beat(cwd: Path, remote: str, ref: str, blob: str, every: float, parent: int) -> None:
    """The heartbeat: `ref` on `remote` moved from blob to a new one every `every` seconds,
    by compare-and-swap (lost: the worker was taken for dead and its number is another's);
    deleted when the worker ends or dies."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    keeper = Remote(remote, (ref,))
    pending = blob  # a beat under way when the worker ended may have landed
    try:
        hardening.end_with_parent(parent)
        while True:
            time.sleep(every)
            facts = dict(json.loads(git.read_blob(cwd, blob)), at=time.time())
            pending = git.write_blob(cwd, json.dumps(facts))
            try:
                if not keeper.push(cwd, {ref: (pending, blob)}):
                    return
                blob = pending
            except RalphError as failed:  # the remote is out of reach now: the next beat tries again
                print(f"heartbeat: {failed}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        with proc.signals_held():  # a second signal must not cut the goodbye short
            for last in dict.fromkeys((blob, pending)):
                try:
                    if keeper.push(cwd, {ref: (None, last)}):
                        return
                except RalphError as failed:
                    print(f"heartbeat: could not delete {ref}: {failed}", file=sys.stderr, flush=True)
                    return


if __name__ == "__main__":
    _remote, _ref, _blob, _every, _parent = sys.argv[1:]
    try:
        beat(Path.cwd(), _remote, _ref, _blob, float(_every), int(_parent))
    except KeyboardInterrupt:  # a second one, held while the ref was deleted: nothing left to do
        pass
