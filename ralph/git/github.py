"""The one door to GitHub: `gh`, GitHub's own CLI, run as the user with the user's login (ralph
keeps no token), and the push that goes before a pull request.

The commands and their `--json` fields are those of the GitHub CLI manual (cli.github.com/manual,
gh 2.8x): `gh issue view`, `gh pr list`, `gh pr create`; exit code 4 means not logged in. Every
call is an argv list, each value given as `--flag=value`, so no text of an issue or a run is ever
read by a shell or taken for a flag; what gh prints is parsed whole.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ralph import git, todo
from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.show.text import printable

GH_TIMEOUT = 120  # seconds for one gh command (it talks to GitHub's API)
PUSH_TIMEOUT = 300
# What gh and git need of the user's environment to act as the user, as asked: a token gh reads
# (gh help environment), the ssh-agent, a program that hands git a password.
USER_LOGIN = (
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "SSH_AUTH_SOCK",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
)
WEB = ("https://", "http://")  # what a URL gh prints starts with (GitHub's, an Enterprise host's)
NOT_LOGGED_IN = 4  # gh help exit-codes: "If a command requires authentication, the exit code will be 4"
ISSUE_FIELDS = "number,title,body,url,state"
PR_FIELDS = "number,url,state,headRepositoryOwner"
# The owner in a GitHub remote's URL: https://github.com/OWNER/REPO, git@github.com:OWNER/REPO,
# ssh://git@github.com/OWNER/REPO (or a GitHub Enterprise host's).
_OWNER_IN_URL = re.compile(r"^(?:[a-z+]+://(?:[^@/]+@)?[^/]+/|[^@/:]+@[^:/]+:)([A-Za-z0-9][A-Za-z0-9-]*)/[^/]+$")


class GhFailed(RalphError):
    """A gh command that could not run or failed: the command and gh's first line, for people."""


@dataclass(frozen=True)
class Issue:
    """An issue as `gh issue view --json` gives it, its task list read as TODO.md is read."""

    number: int
    title: str  # on one line
    body: str
    url: str
    state: str  # OPEN or CLOSED
    items: list[str]  # the task list's open items (`- [ ] x`), in order: the run's items
    ticked: list[str]  # its items already ticked (`- [x] x`): kept in TODO.md as done

    @property
    def is_open(self) -> bool:
        return self.state == "OPEN"


@dataclass(frozen=True)
class Head:
    """A pull request's head: a branch pushed to a GitHub repository."""

    branch: str
    owner: str | None  # who owns the repository it was pushed to; None: a remote whose URL names none
    fork: bool  # that repository is not the one gh opens the pull request in

    @property
    def for_gh(self) -> str:
        """As `gh pr create --head` takes it: `owner:branch` for a fork, a plain branch otherwise
        (the manual: an organization as that owner is not supported everywhere, so only when needed)."""
        return f"{self.owner}:{self.branch}" if self.fork else self.branch


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    state: str  # OPEN, CLOSED or MERGED


class _IssueJson(BaseModel):  # the fields as gh names them
    number: int
    title: str
    body: str
    url: str
    state: str


class _OwnerJson(BaseModel):
    login: str


class _RepoJson(BaseModel):
    owner: _OwnerJson


class _PullJson(BaseModel):
    number: int
    url: str
    state: str
    headRepositoryOwner: _OwnerJson | None = None  # noqa: N815 (gh's name)


def issue(top: Path, number: int) -> Issue:
    """Issue `number` of the repository gh finds from `top`'s remotes."""
    args = ["issue", "view", str(number), f"--json={ISSUE_FIELDS}"]
    try:
        found = _IssueJson.model_validate_json(_gh(top, args))
    except ValidationError as exc:
        raise GhFailed(f"`gh issue view {number}` printed what ralph cannot read: {_first_line(str(exc))}") from None
    url = " ".join(printable(found.url).split())
    if found.number != number or not url.startswith(WEB):
        raise GhFailed(f"`gh issue view {number}` answered for another issue (#{found.number}, {url[:100]!r})")
    items = todo.parse(found.body)
    return Issue(
        number=number,
        title=" ".join(printable(found.title).split()) or f"issue #{number}",
        body=found.body,
        url=url,
        state=found.state.upper(),
        items=[printable(item.text) for item in items if not item.done],
        ticked=[printable(item.text) for item in items if item.done],
    )


def remote_owner(top: Path, remote: str) -> str | None:
    """Who owns the GitHub repository `remote` pushes to (a fork of the user's, say), from its URL
    as the user wrote it (pushurl first); None when the URL names no GitHub-like owner."""
    for key in (f"remote.{remote}.pushurl", f"remote.{remote}.url"):
        url = git.run(top, "config", "--get", key, check=False).output.strip()
        if url:
            found = _OWNER_IN_URL.match(url.removesuffix("/"))
            return found[1] if found else None
    return None


