"""Run state, read back from git: the run's refs (layout.RunRefs), its green branch, lap notes.

Nothing here lives only in memory: after a crash, `load` rebuilds the same state. What the
records hold, and how an older one is read, is formats.py's.
"""

from __future__ import annotations

import fcntl
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ralph import git
from ralph.errors import RalphError
from ralph.git import layout
from ralph.git.layout import RunRefs
from ralph.git.store import Changes, RefStore
from ralph.isolation import crashpoint
from ralph.records.formats import LapRecord, LapStatus, NewerFormat, RunRecord, migrated
from ralph.show import ui
from ralph.verdict.checks import CheckResult
from ralph.verdict.decide import Overrule, overruled

# A name git takes in a ref (git check-ref-format): no "..", not ending in "." or ".lock".
RUN_NAME = re.compile(r"^(?!.*\.\.)(?!.*\.lock$)(?!.*\.$)[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


@dataclass
class Lap:
    number: int
    commit: str
    record: LapRecord | None  # None: no note (a crash before it), or one this ralph cannot read
    problem: str = ""  # why `record` is None, for people
    newer: bool = False  # the note is in a format of a later ralph: this one must not go on with the run


@dataclass
class RunState:
    name: str
    record: RunRecord
    green: str  # tip of the green line
    laps: list[Lap] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)  # its refs (RunRefs.all) as read with it

    @property
    def next_lap(self) -> int:
        return self.laps[-1].number + 1 if self.laps else 1

    @property
    def is_done(self) -> bool:
        return self.done_record() is not None

    def done_record(self) -> LapRecord | None:
        """The lap that made the green tip, when it ended the run done (with laps side by side,
        not always the last lap by number)."""
        tip = next((lap.record for lap in reversed(self.laps) if lap.record and lap.record.commit == self.green), None)
        return tip if tip is not None and tip.done else None

    def green_checks(self) -> list[CheckResult]:
        """Check results of the last green commit: its lap's note, or the baseline."""
        for lap in reversed(self.laps):
            if lap.commit == self.green and lap.record:
                return lap.record.checks
        return self.record.baseline

    def last_record(self) -> LapRecord | None:
        return self.laps[-1].record if self.laps else None

    def still_failing(self) -> dict[str, int]:
        """The checks that do not pass on the green tip, each with the lap since which they have
        not (0: the base), along the green line."""
        by_commit = {lap.commit: lap.record for lap in self.laps if lap.record and lap.record.status == LapStatus.GREEN}
        line: list[tuple[int, list[CheckResult]]] = []  # the tip first
        commit = self.green
        while (record := by_commit.get(commit)) is not None and commit != self.record.base:
            line.append((record.lap, record.checks))
            commit = record.parent
        line.append((0, self.record.baseline))
        failing: dict[str, int] = {}
        for check in line[0][1]:
            if check.passed:
                continue
            since = 0
            for lap, results in line:
                found = next((result for result in results if result.command == check.command), None)
                if found is not None and found.passed:
                    break
                since = lap
            failing[check.command] = since
        return failing

    def green_laps(self) -> int:
        """The green laps that count: a `--best-of` round's losers are its winner's round."""
        green = [lap.record for lap in self.laps if lap.record and lap.record.status == LapStatus.GREEN]
        return sum(1 for record in green if not self.passed_over(record))

    def passed_over(self, record: LapRecord) -> bool:
        """A `--best-of` candidate of a round another candidate won: the round is the winner's."""
        won = {
            lap.record.best_of.first_lap
            for lap in self.laps
            if lap.record and lap.record.best_of and lap.record.best_of.chosen
        }
        return record.best_of is not None and not record.best_of.chosen and record.best_of.first_lap in won

    def laps_without_progress(self) -> int:
        """Judged laps in a row, from the latest, that made no objective progress (a round of
        `--best-of` candidates that one won counts as the winner)."""
        count = 0
        for lap in reversed(self.laps):
            if lap.record and (
                lap.record.status in (LapStatus.ERROR, LapStatus.LIMITED) or self.passed_over(lap.record)
            ):
                continue
            if lap.record and lap.record.progress:
                break
            count += 1
        return count

    def counted_laps(self) -> int:
        """Laps that count toward max_laps: all but the ones an agent's usage limit cut short."""
        return sum(1 for lap in self.laps if not (lap.record and lap.record.status == LapStatus.LIMITED))

    def limited_laps(self) -> int:
        return len(self.laps) - self.counted_laps()

    def limited_in_a_row(self) -> int:
        count = 0
        for lap in reversed(self.laps):
            if not (lap.record and lap.record.status == LapStatus.LIMITED):
                break
            count += 1
        return count

    def flaky_checks(self) -> list[str]:
        """Checks that failed and then passed on a retry in any lap, first seen first."""
        seen = [command for lap in self.laps if lap.record for command in lap.record.flaky]
        return list(dict.fromkeys(seen))

    def tokens_used(self) -> int:
        """Every role's: the agent's and the judge's."""
        return sum(
            lap.record.agent.usage.total + (lap.record.judge.usage.total if lap.record.judge else 0)
            for lap in self.laps
            if lap.record
        )

    def cost_used(self) -> tuple[float, int]:
        """USD every role spent, and how many laps' costs are unknown (not counted)."""
        spent, unknown = 0.0, 0
        for record in (lap.record for lap in self.laps if lap.record):
            judge = [record.judge.usage] if record.judge and record.judge.usage.requests else []
            costs = [usage.cost_usd for usage in [record.agent.usage, *judge]]
            spent += sum(cost for cost in costs if cost is not None)
            # A limited lap's tool stopped before it worked: its cost, when it names none, is nothing.
            unknown += None in costs and record.status != LapStatus.LIMITED
        return round(spent, 6), unknown

    def context_bars(self, upto: int | None = None) -> tuple[int, int]:
        """("this lap", "one session") in prompt tokens, through lap `upto` (default: all).

        This lap: the largest single request of the lap, what a fresh lap carries. One
        session: the laps' largest requests added up, roughly what a single agent's context
        would hold had it done every lap so far without starting fresh.
        """
        records = [lap.record for lap in self.laps if lap.record and (upto is None or lap.number <= upto)]
        this_lap = records[-1].agent.usage.largest_prompt_tokens if records else 0
        return this_lap, sum(record.agent.usage.largest_prompt_tokens for record in records)

    def errors_in_a_row(self) -> int:
        """Error laps in a row, from the latest, that the model caused: an endpoint failure is
        waited out (limits.outage_wait), neither counted nor breaking the streak."""
        count = 0
        for lap in reversed(self.laps):
            if lap.record and (lap.record.status == LapStatus.LIMITED or lap.record.agent.endpoint_failed):
                continue
            if not (lap.record and lap.record.status == LapStatus.ERROR):
                break
            count += 1
        return count


