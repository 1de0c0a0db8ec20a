"""The judge: a model of its own scores a lap the checks passed, and can hold it back.

It sees the goal, the items the lap ticked, the whole diff, the new text of the files the
lap changed, PROGRESS.md and the agent's summary, and answers by calling `verdict` with a
score per dimension — each with an evidence quote, which must occur in the diff or in a
changed file or the score does not count — plus blocking items and suggestions. The lap's
score mixes the judge's (the mean of the scores that count) with ralph's own measurable
signals; below the threshold, or with any blocking item, the lap is red ("judge"). A judge
that cannot answer (its endpoint down, no valid verdict) leaves the lap to the checks alone,
and says so in the note.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, ValidationError

from ralph import git
from ralph.agents.base import Usage
from ralph.agents.conversation import Conversation, ConversationLimits, EndpointFailed, Finished, FormatError, Role
from ralph.agents.mcp_tools import McpTools
from ralph.agents.model import PREFLIGHT, api_key_of, endpoint_of, preflight
from ralph.agents.replies import ToolCall, schema_problems
from ralph.agents.retry import RequestFailed
from ralph.agents.tools import function_schema
from ralph.agents.transcript import Transcript
from ralph.config import Config
from ralph.config.agent import AgentConfig, JudgeConfig
from ralph.errors import RalphError
from ralph.show import ui

LOOKUPS = 8  # MCP tool calls the judge may make before its verdict (mcp.roles has judge)
LOOKUP_SECONDS = 120  # for all of them together
RETRY_SECONDS = 60  # the judge's own budget for retries: an outage costs a lap about a minute
ATTEMPTS = 3  # replies in a row without a verdict that fits the schema, then "unavailable"
DIFF_CAP = 60_000  # characters of diff the judge sees
FILE_CAP = 20_000  # characters of each changed file's new text
FILES_CAP = 120_000
DIFF_BUDGET = 400  # changed lines beyond which the "diff within budget" signal is 0
EVIDENCE_MIN = 8  # characters of a quote (whitespace runs as one): shorter ones occur anywhere
PROGRESS_BUDGET = 8_000  # characters of PROGRESS.md
DIMENSIONS = (
    "does what the ticked items ask",
    "complete",
    "clear and minimal",
    "tests adequate for it",
    "follows the repository's conventions",
)
SYSTEM_PROMPT = f"""\
You review one lap of a coding job: a diff that already passes the repository's checks. The
tests are the floor, not the ceiling: judge whether the work is what was asked, complete and
good. Call the tool `verdict` once. For each dimension — {"; ".join(DIMENSIONS)} — first
quote the evidence (copied exactly from the diff or a changed file: ralph checks that it
occurs there, and a score whose quote is not found does not count), then give a reason, then
the score from 0 to 1:
- 0.3: wrong or mostly missing; a reviewer would reject it.
- 0.6: works but with real gaps: a case missed, a test absent, noise in the diff.
- 0.9: what a careful reviewer would approve as is.
`blocking`: what must change before this lap can be kept (each one concrete and checkable),
or nothing. `suggestions`: improvements that should not block."""
LOOKUP_NOTE = f"""
Before the verdict you may look things up with the mcp__ tools (at most {LOOKUPS} calls): the
documentation or the issue the work is about. Evidence must still be quoted from the diff."""
VERDICT_TOOL = function_schema(
    "verdict",
    "Your verdict on the lap.",
    {
        "scores": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "dimension": {"type": "string"},
                    "evidence": {"type": "string"},
                    "reason": {"type": "string"},
                    "score": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["dimension", "evidence", "reason", "score"],
            },
        },
        "blocking": {"type": "array", "items": {"type": "string"}},
        "suggestions": {"type": "array", "items": {"type": "string"}},
    },
    ["scores", "blocking", "suggestions"],
)


class Score(BaseModel):
    dimension: str = Field(min_length=1)
    evidence: str = ""
    reason: str = ""
    score: float = Field(ge=0, le=1)
    counted: bool = True  # False: its evidence occurs nowhere in the diff or the changed files


class JudgeRecord(BaseModel):
    """The judge's part of a lap note (records/formats.py stores it): its scores, and whether it
    passed the lap, held it back or could not answer."""

    status: Literal["passed", "held", "unavailable"]
    score: float | None = None  # the lap's: (1 - weight) × signals + weight × judge
    judge_score: float | None = None  # the mean of the scores that count
    signals: dict[str, float] = {}  # ralph's own, each 0 or 1
    scores: list[Score] = []
    blocking: list[str] = []
    suggestions: list[str] = []
    detail: str = ""  # why it was unavailable
    usage: Usage = Field(default_factory=Usage)


class Review(BaseModel):
    """What the judge answers by calling `verdict`."""

    scores: list[Score] = Field(min_length=1)
    blocking: list[str] = []
    suggestions: list[str] = []


@dataclass(frozen=True)
class Material:
    """What the judge sees of a lap."""

    goal: str
    ticked: list[str]
    diff: str
    files: dict[str, str]  # changed path -> its new text
    progress: str
    summary: str


def check_independence(cfg: Config, role: JudgeConfig, judge: AgentConfig) -> None:
    """A judge on the agent's own model or provider tends to approve its own kind of work."""
    if cfg.agent.kind != "openai":
        return
    same_model = judge.model == cfg.agent.model
    same_provider = urlsplit(endpoint_of(judge)).netloc == urlsplit(endpoint_of(cfg.agent)).netloc
    if not (same_model or same_provider):
        return
    what = f"the agent's model ({judge.model})" if same_model else f"the agent's provider ({endpoint_of(judge)})"
    if role.require_independent:
        raise RalphError(f"roles.judge runs on {what} and roles.judge.require_independent is true — pick another")
    ui.warn(f"the judge runs on {what}: it may approve what the agent does; a judge of its own judges better")


