"""A lap's verdict, decided in one place: green, red, error or limited, from one value of evidence.

Every kind of lap comes here: an agent's lap and its re-check on a green line that moved, a
split, and the check an agent asks for before it says it is done (in_lap); and so does every
red after the fact (`overruled`): a lap that ticked what it did not claim or reached outside its
workspace, a full disk, a green line it could not advance, a dead holder's lap. Nothing here calls a model,
git or a process: the lap gathers the evidence (lap/judging.py), asks the judge role for its
record when `wants_judge` says so, and decides again with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum, StrEnum
from typing import Literal

from ralph.agents.base import AgentResult
from ralph.agents.judge import JudgeRecord, next_lap_text
from ralph.todo import Counts
from ralph.verdict import ratchet
from ralph.verdict.checks import CheckResult, passing_tests
from ralph.verdict.checks import done as checks_done
from ralph.verdict.guard import GuardReport


class LapStatus(StrEnum):
    """A lap's status: the one type every lap outcome is made of and compared with. Its values
    are stored, in every lap's note and in the events: the words older ralphs wrote, kept byte
    for byte, so a note of any format reads back as the same status."""

    GREEN = "green"  # the checks passed (and the judge, if any): the green line may advance to it
    RED = "red"  # judged and discarded: the next lap starts from the last green commit again
    ERROR = "error"  # the agent failed before it could work (an endpoint down): the lap judges nothing
    LIMITED = "limited"  # the agent hit a usage or rate limit: the lap counts for nothing


def _no_items() -> Counts:
    return Counts(open=0, done=0)


@dataclass(frozen=True, kw_only=True)
class CommitFacts:
    """What the verdict needs of the lap's commit (lap/commit.py's LapCommit); in the lap
    (kind in_lap), of the agent's work not yet committed: only whether it changed a file."""

    files_changed: int
    refusal: tuple[str, str] | None = None  # why the hooks or git (a split: the planner) refused it, and their output
    nested: list[str] = field(default_factory=list)  # repositories made inside the tree: gitlinks no commit holds
    ticked: list[str] = field(default_factory=list)  # the TODO items it ticked
    todo_before: Counts = field(default_factory=_no_items)  # the TODO's items on the last green commit
    todo: Counts = field(default_factory=_no_items)  # and in the commit
    split: bool = False  # ralph's own commit of a stuck item's steps (split.py), or that commit rebased


@dataclass(frozen=True, kw_only=True)
class Checked:
    """The checks' results on the lap's commit."""

    results: list[CheckResult]
    removed: list[str]  # untracked files deleted before the checks (with strict: the lap's)


class CannotCheck(Exception):
    """The lap's commit cannot be made ready for its checks (a broken lockfile, gitlinks that
    lead nowhere): the lap's doing, so the lap is red for it."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail = reason, detail


Kind = Literal["lap", "split", "in_lap"]


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """All a verdict is decided from, gathered by the lap."""

    agent: AgentResult | None  # its outcome; None: no agent's to weigh (a split, or in_lap: still at work)
    commit: CommitFacts
    guard: GuardReport | None = None  # what the lap may not change; None: not looked at (a split: ralph's edit)
    checks: Checked | CannotCheck | None = None  # None: not run (yet: see wants_checks)
    last_green: list[CheckResult]  # the last green commit's results: the ratchet's reference
    strict: bool  # config.strict: files deleted before the checks count against a red lap
    judge: JudgeRecord | None = None  # the judge role's record, once it was asked (wants_judge)
    threshold: float | None = None  # roles.judge.threshold, named in a held lap's reason
    caller_done: bool | None = None  # a ralph.api caller's is_done on a done lap's tree; None: not asked
    kind: Kind = "lap"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """A lap's verdict and the evidence for it, as its note keeps them."""

    status: LapStatus
    reason: str
    output_tail: str = ""
    checks: list[CheckResult] = field(default_factory=list)
    files_changed: int = 0
    guard: GuardReport = field(default_factory=GuardReport)
    comparison: ratchet.Comparison = field(default_factory=ratchet.Comparison)
    removed: list[str] = field(default_factory=list)
    judge: JudgeRecord | None = None
    # Green, and it ticked an item, raised the passing tests, or split a stuck item (the laps after
    # it face other items than the stuck one).
    progress: bool = False
    # Green, every check passes, no TODO item is open, a judge (if asked) passed it, and a ralph.api
    # caller's is_done (if given) holds.
    done: bool = False
    stop: str = ""  # why the run cannot go on after this lap (a disk that stays full): the error it stops with


