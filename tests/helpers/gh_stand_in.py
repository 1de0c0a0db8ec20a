"""A stand-in for GitHub's `gh`, first on PATH: it answers the commands ralph uses as the GitHub
CLI manual (gh 2.8x) shows them, from a JSON state file a test fills, and logs what it was asked.

Answered: `gh issue view N --json FIELDS`, `gh repo view --json FIELDS` (the repository is
owner/repo), `gh pr list --head B --state open --json FIELDS` (B a branch: gh takes no
`owner:branch` there), `gh pr create --base B --head [OWNER:]H --title T --body-file - [--draft]`
(it prints the new URL, as gh does; OWNER: a fork's). An unknown JSON field, a missing issue, a second open pull request for a branch, and a
create without --title and a body are refused with gh's words and exit codes; `logged_in: false`
makes every command exit 4, as gh does without a login.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

# The JSON fields gh documents for each command (the manual's "JSON Fields"): anything else is
# refused as gh refuses it, so ralph cannot come to depend on a field gh does not have.
ISSUE_FIELDS = (
    "assignees author body closed closedAt closedByPullRequestsReferences comments createdAt id isPinned "
    "labels milestone number projectCards projectItems reactionGroups state stateReason title updatedAt url"
).split()
PR_FIELDS = (
    "additions assignees author autoMergeRequest baseRefName baseRefOid body changedFiles closed closedAt "
    "closingIssuesReferences comments commits createdAt deletions files fullDatabaseId headRefName headRefOid "
    "headRepository headRepositoryOwner id isCrossRepository isDraft labels latestReviews maintainerCanModify "
    "mergeCommit mergeStateStatus mergeable mergedAt mergedBy milestone number potentialMergeCommit "
    "projectCards projectItems reactionGroups reviewDecision reviewRequests reviews state statusCheckRollup "
    "title updatedAt url"
).split()
# Of `gh repo view`'s fields, those this stand-in has values for (the manual lists many more).
REPO_FIELDS = "id name nameWithOwner owner url isFork".split()
OWNER = "owner"
REPO_URL = f"https://github.com/{OWNER}/repo"

SCRIPT = """#!{python}
import json, sys
sys.path.insert(0, {helpers!r})
from gh_stand_in import answer
sys.exit(answer({state!r}, {log!r}, sys.argv[1:]))
"""


@dataclass
class StandInGh:
    """The stand-in's files: `bin` goes first on PATH; `state` holds its issues and pull requests."""

    bin: Path
    state: Path
    log: Path

    @classmethod
    def install(cls, folder: Path, logged_in: bool = True) -> StandInGh:
        folder.mkdir(parents=True, exist_ok=True)
        stand_in = cls(folder / "bin", folder / "gh-state.json", folder / "gh-calls.jsonl")
        stand_in.bin.mkdir(exist_ok=True)
        script = stand_in.bin / "gh"
        helpers = str(Path(__file__).parent)
        script.write_text(
            SCRIPT.format(python=sys.executable, helpers=helpers, state=str(stand_in.state), log=str(stand_in.log))
        )
        script.chmod(0o755)
        stand_in.state.write_text(json.dumps({"logged_in": logged_in, "issues": {}, "pulls": []}))
        return stand_in

    def add_issue(self, number: int, title: str, body: str, state: str = "OPEN") -> None:
        data = json.loads(self.state.read_text())
        url = f"{REPO_URL}/issues/{number}"
        data["issues"][str(number)] = {"number": number, "title": title, "body": body, "state": state, "url": url}
        self.state.write_text(json.dumps(data))

    def pulls(self) -> list[dict]:
        return json.loads(self.state.read_text())["pulls"]

    def calls(self) -> list[dict]:
        """Each command gh was asked, in order: its argv and what came on stdin."""
        text = self.log.read_text() if self.log.exists() else ""
        return [json.loads(line) for line in text.splitlines()]