def material(
    cfg: Config,
    top: Path,
    green: str,
    commit: str,
    changes: dict[str, tuple[str, str]],
    ticked: list[str],
    summary: str,
) -> Material:
    """What the judge is shown of a lap: the diff whole (a lap whose diff does not fit is held,
    not judged on a part), changed files within a budget, PROGRESS.md and the summary capped."""
    diff = git.run(top, "diff", "--no-color", "--no-renames", green, commit, "--").output
    files: dict[str, str] = {}
    total = 0
    for path, (status, mode) in changes.items():
        if status == "D" or mode not in ("100644", "100755"):  # regular files only
            continue
        text = _capped(git.show_file(top, commit, path) or "", min(FILE_CAP, max(0, FILES_CAP - total)))
        files[path] = text
        total += len(text)
    progress = _capped(git.show_file(top, commit, cfg.files.progress) or "", PROGRESS_BUDGET)
    return Material(
        cfg.goal, [_capped(item, 500) for item in ticked[:50]], diff, files, progress, _capped(summary, 4000)
    )


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


def signals(
    material: Material, *, all_pass: bool, passing_before: int, passing_after: int, progress_changed: bool
) -> dict[str, float]:
    """ralph's own measurable signals, each 0 or 1 (docs/agents.md: The judge)."""
    changed_lines = sum(
        1 for line in material.diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )
    return {
        "checks all pass": float(all_pass),
        "passing tests not fewer": float(passing_after >= passing_before),
        "PROGRESS.md rewritten, within budget": float(progress_changed and len(material.progress) <= PROGRESS_BUDGET),
        "diff within budget": float(changed_lines <= DIFF_BUDGET),
    }