def decide(evidence: Evidence) -> Verdict:
    """The verdict on `evidence`: the agent's outcome and the commit first, when they settle it;
    then the guard and the checks against the last green commit's (the ratchet); then the judge's
    record, when the lap asked the role for one."""
    settled = _before_checks(evidence)
    if settled is not None:
        return settled
    checks, guard = evidence.checks, evidence.guard if evidence.guard is not None else GuardReport()
    if checks is None:
        raise ValueError("nothing before the checks settles this lap: it needs its checks (wants_checks)")
    if isinstance(checks, CannotCheck):  # what the lap may not change first: often the cause (a manifest)
        reason = "; ".join([*guard.problems, checks.reason])
        return Verdict(
            status=LapStatus.RED, reason=reason, output_tail=checks.detail, files_changed=evidence.commit.files_changed
        )
    verdict = _after_checks(evidence, guard, checks)
    if evidence.judge is not None and verdict.status == LapStatus.GREEN:
        verdict = _judged(verdict, evidence.judge, evidence.threshold)
    return _counted(evidence, verdict) if verdict.status == LapStatus.GREEN else verdict


def wants_checks(evidence: Evidence) -> bool:
    """Does the lap need its checks run: nothing before them (the agent's outcome, the commit)
    settles it?"""
    return _before_checks(evidence) is None


def wants_judge(verdict: Verdict) -> bool:
    """Is this a verdict the judge role (when roles.judge is on) should score: green, and not
    scored yet? The lap asks the role and decides again with its record."""
    return verdict.status == LapStatus.GREEN and verdict.judge is None


def _before_checks(evidence: Evidence) -> Verdict | None:
    """The verdict when the agent's outcome or the commit settles it: nothing to check."""
    agent, commit = evidence.agent, evidence.commit
    changed = commit.files_changed
    if agent is not None and agent.outcome != "ok":
        status = {"error": LapStatus.ERROR, "limited": LapStatus.LIMITED}.get(agent.outcome, LapStatus.RED)
        reason = f"agent error: {_first_line(agent.detail)}" if agent.outcome == "error" else _first_line(agent.detail)
        return Verdict(status=status, reason=reason, output_tail=agent.detail, files_changed=changed)
    if commit.refusal is not None:
        why, output = commit.refusal
        return Verdict(status=LapStatus.RED, reason=why, output_tail=output, files_changed=changed)
    if not changed:
        return Verdict(status=LapStatus.RED, reason="the lap changed nothing")
    if commit.nested:
        return Verdict(
            status=LapStatus.RED,
            reason=f"the lap made repositories inside the tree, whose files no commit holds: "
            f"{', '.join(commit.nested[:5])} — commit their files in the repository itself",
            files_changed=changed,
        )
    return None


def _after_checks(evidence: Evidence, guard: GuardReport, checked: Checked) -> Verdict:
    """Red for any problem: a check that could not run, what the guard found, what regressed
    against the last green commit, ticks with nothing done; else green."""
    results, removed, last_green = checked.results, checked.removed, evidence.last_green
    comparison = ratchet.compare(last_green, results, guard)
    problems = comparison.unrun + guard.problems + comparison.problems
    if guard.idle_ticks and not _made_something_pass(last_green, results, comparison):
        problems.append(guard.idle_ticks)
    if problems and removed and evidence.strict and evidence.kind != "split":  # a split's commit is ralph's
        problems.append(f"files the commit lacks were deleted before the checks: {', '.join(removed[:5])}")
    green = Verdict(
        status=LapStatus.GREEN,
        reason=_green_reason(evidence, results),
        checks=results,
        files_changed=evidence.commit.files_changed,
        guard=guard,
        comparison=comparison,
        removed=removed,
    )
    if problems:
        return replace(green, status=LapStatus.RED, reason="; ".join(problems), output_tail=comparison.failing_output)
    return green