@contextmanager
def run_lock(run_dir: Path, name: str) -> Iterator[None]:
    """One process at a time on a run (`ralph run`, `ralph clean`); the kernel releases the
    lock when the process dies, so a stale lock never blocks."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RalphError(f"run {name!r} is already running in another process") from None
        yield


def check_name(name: str) -> str:
    if not RUN_NAME.match(name):
        raise RalphError(
            f"bad run name {name!r} — use letters, digits, '.', '_' and '-' (at most 80; no '..', "
            "not ending in '.' or '.lock')"
        )
    return name


def load(cwd: Path, run: str) -> RunState | None:
    """The state of `run`, or None when it was never started (or never got past its baseline)."""
    names = RunRefs(run)
    refs = git.refs_under(cwd, [names.all, names.branch, layout.NOTES])
    if names.record not in refs:
        return None
    return _state(cwd, run, refs, _read_run_record(_record_text(cwd, refs[names.record], run), run))


def _state(cwd: Path, run: str, refs: dict[str, str], record: RunRecord) -> RunState:
    """`run`'s state from its record and a listing of its refs, its branch's and the notes' (more may be there)."""
    names = RunRefs(run)
    numbered = layout.numbered(names.laps, refs)
    notes = git.notes(cwd, list(numbered.values())) if layout.NOTES in refs else {}
    laps = [Lap(number, sha, *_read_note(notes.get(sha), number)) for number, sha in numbered.items()]
    own = {ref: sha for ref, sha in refs.items() if ref.startswith(names.all)}
    return RunState(run, record, refs.get(names.branch) or record.base, laps, own)