class Judge:
    def __init__(self, role: JudgeConfig, config: AgentConfig):
        self.role, self.config = role, config
        self.mcp: McpTools | None = None  # tools to look things up with before the verdict (mcp.roles has judge)

    def check_endpoint(self) -> None:
        """A judge that is down at the start is a warning: laps fall back to the checks."""
        messages = [{"role": "user", "content": PREFLIGHT}]
        try:
            preflight(self.config, messages, [VERDICT_TOOL], deadline=time.monotonic() + 30, max_tokens=16, attempts=2)
        except RequestFailed as exc:
            ui.warn(
                f"the judge's endpoint does not answer ({exc.message}); laps are judged by the checks until it does"
            )

    def score(self, material: Material, signals: dict[str, float], log_dir: Path) -> JudgeRecord:
        """The judge's record of a lap the checks passed: scored, held back, or unavailable
        (the lap's verdict takes it from there: verdict/decide.py)."""
        if len(material.diff) > DIFF_CAP:  # the judge vouches only for what it saw whole
            size = f"{len(material.diff):,} characters; at most {DIFF_CAP:,}"
            too_big = f"The diff is too large to review ({size}): make smaller laps"
            Transcript(log_dir / "judge.jsonl", secret=api_key_of(self.config)).write("end", held=too_big)
            return JudgeRecord(status="held", signals=signals, blocking=[too_big], usage=Usage())
        conversation = Conversation(self.config, self._role(material), log_dir / "judge.jsonl", self.mcp)
        end = conversation.run()
        if isinstance(end, Finished):
            record = self._weighed(end.result, material, signals, conversation.usage)
            conversation.transcript.write("end", record=record.model_dump())
            return record
        unavailable = f"judge unavailable: {end.failure.message if isinstance(end, EndpointFailed) else end}"
        conversation.transcript.write("end", unavailable=unavailable)
        return JudgeRecord(status="unavailable", signals=signals, detail=unavailable, usage=conversation.usage)

    def _role(self, material: Material) -> Role:
        return Role(
            name="judge",
            system=SYSTEM_PROMPT + (LOOKUP_NOTE if self.mcp else ""),
            opening=_shown(material),
            tools=[VERDICT_TOOL],
            run_tool=_verdict,
            ending="verdict",
            nudge="Call the tool verdict.",
            limits=ConversationLimits(
                turns=ATTEMPTS + LOOKUPS,
                retry_seconds=RETRY_SECONDS,
                malformed=ATTEMPTS,
                text_only=ATTEMPTS,
                lookups=LOOKUPS,
                lookup_seconds=LOOKUP_SECONDS,
            ),
        )

    def _weighed(self, review: Review, material: Material, signals: dict[str, float], usage: Usage) -> JudgeRecord:
        """The lap's score: the judge's scores whose evidence is found, mixed with ralph's signals."""
        for given in review.scores:
            given.counted = _found(given.evidence, material)
        counted = [given.score for given in review.scores if given.counted]
        judge_score = sum(counted) / len(counted) if counted else 0.0
        deterministic = sum(signals.values()) / len(signals)
        total = round((1 - self.role.weight) * deterministic + self.role.weight * judge_score, 3)
        held = total < self.role.threshold or bool(review.blocking)
        return JudgeRecord(
            status="held" if held else "passed",
            score=total,
            judge_score=round(judge_score, 3),
            signals=signals,
            scores=review.scores,
            blocking=review.blocking,
            suggestions=review.suggestions,
            usage=usage,
        )


def _verdict(call: ToolCall, transcript: Transcript) -> str:
    """The judge's one tool: a verdict that fits the schema ends its conversation."""
    try:
        review = Review.model_validate(call.arguments)
    except ValidationError as exc:
        raise FormatError(f"format error: {schema_problems(exc)}; call verdict again") from None
    raise Finished(review)


def _found(evidence: str, material: Material) -> bool:
    """Does the quote occur in what the lap changed: the diff's lines without their markers (no
    headers, no hunk lines), or a changed file's text? Whitespace runs compare as one space."""
    quote = " ".join(evidence.split())
    if len(quote) < EVIDENCE_MIN:
        return False
    changed = [line[1:] for line in material.diff.splitlines() if line[:1] in "+- " and line[:3] not in ("+++", "---")]
    return any(quote in " ".join(text.split()) for text in ["\n".join(changed), *material.files.values()])


def _shown(material: Material) -> str:
    """The lap in markdown, every fence longer than any run of backticks inside it, so nothing a
    lap wrote can close one and speak as ralph."""
    ticked = "\n".join(f"- {item}" for item in material.ticked) or "(none)"
    files = "\n\n".join(f"## {json.dumps(path)}\n{_fenced(text)}" for path, text in material.files.items())
    return (
        f"# Goal\n{material.goal}\n\n# Items the lap ticked\n{_fenced(ticked)}\n\n"
        f"# The agent's summary\n{_fenced(material.summary or '(none)')}\n\n"
        f"# The diff\n{_fenced(material.diff, 'diff')}\n\n"
        f"# The changed files, as they are now\n{files or '(none)'}\n\n"
        f"# PROGRESS.md\n{_fenced(material.progress or '(empty)')}\n"
    )


def _fenced(text: str, language: str = "") -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def next_lap_text(record: JudgeRecord) -> str:
    """What the next lap is told of a lap the judge held back."""
    blocking = "".join(f"- [ ] {item}\n" for item in record.blocking)
    suggestions = "".join(f"- {item}\n" for item in record.suggestions)
    low = "".join(
        f"- {score.dimension}: {score.score:g} — {score.reason}\n" for score in record.scores if score.counted
    )
    return (
        "The judge held the lap back"
        + (f" (score {record.score}).\n" if record.score is not None else ".\n")
        + (f"Blocking, fix these:\n{blocking}" if blocking else "")
        + (f"Suggestions:\n{suggestions}" if suggestions else "")
        + (f"Scores:\n{low}" if low else "")
    )