def _green_reason(evidence: Evidence, results: list[CheckResult]) -> str:
    commit = evidence.commit
    if evidence.kind == "split":
        return f"split into {commit.todo.total - commit.todo_before.total} steps; {ratchet.green_reason(results)}"
    return ratchet.green_reason(results)


def _judged(green: Verdict, record: JudgeRecord, threshold: float | None) -> Verdict:
    """The judge's record on a lap the checks passed: held back, it is red; unable to answer, the
    checks alone decide."""
    if record.status == "unavailable":
        return replace(green, judge=record, reason=f"{green.reason}; {record.detail} (judged by the checks alone)")
    if record.status == "passed":
        return replace(green, judge=record, reason=f"{green.reason}; the judge scored {record.score}")
    low = record.score is not None and threshold is not None and record.score < threshold
    why = [f"score {record.score} below {threshold}"] if low else []
    why += [f"blocking: {'; '.join(record.blocking)}"] if record.blocking else []
    reason = f"judge: {', '.join(why)}"
    return replace(green, judge=record, status=LapStatus.RED, reason=reason, output_tail=next_lap_text(record))


def _counted(evidence: Evidence, green: Verdict) -> Verdict:
    """A green verdict's progress and done."""
    commit = evidence.commit
    more_passing = passing_tests(green.checks) > passing_tests(evidence.last_green)
    # With a judge, done also needs the judge's pass: "unavailable" is not one.
    judge_passed = green.judge is None or green.judge.status == "passed"
    done = checks_done(green.checks, commit.todo) and judge_passed
    held = done and evidence.caller_done is False
    return replace(
        green,
        progress=bool(commit.ticked) or more_passing or commit.split,
        done=done and not held,
        reason=f"{green.reason}; not done: the caller's is_done does not hold" if held else green.reason,
    )


def _made_something_pass(before: list[CheckResult], now: list[CheckResult], comparison: ratchet.Comparison) -> bool:
    """Is a test, or a check, passing now that was not on the last green commit? That is work,
    however small the diff (a whitespace fix inside a string literal)."""
    passed_before = {check.command for check in before if check.passed}
    return bool(comparison.newly_passing) or any(check.passed and check.command not in passed_before for check in now)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "no detail")


class Overrule(Enum):
    """Every way a decided lap turns red after the fact, as its reason says it; each {} is one of
    the facts `overruled` is given."""

    # By the lap, once decided: what it did besides its work.
    STRAY_TICKS = "ticked items it did not claim, which other laps work on: {}"
    TAMPERED = "the lap changed the repository outside its workspace, restored: {}"
    # A full disk cut the lap short, its files deleted: the space is free again, or not (the run stops).
    DISK_FREED = "the lap filled the disk of its workspace; its files were deleted, and {} is free again"
    DISK_FULL = "{}, not with the lap's files"
    # Advancing: a green lap that could not advance the green line.
    LOST_CLAIMS = (
        "its claims were let go of during the lap (its worker was taken for dead: no heartbeat for "
        "limits.worker_timeout) and its items given to other laps; not advanced"
    )
    LINE_MOVED = "the green line kept moving during the lap; not advanced"
    REBASE_CONFLICT = (
        "conflict: the green line moved to {} during the lap, and the lap's changes to {} conflict with it"
    )
    UNLANDED_INTERRUPTED = "interrupted before it landed; its items are done again"
    # Reading the run's state: a lap recorded green whose holder died before it landed.
    NEVER_LANDED = (
        "its slot or worker died before the lap landed: its claims were let go of and its items given to "
        "other laps; not advanced"
    )


_STOPS = {Overrule.DISK_FULL: "{}, and not with lap {}'s files (deleted) — free some space, then `ralph run` goes on"}


def overruled(verdict: Verdict | None, why: Overrule, *facts: object, output_tail: str = "") -> Verdict:
    """Red, whatever `verdict` said, for `why` (told its `facts`): of the verdict only the files
    changed stand, neither progress nor done. None: no verdict to keep anything of (a full disk
    cut the lap short before one; a stored note keeps its own evidence: LapRecord.overruled)."""
    return Verdict(
        status=LapStatus.RED,
        reason=why.value.format(*facts),
        output_tail=output_tail,
        files_changed=verdict.files_changed if verdict is not None else 0,
        stop=_STOPS.get(why, "").format(*facts),
    )
