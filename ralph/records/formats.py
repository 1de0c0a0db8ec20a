"""What ralph stores, versioned: a run's record and each lap's note (ledger.py reads them from git).

Records outlive the ralph that wrote them: each carries its FORMAT; a reader takes every
earlier format (migrated here, in one place) and names a newer one instead of failing.
"""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from ralph.agents.base import AgentResult
from ralph.agents.judge import JudgeRecord
from ralph.config import Config
from ralph.errors import RalphError
from ralph.todo import Counts
from ralph.verdict.checks import CheckResult
from ralph.verdict.decide import LapStatus, Verdict

# 1: ralph 0.1, no "format" key. 2: a lap's agent says whether its endpoint failed
# (endpoint_failed) and a check's tests carry pytest's set-up; both new fields have defaults.
# 3: a lap's prepare_s, and pytest's set-up names modules run from the user's work tree.
# 4: a lap's judge (roles.judge) and the user's messages it was told (told).
# 5: a lap may be `limited` (its agent hit a usage limit: limited_until), usage has a cost_usd, and
#    a lap says which agent ran it (fallback; agent.name, agent.model).
# 6: a run's config may have `mcp:`, and a lap's agent says which MCP tools it called (mcp_calls).
# 7: a lap of a parallel run says its slot and the items it claimed.
# 8: a lap of a remote's run says its worker; a run's record says whether a remote keeps it.
# 9: a run's record may name the GitHub issue it came from (issue); a lap says whether agent.escalate
#    ran it (escalated), the item it split (split), and whether it was one of `--best-of` N (best_of).
FORMAT = 9
# A commit as ralph writes one: git's full object id (SHA-1 or SHA-256). Allowed, not filtered: a
# stored value reaches git's command line (`git diff PARENT`), where `--output=FILE` is an option.
ObjectId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")]


MIGRATIONS = {version: lambda data: data for version in (1, 2, 3, 4, 5, 6, 7, 8)}  # format N -> N+1, in order


class NewerFormat(RalphError):
    """A record written by a later ralph than this one."""


class IssueLink(BaseModel):
    """The GitHub issue a run's goal and checklist came from (`ralph run --issue N`)."""

    number: int
    title: str
    url: str


class BestOf(BaseModel):
    """A lap that was one of `--best-of` N candidates on one item, from one green commit."""

    first_lap: int  # the lap number of the first candidate: it names the round
    of: int  # N
    chosen: bool = False  # the candidate that landed
    # The lap's progress and done as it measured them, kept here: the lap's own fields are False
    # until the round chooses it, so a candidate counts for the run only once it landed.
    progress: bool = False
    done: bool = False


class RunRecord(BaseModel):
    """Written once when a run starts, as a blob its record ref (layout.RunRefs.record) points at."""

    format: int = FORMAT
    run: str
    created_at: str
    base: ObjectId
    user_branch: str | None
    config: Config  # the configuration the run is judged by
    baseline: list[CheckResult]  # the checks on the base commit
    on_remote: bool = False  # started by `ralph run --remote`: its refs are the remote's, clones copy them
    issue: IssueLink | None = None  # `ralph run --issue N`: the issue its goal and checklist came from


class TestChanges(BaseModel):
    __test__ = False

    passing_before: int  # passing tests on the last green commit
    passing_after: int
    newly_failing: list[str] = []
    newly_passing: list[str] = []


class LapRecord(BaseModel):
    """The JSON note on each lap commit."""

    # allow_inf_nan: ralph writes none; a note edited on a remote may. The aliases: a field's name
    # in the code is not always its key in the note, which stays as older ralphs wrote it.
    model_config = ConfigDict(allow_inf_nan=False, validate_by_name=True, serialize_by_alias=True)

    format: int = FORMAT
    run: str
    lap: int
    status: LapStatus
    reason: str
    started_at: str
    duration_s: float
    prepare_s: float = 0.0  # of duration_s: the workspace reset to the start commit, copy and setup
    commit: ObjectId
    parent: ObjectId  # the last green commit the lap started from
    checks: list[CheckResult] = []
    agent: AgentResult
    todo: Counts  # the TODO's items after the lap
    ticked: list[str] = []
    files_changed: int = 0
    progress: bool = False  # objective progress: green, and ticked an item or raised the passing tests
    done: bool = False  # every check passes and no TODO item is open
    output_tail: str = ""  # the output that explains a red verdict (check, hook or agent)
    protected_touched: list[str] = []  # protected files the lap modified or deleted
    granted: list[str] = []  # paths not the lap's to change that a grant of the user's TODO opened
    tests: TestChanges | None = None  # where a check ran pytest
    flaky: list[str] = []  # checks that failed, then passed on a retry
    removed_before_checks: list[str] = []  # untracked (strict: and ignored) files deleted
    judge: JudgeRecord | None = None  # when roles.judge is on and the checks passed
    told: list[str] = []  # messages from the user (`ralph tell`) this lap's prompt carried
    # Which of config.agents ran it: 0 the agent, N its Nth fallback (the last: agent.escalate).
    agent_index: int = Field(0, alias="fallback")
    slot: int | None = None  # `--parallel`: the slot that ran it (1..N); None when laps run one at a time
    items: list[str] = []  # `--parallel`: the TODO items it claimed
    worker: str | None = None  # `--remote`: the worker that ran it (host:pid:tag); its number is `slot`
    escalated: bool = False  # run by agent.escalate, after escalate_after red laps in a row on one item
    split: str | None = None  # a split lap: the item the planner split into smaller ones
    best_of: BestOf | None = None  # `--best-of N`: one of N candidate laps on one item

    def overruled(self, verdict: Verdict) -> LapRecord:
        """This note as an overruling verdict (verdict/decide.py's overruled) leaves it: its
        status, reason, progress and done; the evidence it recorded kept."""
        said = {"status": verdict.status, "reason": verdict.reason, "progress": verdict.progress, "done": verdict.done}
        return self.model_copy(update=said)


def migrated(text: str, what: str) -> dict:
    """A record's JSON at the current FORMAT; NewerFormat for one a later ralph wrote, ValueError
    for one that is no record at all."""
    try:
        data = json.loads(text)
    except RecursionError:  # a note nested deep on purpose (notes can be pushed to a remote by anyone)
        raise ValueError("nested too deep to be a record") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    found = data.get("format", 1)
    if not isinstance(found, int) or found < 1:
        raise ValueError(f"format {found!r} is no format ralph ever wrote")
    if found > FORMAT:
        raise NewerFormat(
            f"{what} was written by a newer ralph (format {found}; this one reads up to "
            f"{FORMAT}) — upgrade ralph to read it"
        )
    for version in range(found, FORMAT):
        data = MIGRATIONS[version](data)
    return dict(data, format=FORMAT)