def audit(cwd: Path, run: str) -> list[str]:
    """What breaks the run's promises, read from its refs: a commit on the green line without
    a green note written for exactly it (its checks ran on another tree, or none did), a lap
    ref without its note, a claim or started lap left behind. Empty when all is well."""
    state = load(cwd, run)
    if state is None:
        return [f"no run {run!r}"]
    problems = []
    line = git.out(cwd, "rev-list", f"{state.record.base}..{state.green}").split()
    by_commit = {lap.commit: lap.record for lap in state.laps if lap.record}
    for commit in line:
        record = by_commit.get(commit)
        if record is None or record.status != LapStatus.GREEN or record.commit != commit:
            problems.append(f"{commit[:10]} is on the green line without a green note of its own")
    problems += [f"lap {lap.number} has no note" for lap in state.laps if lap.record is None]
    names = RunRefs(run)
    leftover = [*git.refs(cwd, names.claims), *git.refs(cwd, names.started)]
    problems += [f"{ref} is left behind" for ref in leftover]
    return problems


def _read_run_record(text: str, run: str) -> RunRecord:
    try:
        return RunRecord.model_validate(migrated(text, f"the record of run {run!r}"))
    except (ValueError, ValidationError) as exc:  # ValidationError is a ValueError; named for the reader
        raise RalphError(
            f"the record of run {run!r} does not read: {_first_problem(exc)} — start a new run with --name"
        ) from None


def _read_note(text: str | None, number: int) -> tuple[LapRecord | None, str, bool]:
    if not text:
        return None, "interrupted before its note was written", False
    try:
        return LapRecord.model_validate(migrated(text, f"the note of lap {number}")), "", False
    except NewerFormat as exc:
        return None, str(exc), True
    except ValueError as exc:
        return None, f"unreadable note: {_first_problem(exc)}", False


