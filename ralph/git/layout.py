"""Where ralph keeps a run in git: every ref name and run folder, spelled here and nowhere else.

All of it lives under the repository's common git dir, nothing in the user's work tree:

    refs/heads/ralph/<run>            the green line: its tip is the last green commit
    refs/ralph/<run>/run              the run's record (a blob), written when the run starts
    refs/ralph/<run>/base             where the run started
    refs/ralph/<run>/laps/<n>         every lap's commit, green or red
    refs/ralph/<run>/rebased/<n>      a lap's own commit, before it was rebased onto a moved line
    refs/ralph/<run>/landed           the green commit `ralph land` last brought onto a branch
    refs/ralph/<run>/told/<ns>        a message for the next lap (`ralph tell`), a blob
    refs/ralph/<run>/claims/<item>    `--parallel`: a TODO item a slot works on
    refs/ralph/<run>/started/<n>      `--parallel`: lap n is under way
    refs/ralph/<run>/numbered         `--parallel`: the last lap number taken
    refs/ralph/<run>/workers/<n>      `--remote`: worker n, moved by its heartbeat
    refs/notes/ralph                  lap records: a JSON note on each lap commit
    refs/ralph-remote/notes           `--remote`: the remote's notes as last fetched
    <git-common-dir>/ralph/<run>/     the run's lock, its laps' logs and transcripts (lap-<n>/)
    <git-common-dir>/ralph/.answers/  what status, log and show printed, for the same question asked
                                      again (ralph/commands/answers.py, which runs this file alone)

Names only: nothing here runs git, so any module may ask (ralph/isolation/ included).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

RUNS = "refs/ralph/"  # every run's refs but its branch
BRANCHES = "refs/heads/ralph/"  # every run's green line
NOTES = "refs/notes/ralph"  # every run's lap records
FETCHED_NOTES = "refs/ralph-remote/notes"  # the remote's notes as last fetched, to merge with ours
OURS = (RUNS, BRANCHES, NOTES)  # every ref ralph writes in the user's repository
RECORDS = f"{RUNS}*/run"  # every run's record, as a pattern of `git ls-remote`
FOLDER = "ralph"  # in the common git dir: the runs' folders, the notes' lock


@dataclass(frozen=True)
class RunRefs:
    """The refs of one run, by name: `RunRefs(run).branch`, `RunRefs(run).lap(3)`. A folder of
    refs (ending in /) is named in the plural, one ref in it by the singular."""

    run: str

    @property
    def all(self) -> str:
        """The folder of every ref of the run but its branch."""
        return f"{RUNS}{self.run}/"

    @property
    def branch(self) -> str:
        return f"{BRANCHES}{self.run}"

    @property
    def base(self) -> str:
        return f"{self.all}base"

    @property
    def record(self) -> str:
        return f"{self.all}run"

    @property
    def landed(self) -> str:
        """The green commit `ralph land` last brought onto a branch: a later land starts there."""
        return f"{self.all}landed"

    @property
    def numbered(self) -> str:
        """The last lap number taken, moved with each started ref in one compare-and-swap."""
        return f"{self.all}numbered"

    @property
    def laps(self) -> str:
        return f"{self.all}laps/"

    def lap(self, number: int) -> str:
        return f"{self.laps}{number}"

    @property
    def rebased(self) -> str:
        return f"{self.all}rebased/"

    def rebased_lap(self, number: int) -> str:
        """A lap's commit as it was before it was rebased onto a green line that moved."""
        return f"{self.rebased}{number}"

    @property
    def told(self) -> str:
        return f"{self.all}told/"

    def message(self, at_ns: int) -> str:
        """A message left for the next lap, named by when (sorted as numbers: oldest first)."""
        return f"{self.told}{at_ns}"

    @property
    def claims(self) -> str:
        return f"{self.all}claims/"

    def claim(self, item: str) -> str:
        """A TODO item's claim, named by its text's hash (ticking it does not change its text)."""
        return self.claims + hashlib.sha256(item.encode()).hexdigest()[:20]

    @property
    def started(self) -> str:
        return f"{self.all}started/"

    def started_lap(self, number: int) -> str:
        return f"{self.started}{number}"

    @property
    def workers(self) -> str:
        return f"{self.all}workers/"

    def worker(self, number: int) -> str:
        return f"{self.workers}{number}"


def numbered(folder: str, refs: Mapping[str, str]) -> dict[int, str]:
    """{n: what it points at} of the refs named `folder` + a number (`…/laps/3`), by number."""
    names = {ref[len(folder) :]: sha for ref, sha in refs.items() if ref.startswith(folder)}
    return dict(sorted((int(name), sha) for name, sha in names.items() if name.isdigit()))


def run_of_record(ref: str) -> str | None:
    """The run whose record `ref` is (refs/ralph/<run>/run); None for any other ref."""
    run, _, rest = ref.removeprefix(RUNS).partition("/")
    return run if ref.startswith(RUNS) and run and rest == "run" else None


def ralph_dir(common_dir: Path) -> Path:
    """`<git-common-dir>/ralph`: every run's folder, and the notes' lock."""
    return common_dir / FOLDER


def run_dir(common_dir: Path, run: str) -> Path:
    """`<git-common-dir>/ralph/<run>`: the run's lock and its laps' logs and transcripts."""
    return ralph_dir(common_dir) / run


def answers_dir(common_dir: Path) -> Path:
    """`<git-common-dir>/ralph/.answers`: what status, log and show printed (a name no run takes)."""
    return ralph_dir(common_dir) / ".answers"


def lap_dir(run_folder: Path, lap: int) -> Path:
    return run_folder / f"lap-{lap}"


def notes_lock(common_dir: Path) -> Path:
    """The lock the writers of the notes take turns by (`git notes` has no compare-and-swap)."""
    return ralph_dir(common_dir) / "notes.lock"