def answer(state_file: str, log_file: str, argv: list[str]) -> int:
    """What gh would print and exit with for `argv`."""
    stdin = sys.stdin.read() if "-" in _flags(argv).values() else ""
    with open(log_file, "a") as log:
        log.write(json.dumps({"argv": argv, "stdin": stdin, "cwd": os.getcwd()}) + "\n")
    state = json.loads(Path(state_file).read_text())
    if not state["logged_in"]:
        return _fail(
            "To get started with GitHub CLI, please run:  gh auth login\n"
            "Alternatively, populate the GH_TOKEN environment variable with a GitHub API authentication token.",
            4,
        )
    words, flags = [word for word in argv if not word.startswith("-")][:2], _flags(argv)
    if words == ["issue", "view"]:
        return _issue_view(state, argv, flags)
    if words == ["repo", "view"]:
        return _repo_view(flags)
    if words == ["pr", "list"]:
        return _pr_list(state, flags)
    if words == ["pr", "create"]:
        code = _pr_create(state, flags, stdin)
        Path(state_file).write_text(json.dumps(state))
        return code
    return _fail(f"unknown command {' '.join(words)!r} for gh (this stand-in)", 1)


def _flags(argv: list[str]) -> dict[str, str]:
    """--name=value and --name value, as pflag reads them (a bare --draft is "true")."""
    flags, at = {}, 0
    while at < len(argv):
        word = argv[at]
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            if not equals and name not in ("draft",) and at + 1 < len(argv):
                value, at = argv[at + 1], at + 1
            flags[name] = value if equals or name != "draft" else "true"
        at += 1
    return flags


def _fields(flags: dict[str, str], known: list[str]) -> list[str] | None:
    fields = flags.get("json", "").split(",")
    unknown = [field for field in fields if field not in known]
    if unknown:
        _fail(f'Unknown JSON field: "{unknown[0]}"\nAvailable fields:\n  ' + "\n  ".join(known), 1)
        return None
    return fields


def _issue_view(state: dict, argv: list[str], flags: dict[str, str]) -> int:
    fields = _fields(flags, ISSUE_FIELDS)
    if fields is None:
        return 1
    number = next(word for word in argv[2:] if not word.startswith("-"))
    found = state["issues"].get(number)
    if found is None:
        return _fail(
            f"GraphQL: Could not resolve to an issue or pull request with the number of {number}. (repository.issue)", 1
        )
    print(json.dumps({field: found.get(field) for field in fields}))
    return 0


def _repo_view(flags: dict[str, str]) -> int:
    fields = _fields(flags, REPO_FIELDS)
    if fields is None:
        return 1
    repo = {"id": "R_1", "name": "repo", "nameWithOwner": f"{OWNER}/repo", "url": REPO_URL, "isFork": False}
    repo["owner"] = {"id": "U_1", "login": OWNER}
    print(json.dumps({field: repo.get(field) for field in fields}))
    return 0


def _pr_list(state: dict, flags: dict[str, str]) -> int:
    fields = _fields(flags, PR_FIELDS)
    if fields is None:
        return 1
    if ":" in flags.get("head", ""):  # the manual: `--head`, "<owner>:<branch>" syntax not supported
        print("[]")
        return 0
    wanted = flags.get("state", "open").upper()
    pulls = [
        pull for pull in state["pulls"] if pull["headRefName"] == flags.get("head") and wanted in ("ALL", pull["state"])
    ]
    print(json.dumps([{field: pull.get(field) for field in fields} for pull in pulls]))
    return 0


def _pr_create(state: dict, flags: dict[str, str], stdin: str) -> int:
    if "title" not in flags or not ({"body", "body-file"} & flags.keys()):
        return _fail(
            "must provide `--title` and `--body` (or `--fill` or `fill-first` or `--fillverbose`) when not running interactively",
            1,
        )
    owner, _, head = flags["head"].rpartition(":")
    owner, base = owner or OWNER, flags.get("base", "main")
    for pull in state["pulls"]:
        same_head = pull["headRefName"] == head and pull["headRepositoryOwner"]["login"] == owner
        if same_head and pull["baseRefName"] == base and pull["state"] == "OPEN":
            return _fail(f'a pull request for branch "{head}" into branch "{base}" already exists:\n{pull["url"]}', 1)
    number = len(state["pulls"]) + 1
    body = stdin if flags.get("body-file") == "-" else flags.get("body", "")
    url = f"{REPO_URL}/pull/{number}"
    state["pulls"].append(
        {"number": number, "url": url, "state": "OPEN", "headRefName": head, "baseRefName": base,
         "headRepositoryOwner": {"id": f"id-of-{owner}", "login": owner}, "isCrossRepository": owner != OWNER,
         "title": flags["title"], "body": body, "isDraft": "draft" in flags}
    )  # fmt: skip
    print(url)
    return 0


def _fail(message: str, code: int) -> int:
    print(message, file=sys.stderr)
    return code