def _first_problem(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        error = exc.errors()[0]
        return f"{'.'.join(map(str, error['loc']))}: {error['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def run_records(cwd: Path, refs: dict[str, str] | None = None) -> list[RunRecord]:
    """Every run's record in the repository that reads, oldest first; each that does not is said
    in one line (one unreadable run does not hide the others)."""
    records, unreadable = read_runs(cwd, refs)
    for problem in unreadable:
        ui.warn(problem)
    return records


def read_runs(cwd: Path, refs: dict[str, str] | None = None) -> tuple[list[RunRecord], list[str]]:
    """Every run's record that reads, oldest first, and one line for each that does not: a name
    ralph does not take, a record that is no blob, no JSON or no record, one of a newer ralph, one
    under another run's name. Runs pushed to a remote are anyone's: nothing in one stops the rest.
    `refs`: a listing that holds every run's record, when one is at hand."""
    records, unreadable = [], []
    for ref, sha in (git.refs(cwd, layout.RUNS) if refs is None else refs).items():
        if (run := layout.run_of_record(ref)) is None:
            continue
        if not RUN_NAME.match(run):
            unreadable.append(f"{ref}: not a run name ralph takes")
            continue
        try:
            record = _read_run_record(_record_text(cwd, sha, run), run)
        except RalphError as exc:
            unreadable.append(f"{ref}: {exc}")
            continue
        if record.run != run:
            unreadable.append(f"{ref}: the record names another run, {record.run!r}")
            continue
        records.append(record)
    return sorted(records, key=lambda record: (record.created_at, record.run)), unreadable


def latest(cwd: Path, runs: list[str]) -> str:
    """The most recently started of `runs` whose record reads; the last of them when none does
    (reading it then says why)."""
    readable = [record.run for record in read_runs(cwd)[0] if record.run in runs]
    return readable[-1] if readable else runs[-1]


def _record_text(cwd: Path, sha: str, run: str) -> str:
    if (text := git.blob_text(cwd, sha)) is not None:  # through the one reader the command's reads share
        return text.strip()
    read = git.run(cwd, "cat-file", "blob", sha, check=False)  # no blob: git's words on what it is
    if not read.ok:
        raise RalphError(f"the record of run {run!r} is not a blob: {ui.one_line(read.stderr, 200)}")
    return read.output.strip()


def run_names(cwd: Path) -> list[str]:
    return [record.run for record in run_records(cwd)]


def resolve(cwd: Path, run: str | None) -> RunState:
    """The named run, or the most recent one; a clear error when there is none."""
    if run is None:  # every run's refs listed once: the latest one's state is read from the same listing
        refs = git.refs_under(cwd, [layout.RUNS, layout.BRANCHES, layout.NOTES])
        if not (records := run_records(cwd, refs)):
            raise RalphError("no ralph run in this repository yet — start one with `ralph run`")
        return _state(cwd, records[-1].run, refs, records[-1])
    state = load(cwd, check_name(run))
    if state is None:
        known = ", ".join(run_names(cwd)) or "none"
        raise RalphError(f"no run named {run!r} — known runs: {known}")
    return state


def save_record(store: RefStore, record: RunRecord, with_refs: dict[str, tuple[str, str | None]]) -> bool:
    """The run's record, and `with_refs` (its base and branch), written all at once; False when
    another process started the run first."""
    blob = git.write_blob(store.top, record.model_dump_json(indent=1, by_alias=True))
    return store.update({**with_refs, RunRefs(record.run).record: (blob, None)})


def save_lap(store: RefStore, record: LapRecord, landing: Changes | None = None) -> bool:
    """Note first, then the lap ref: a lap ref always has its note (except after a crash between).
    With `landing` (the line's move), both refs in one swap: True if it won, else the lap ref alone."""
    crashpoint.reached("note")
    store.add_note(record.commit, record.model_dump_json(indent=1))
    crashpoint.reached("lap-ref")
    recorded: Changes = {RunRefs(record.run).lap(record.lap): (record.commit, None)}
    if landing:
        crashpoint.reached("advance")
    if landing and store.update({**recorded, **landing}):
        return True
    if not store.update(recorded):
        raise RalphError(f"lap {record.lap} of run {record.run!r} is already recorded — is another `ralph run` on it?")
    return False


def never_landed(store: RefStore, run: str, laps: list[int], why: Overrule = Overrule.NEVER_LANDED) -> None:
    """Laps whose holders died (claims.release_dead) or were stopped in their landing (`why`): one
    recorded green that is not on the green line never will be (a landing must still hold the
    lap's claims, now gone): its note says red, as had the lap lived to overrule itself. Read
    after a sync: the lap may have landed just before its claims were let go of. A --best-of
    candidate is its round's to judge."""
    store.sync()
    state = load(store.top, run)
    if state is None:
        return
    for lap in state.laps:
        record = lap.record
        if lap.number not in laps or record is None or record.status != LapStatus.GREEN or record.best_of:
            continue
        if not git.is_ancestor(store.top, lap.commit, state.green):
            red = record.overruled(overruled(None, why))
            store.add_note(lap.commit, red.model_dump_json(indent=1))


def tell(store: RefStore, run: str, message: str) -> None:
    """Leave a message for the run's next lap (`ralph tell`), as a blob under the run's refs."""
    blob = git.write_blob(store.top, message)
    for _ in range(5):  # a name another message took the same nanosecond: the next one
        if store.swap(RunRefs(run).message(time.time_ns()), blob, None):
            return
    raise RalphError(f"could not store the message under {RunRefs(run).told} — try again")


def messages(cwd: Path, state: RunState) -> dict[str, str]:
    """The messages left for the next lap as `state` read them, oldest first: {ref: text}."""
    told = RunRefs(state.name).told
    found = {ref: sha for ref, sha in state.refs.items() if ref.startswith(told)}
    return {ref: git.read_blob(cwd, found[ref]) for ref in sorted(found, key=lambda ref: int(ref.rsplit("/", 1)[1]))}