def head_of(top: Path, remote: str, branch: str) -> Head:
    """`branch` as pushed to `remote`: whose repository that is, from its URL, and whether that
    is a fork of the repository gh opens pull requests in (`gh repo view`)."""
    owner = remote_owner(top, remote)
    if owner is None:
        return Head(branch, None, fork=False)
    try:
        base = _RepoJson.model_validate_json(_gh(top, ["repo", "view", "--json=owner"])).owner.login
    except ValidationError as exc:
        raise GhFailed(f"`gh repo view` printed what ralph cannot read: {_first_line(str(exc))}") from None
    return Head(branch, owner, fork=base.lower() != owner.lower())


def open_pr(top: Path, head: Head) -> PullRequest | None:
    """The open pull request of `head`, if any. `gh pr list --head` rather than `gh pr view
    BRANCH`: none is an empty list, not an error told apart by its words. It takes no
    `owner:branch`, so the owner is matched here: another's fork may have a branch of that name."""
    args = ["pr", "list", f"--head={head.branch}", "--state=open", f"--json={PR_FIELDS}"]
    listing = _gh(top, args)
    try:
        pulls = [_PullJson.model_validate(each) for each in json.loads(listing)]
    except (ValueError, TypeError, ValidationError, RecursionError) as exc:
        raise GhFailed(f"`gh pr list` printed what ralph cannot read: {_first_line(str(exc))}") from None
    for pull in pulls:
        of = pull.headRepositoryOwner.login.lower() if pull.headRepositoryOwner else None
        if not pull.url.startswith(WEB):
            raise GhFailed(f"`gh pr list` printed no pull request URL: {_first_line(pull.url) or 'nothing'}")
        if head.owner is None or of == head.owner.lower():
            return PullRequest(pull.number, pull.url, pull.state)
    return None


def create_pr(top: Path, *, base: str, head: Head, title: str, body: str, draft: bool) -> str:
    """Open a pull request of `head` into `base` of the repository gh finds; its URL, as gh
    prints it. The body goes on stdin (`--body-file -`): any length, never an argument."""
    args = ["pr", "create", f"--base={base}", f"--head={head.for_gh}", f"--title={title}", "--body-file=-"]
    args += ["--draft"] if draft else []
    said = _gh(top, args, input=body).strip().splitlines()
    url = said[-1].strip() if said else ""
    if not url.startswith(WEB):
        raise GhFailed(f"`gh pr create` printed no pull request URL: {_first_line(url) or 'nothing'}")
    return url


def push(top: Path, remote: str, commit: str, branch: str) -> None:
    """`commit` to `remote` as its branch `branch`, by plain `git push` as the user: their
    credentials, their pre-push hooks (they asked for this push); never forced."""
    result = git.run(
        top,
        "push",
        remote,
        f"{commit}:refs/heads/{branch}",
        check=False,
        hooks=True,
        timeout=PUSH_TIMEOUT,
        env=proc.clean_env(allow=USER_LOGIN),
    )
    if not result.ok:
        raise RalphError(
            f"git push {remote} {branch} failed: {_first_line(result.output, error=True)} — nothing pushed"
        )


def _gh(top: Path, args: list[str], input: str | None = None) -> str:
    """gh's standard output; GhFailed naming the command and gh's first line when it fails."""
    shown = f"`gh {' '.join(arg for arg in args[:3] if not arg.startswith('-'))}`"  # the command, not its flags
    env = proc.clean_env(allow=USER_LOGIN, extra={"GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"})
    try:
        result = proc.run(
            ["gh", *args], top, env=env, input=input, timeout=GH_TIMEOUT, cap=git.WHOLE, stderr_apart=True, sweep=False
        )
    except OSError as exc:  # gh is not on PATH (or not a program)
        raise GhFailed(
            f"{shown} could not run: {exc.strerror or exc} — install GitHub's CLI (https://cli.github.com), "
            "then `gh auth login`"
        ) from None
    if result.exit_code == NOT_LOGGED_IN:
        raise GhFailed(f"{shown} failed: gh is not logged in to GitHub — run `gh auth login` (or set GH_TOKEN)")
    if not result.ok:
        why = "timed out" if result.timed_out else f"failed ({result.exit_code})"
        raise GhFailed(f"{shown} {why}: {_first_line(result.stderr or result.output) or 'gh said nothing'}")
    return result.output


def _first_line(text: str, *, error: bool = False) -> str:
    """The first line that says something (with `error`: the first naming an error, for git's
    push, whose first lines may be progress), on one line, for a message."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if error:
        lines = [line for line in lines if line.startswith(("error", "fatal", "!", "remote:"))] or lines
    return " ".join(lines[0].split())[:300] if lines else ""
