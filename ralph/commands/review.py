"""Looking at a run and bringing it home: log, show, status, land, clean."""

from __future__ import annotations

import os
import shutil
from contextlib import nullcontext
from pathlib import Path

from ralph import git, todo
from ralph.errors import Exit, RalphError
from ralph.git import ledger
from ralph.git.ledger import JudgeRecord, RunState
from ralph.isolation import proc, user_state
from ralph.isolation.files import remove_path
from ralph.isolation.workspace import folder_for
from ralph.run import claims, workers
from ralph.show import ui
from ralph.verdict import hook_code

LOG_OTHER_COLUMNS = 44  # the width of the laps table's columns but the reason, which is cut to fit the rest


def log(cwd: Path, run: str | None, as_json: bool) -> Exit:
    top = git.open_repo(cwd).top
    state = ledger.resolve(top, run)
    if as_json:
        ui.print_json(
            {
                "run": state.name,
                "green": state.green,
                "laps": [
                    lap.record.model_dump(mode="json")
                    if lap.record
                    else {"lap": lap.number, "commit": lap.commit, "problem": lap.problem}
                    for lap in state.laps
                ],
            }
        )
        return Exit.DONE
    ui.say(f"run [bold]{state.name}[/]  green {state.green[:10]}  base {state.record.base[:10]}")
    laps_table(state)
    return Exit.DONE


def what_is_left(top: Path, state: RunState) -> list[str]:
    """What stands between the green tip and done: each failing check (since which lap) and
    the open TODO items, a line each."""
    lines = [
        f"`{command}` fails (since {'the base' if since == 0 else f'lap {since}'})"
        for command, since in state.still_failing().items()
    ]
    items = todo.parse(git.show_file(top, state.green, state.record.config.files.todo))
    still_open = [item.text for item in items if not item.done]
    if still_open:
        shown = "; ".join(still_open[:3]) + (f" and {len(still_open) - 3} more" if len(still_open) > 3 else "")
        lines.append(f"{len(still_open)} TODO item(s) open: {shown}")
    return lines


def laps_table(state: RunState) -> None:
    """A lap a line, its reason cut to the terminal's width (`ralph show` has it whole); TODO
    is done/all after the lap, +N the items it ticked. Also the end of `ralph run`'s output."""
    rows, width = [], max(20, ui.console.width - LOG_OTHER_COLUMNS)
    slots = any(lap.record and lap.record.slot is not None for lap in state.laps)  # a parallel run
    for lap in state.laps:
        r = lap.record
        if r is None:
            rows.append([str(lap.number), "?", "", "", "", "", ui.safe(ui.one_line(lap.problem, width))])
            continue
        rows.append(
            [
                f"{r.lap} (slot {r.slot})" if slots and r.slot is not None else str(r.lap),
                ui.status_text(r.status),
                f"{r.duration_s:.1f}s",
                f"{r.agent.usage.total:,}" if r.agent.usage.requests else "-",
                str(r.files_changed),
                f"{r.todo.done}/{r.todo.total}" + (f" +{len(r.ticked)}" if r.ticked else ""),
                ui.safe(ui.one_line(r.reason, width)),
            ]
        )
    ui.table(["lap", "status", "time", "tokens", "files", "TODO", "reason"], rows)


def tell(cwd: Path, message: str, run: str | None, remote: str | None = None) -> Exit:
    if not message.strip():
        raise RalphError("the message is empty — say what the next lap should know")
    top = git.open_repo(cwd).top
    if remote is not None:  # the message goes where every worker of the run looks: the remote
        run = workers.fetch_runs(top, remote, run)
    state = ledger.resolve(top, run)
    if state.record.on_remote and remote is None:
        raise RalphError(
            f"run {state.name} is kept on a git remote, whose refs replace this clone's: "
            "tell it there with `ralph tell --remote REMOTE`"
        )
    with git.kept_on(workers.keeper(remote, [state.name])) if remote else nullcontext():
        ledger.tell(top, state.name, message.strip())
    ui.say(f"told run [bold]{state.name}[/]: its next lap will see it (once), running now or resumed later")
    return Exit.DONE


def _show_judge(judge: JudgeRecord) -> None:
    if judge.status == "unavailable":
        ui.say(f"judge   unavailable: {ui.safe(judge.detail)}")
        return
    signals = ", ".join(f"{name} {value:g}" for name, value in judge.signals.items())
    ui.say(f"judge   {judge.status}: score {judge.score} (the judge's {judge.judge_score}; ralph's signals: {signals})")
    for score in judge.scores:
        counted = "" if score.counted else " \\[not counted: its evidence is in neither the diff nor a changed file]"
        ui.say(f"  {score.score:g}  {ui.safe(score.dimension)}: {ui.safe(score.reason)}{counted}")
        ui.say(f"        evidence: {ui.safe(ui.one_line(score.evidence, 160))}")
    for item in judge.blocking:
        ui.say(f"  blocking: {ui.safe(item)}")
    for item in judge.suggestions:
        ui.say(f"  suggestion: {ui.safe(item)}")


def show(cwd: Path, number: int, run: str | None, as_json: bool) -> Exit:
    top = git.open_repo(cwd).top
    state = ledger.resolve(top, run)
    lap = next((lap for lap in state.laps if lap.number == number), None)
    if lap is None:
        raise RalphError(f"run {state.name!r} has no lap {number} — it has laps 1..{len(state.laps)}")
    record = lap.record
    parent = record.parent if record else f"{lap.commit}^"
    diffstat = git.diffstat(top, parent, lap.commit)
    if as_json:
        ui.print_json(
            {
                "lap": number,
                "commit": lap.commit,
                "record": record.model_dump(mode="json") if record else None,
                "diffstat": diffstat,
            }
        )
        return Exit.DONE
    ui.say(f"[bold]lap {number}[/] of run {state.name}  commit {lap.commit}")
    if record is None:
        ui.say(f"no record: {ui.safe(lap.problem)}")
        return Exit.DONE
    on_line = " (on the green line)" if git.is_ancestor(top, lap.commit, state.green) else ""
    ui.say(f"status  {ui.status_text(record.status)}{on_line} — {ui.safe(record.reason)}")
    ui.say(
        f"started {record.started_at}, {record.duration_s:.1f}s (prepare {record.prepare_s:.1f}s); "
        f"agent {record.agent.kind} {record.agent.outcome} ({record.agent.duration_s:.1f}s)"
    )
    ui.say(
        f"TODO    {record.todo.done} done, {record.todo.open} open; ticked: "
        f"{ui.safe('; '.join(record.ticked)) or 'none'}"
    )
    if record.agent.summary:
        ui.say(f"summary {ui.safe(record.agent.summary)}")
    said = ui.one_line(next(iter(record.agent.detail.strip().splitlines()), ""), 300)
    if said and said not in record.reason:  # the verdict's reason may stand where the agent's words were
        ui.say(f"agent   {ui.safe(said)}")
    if record.tests:
        ui.say(
            f"tests   passing tests {record.tests.passing_before} → {record.tests.passing_after}; "
            f"newly failing: {ui.safe(', '.join(record.tests.newly_failing)) or 'none'}; "
            f"newly passing: {ui.safe(', '.join(record.tests.newly_passing)) or 'none'}"
        )
    if record.protected_touched or record.granted:
        ui.say(
            f"protected   {ui.safe(', '.join(record.protected_touched)) or 'none touched'}"
            + (f"; allowed by a ticked item: {ui.safe(', '.join(record.granted))}" if record.granted else "")
        )
    if record.flaky:
        ui.say(f"flaky   {ui.safe(', '.join(record.flaky))}")
    usage = record.agent.usage
    if usage.requests:
        ui.say(
            f"tokens  {usage.requests} requests, {usage.prompt_tokens:,} prompt + "
            f"{usage.completion_tokens:,} completion{' (estimated)' if usage.estimated else ''}"
        )
        ui.context_bars(*state.context_bars(upto=number))
    if record.agent.kind != "command" or record.agent.usage.cost_usd is not None:
        ui.say(
            f"cost    {_usd(record.agent.usage.cost_usd)}"
            + (f" (judge {_usd(record.judge.usage.cost_usd)})" if record.judge else "")
        )
    for message in record.told:
        ui.say(f"told    {ui.safe(message)}")
    if record.judge:
        _show_judge(record.judge)
    ui.say(f"\n[bold]changes[/] ({record.parent[:10]}..{lap.commit[:10]})\n{ui.safe(diffstat) or '(none)'}")
    for check in record.checks:
        mark = "[green]pass[/]" if check.passed else "[red]fail[/]"
        ui.say(f"\n[bold]check[/] {mark} {ui.safe(check.command)} (exit {check.exit_code}, {check.duration_s:.1f}s)")
        ui.say(ui.safe(check.output_tail[-1500:].rstrip()))
    if record.output_tail and record.status != "green":
        ui.say(f"\n[bold]why it is {record.status}[/]\n{ui.safe(record.output_tail[-2000:].rstrip())}")
    return Exit.DONE


def _usd(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"


def _laps_by_slot(state: RunState) -> dict[int, int]:
    slots = [lap.record.slot for lap in state.laps if lap.record and lap.record.slot is not None]
    return {slot: slots.count(slot) for slot in sorted(set(slots))}


def _workers(top: Path, state: RunState) -> list[dict]:
    """A `--remote` run's workers present (their refs), each with its laps under way and its laps."""
    laps = [lap.record.worker for lap in state.laps if lap.record and lap.record.worker]
    under_way = claims.under_way(top, state.name)
    return [
        dict(worker, laps=laps.count(name), under_way=[lap for lap in under_way if lap["worker"] == name])
        for worker in workers.roster(top, state.name)
        for name in [worker["worker"]]
    ]


def status(cwd: Path, run: str | None, as_json: bool, remote: str | None = None) -> Exit:
    top = git.open_repo(cwd).top
    if remote is not None:
        run = workers.fetch_runs(top, remote, run)
    state = ledger.resolve(top, run)
    limits = state.record.config.limits
    last = state.last_record()
    done = state.is_done
    # The green tip's TODO, not the last lap's: a red lap's ticks are not the run's.
    on_line = todo.count(todo.parse(git.show_file(top, state.green, state.record.config.files.todo)))
    summary = {
        "run": state.name,
        "base": state.record.base,
        "green": state.green,
        "green_laps": sum(1 for lap in state.laps if lap.record and lap.record.status == "green"),
        "laps": len(state.laps),
        "max_laps": limits.max_laps,
        "without_progress": state.laps_without_progress(),
        "stagnation": limits.stagnation,
        "errors_in_a_row": state.errors_in_a_row(),
        "done": done,
        "todo": on_line.model_dump() if last else None,
        "still_failing": state.still_failing(),
        "flaky": state.flaky_checks(),
        "tokens": state.tokens_used(),
        "max_tokens": limits.max_tokens,
        "cost_usd": state.cost_used()[0],
        "laps_of_unknown_cost": state.cost_used()[1],
        "max_cost_usd": limits.max_cost_usd,
        "context": dict(zip(("this_lap", "one_session"), state.context_bars(), strict=True)),
    }
    if as_json:
        summary.update(under_way=claims.under_way(top, state.name), laps_by_slot=_laps_by_slot(state))
        summary.update(workers=_workers(top, state))
        ui.print_json(summary)
        return Exit.DONE
    ui.say(f"run [bold]{state.name}[/]: {'[green]done[/]' if done else 'not done'}")
    ui.say(f"  last green  {state.green[:10]} (base {state.record.base[:10]}), {summary['green_laps']} green lap(s)")
    limited = state.limited_laps()
    also = f" (and {limited} limited, not counted)" if limited else ""
    ui.say(f"  laps        {state.counted_laps()} of max {summary['max_laps']}{also}")
    ui.say(f"  stagnation  {summary['without_progress']} of {summary['stagnation']} laps without progress")
    if last:
        ui.say(f"  TODO        {on_line.done} done, {on_line.open} open (on the green line)")
    for line in [] if done else what_is_left(top, state):
        ui.say(f"  left        {ui.safe(line)}")
    by_slot, under_way = _laps_by_slot(state), claims.under_way(top, state.name)
    if by_slot:
        counts = ", ".join(f"slot {slot}: {count}" for slot, count in by_slot.items())
        ui.say(f"  slots       laps by slot: {ui.safe(counts)}")
    for lap in under_way:
        items = "; ".join(lap["items"]) or "?"
        ui.say(f"  under way   lap {lap['lap']} (slot {lap['slot']}): {ui.safe(items)}")
    for worker in _workers(top, state):
        beat = f"beat {worker['beat_s_ago']}s ago" if worker["beat_s_ago"] is not None else "no beat"
        said = f"worker {worker['number']}  {worker['worker']}, {beat}, {worker['laps']} lap(s)"
        ui.say(f"  workers     {ui.safe(said)}")
    if summary["tokens"]:
        cap = f" of max {summary['max_tokens']:,}" if summary["max_tokens"] else ""
        ui.say(f"  tokens      {summary['tokens']:,}{cap} (prompt + completion, all laps)")
        ui.context_bars(*state.context_bars())
    spent, unknown = state.cost_used()
    if spent or limits.max_cost_usd:
        cap = f" of max ${limits.max_cost_usd:g}" if limits.max_cost_usd else ""
        also = f"; {unknown} lap(s) of unknown cost not counted" if unknown else ""
        ui.say(f"  cost        ${spent:.2f}{cap}{also}")
    if state.flaky_checks():
        ui.say(f"  flaky       {ui.safe(', '.join(state.flaky_checks()))}")
    ui.say(f"  review      git log ralph/{state.name}   ·   ralph log   ·   ralph land")
    return Exit.DONE


def land(cwd: Path, run: str | None, how: str, partial: bool = False) -> Exit:
    """Bring the green line onto the user's current branch: the one command that touches it."""
    repo = git.open_repo(cwd)
    state = ledger.resolve(repo.top, run)
    if repo.branch is None:
        raise RalphError("HEAD is detached — check out the branch to land on")
    if git.is_dirty(repo.top):
        raise RalphError("the work tree has uncommitted changes — commit or stash them before landing")
    if state.green == state.record.base:
        raise RalphError(f"run {state.name!r} has no green lap yet: nothing to land")
    if not state.is_done and not partial:
        left = "; ".join(what_is_left(repo.top, state)) or "the judge has not passed its last green lap"
        raise RalphError(
            f"run {state.name!r} is not done: {left} — land its green laps so far with --partial "
            "(`ralph status` says more)"
        )
    # Where this land starts: the base, or what an earlier (partial) land brought, when the
    # branch holds exactly that; either way the landed tree is one the checks ran on.
    since = state.record.base
    landed = git.rev(repo.top, ledger.landed_ref(state.name))
    if landed and _tree(repo.top, repo.head) == _tree(repo.top, landed):
        if landed == state.green:
            raise RalphError(f"every green lap of run {state.name!r} is landed already")
        since = landed
    elif how != "rebase" and not git.is_ancestor(repo.top, repo.head, state.green):
        raise RalphError(
            f"{repo.branch} has commits the run never saw (it started from {state.record.base[:10]}): "
            f"a {how} would make a tree no check ran on — replay the laps onto it with --rebase "
            "and run your checks, or land on a branch at the run's base"
        )
    _refuse_unsafe_landing(repo, state)
    # The commit checked above, not the branch's name: a `ralph run` going on may move the branch.
    branch, head = state.green, repo.head
    message = _squash_message(repo.top, state, since)
    if how == "merge":
        steps = [["merge", "--no-ff", "-m", f"Merge ralph run {state.name}", branch]]
    elif how == "rebase":
        steps = [["cherry-pick", "--allow-empty", f"{since}..{branch}"]]
    elif since == state.record.base:
        steps = [["merge", "--squash", branch], ["commit", "-m", message]]
    else:  # the laps since the last land, as one commit
        steps = [["cherry-pick", "--no-commit", f"{since}..{branch}"], ["commit", "-m", message]]
    for args in steps:
        # The user's own action on their own branch: their ssh-agent may sign the commit.
        result = git.run(repo.top, *args, check=False, hooks=True, env=proc.clean_env(allow=("SSH_AUTH_SOCK",)))
        if not result.ok:
            # The tree was clean before landing: put the branch, index and files back as they were.
            if args[0] == "cherry-pick":
                git.run(repo.top, "cherry-pick", "--abort", check=False)
            git.run(repo.top, "reset", "-q", "--hard", head, check=False)
            raise RalphError(f"landing stopped and was undone: git {args[0]} failed: {result.tail(500).strip()}")
    git.update_ref(repo.top, ledger.landed_ref(state.name), state.green, landed)
    ui.say(f"landed run [bold]{state.name}[/] ({how}) onto {ui.safe(repo.branch)}")
    return Exit.DONE


def _tree(top: Path, commit: str) -> str:
    return git.out(top, "rev-parse", f"{commit}^{{tree}}")


def _refuse_unsafe_landing(repo: git.RepoInfo, state: RunState) -> None:
    """What git would do silently: overwrite an ignored file, or land changes to the hooks that
    then run on the user's commits (core.hooksPath inside the work tree, as husky sets it)."""
    since = git.out(repo.top, "merge-base", repo.head, state.green)
    landing = [path for path, (status, _) in git.changes(repo.top, since, state.green).items() if status != "D"]
    # A file of the user's where a landed file goes, or where a landed folder goes (git deletes
    # an ignored file in a folder's way without asking).
    folders = {str(parent) for path in landing for parent in Path(path).parents if str(parent) != "."}
    in_the_way = [
        path
        for path in [*landing, *sorted(folders)]
        if os.path.lexists(repo.top / path)
        and (path not in folders or (repo.top / path).is_symlink() or not (repo.top / path).is_dir())
    ]
    tracked = set(git.out(repo.top, "ls-files", "--", *in_the_way).splitlines()) if in_the_way else set()
    clobbered = [path for path in in_the_way if path not in tracked]
    if clobbered:
        raise RalphError(
            f"landing would overwrite files git does not track here: {', '.join(clobbered[:5])} — move them away first"
        )
    hooks = git.hooks_path(repo.top)
    inside = _inside(repo.top, Path(os.path.expanduser(hooks))) if hooks else None
    touched = [
        path
        for path in landing
        if inside is not None and (inside == "." or path == inside or path.startswith(inside + "/"))
    ]
    if touched:
        raise RalphError(
            f"the run changed your git hooks ({', '.join(touched[:5])} in core.hooksPath {hooks}) — "
            f"review them, then merge ralph/{state.name} by hand"
        )
    _refuse_running_the_runs_code(repo, state, since)
    _refuse_choosing_your_drivers(repo, state, since, landing)


# Config keys naming a command git runs on a file its attributes choose (git-lfs's own are safe).
_DRIVERS = r"^(filter\.[^.]+\.(clean|smudge|process)|diff\.[^.]+\.(textconv|command)|merge\.[^.]+\.driver)$"


def _refuse_choosing_your_drivers(repo: git.RepoInfo, state: RunState, since: str, landing: list[str]) -> None:
    """A `.gitattributes` the run changed chooses which of the drivers the user's git config
    defines (a filter, a textconv, a merge driver) git runs on which files, as the user, from
    this checkout on: one whose command is a script of the tree then runs the run's code."""
    attributes = [path for path in landing if Path(path).name == ".gitattributes"]
    if not attributes:
        return
    listing = git.run(repo.top, "config", "--get-regexp", _DRIVERS, check=False).output
    drivers = [line.split(" ", 1)[0] for line in listing.splitlines() if not line.startswith("filter.lfs.")]
    if drivers:
        raise RalphError(
            f"the run changed {attributes[0]}, which chooses the files your git config's {drivers[0]} runs on, "
            f"as you — review it (git diff {since[:10]} ralph/{state.name} -- {attributes[0]}), "
            f"then merge ralph/{state.name} by hand"
        )


def _refuse_running_the_runs_code(repo: git.RepoInfo, state: RunState, since: str) -> None:
    """Landing commits through the user's hooks, as the user, outside any sandbox (their
    ssh-agent too): not when those hooks would run a file the run changed (ralph/verdict/hook_code.py)."""
    changed = list(git.changes(repo.top, since, state.green))
    run_by = hook_code.touched(changed, hook_code.what_hooks_run(repo.top, repo.common_dir, state.green))
    if run_by:
        path, runs = run_by[0]
        what = f"{runs.hook} {runs.why} (the run changed {path})" if runs.why else f"{path}, which {runs.hook}"
        raise RalphError(
            f"your git hooks would run what the run changed, as you, outside any sandbox: {what} — review it "
            f"(git diff {since[:10]} ralph/{state.name} -- {path}), then merge ralph/{state.name} by hand"
        )


def _inside(top: Path, path: Path) -> str | None:
    """`path` (relative ones are relative to the work tree) relative to `top`, None when outside."""
    full = (top / path).resolve()
    return str(full.relative_to(top.resolve())) if full == top.resolve() or top.resolve() in full.parents else None


def _squash_message(top: Path, state: RunState, since: str) -> str:
    """The goal, then each green lap landed with its subject (the items it ticked)."""
    listing = git.out(
        top,
        "log",
        "--reverse",
        "--format=%(trailers:key=Ralph-Lap,valueonly,separator=)%x09%s",
        f"{since}..{state.green}",
    )
    laps = "\n".join(
        f"- lap {number.strip() or '?'}: {subject}"
        for number, _, subject in (line.partition("\t") for line in listing.splitlines())
    )
    goal = " ".join(state.record.config.goal.split())
    subject = goal if len(goal) <= 64 else goal[:63].rstrip() + "…"
    done = "" if state.is_done else " (partial: the run is not done)"
    return f"ralph: {subject}\n\nThe green laps of run {state.name}{done}:\n{laps}\n\nRalph-Run: {state.name}\n"


def clean(cwd: Path, run: str | None, refs: bool) -> Exit:
    repo = git.open_repo(cwd)
    state = ledger.resolve(repo.top, run)
    run_dir = ledger.run_dir(repo.common_dir, state.name)
    where = git.worktree_branches(repo.top).get(ledger.branch_ref(state.name))
    if refs and where is not None:
        raise RalphError(f"ralph/{state.name} is checked out in {where} — switch to another branch first")
    with ledger.run_lock(run_dir, state.name):
        return _clean_locked(repo, state, run_dir, refs)


def _clean_locked(repo: git.RepoInfo, state: RunState, run_dir: Path, refs: bool) -> Exit:
    workspace = folder_for(repo.common_dir, state.name)
    removed = int(os.path.lexists(workspace))
    remove_path(workspace)
    # A snapshot a killed unsandboxed lap left: stale once the run is cleaned, never to be
    # applied to a later run of the same name.
    remove_path(user_state.saved_at(repo.common_dir, state.name))
    if refs:
        for lap in state.laps:
            git.remove_note(repo.top, lap.commit)
        for ref in git.refs(repo.top, f"refs/ralph/{state.name}/"):
            git.delete_ref(repo.top, ref)
        if git.rev(repo.top, ledger.branch_ref(state.name)):
            git.delete_ref(repo.top, ledger.branch_ref(state.name))
        shutil.rmtree(run_dir, ignore_errors=True)
    ui.say(
        f"cleaned run [bold]{state.name}[/]: {removed} workspace(s) removed"
        + ("; refs, branch, notes and logs deleted" if refs else "")
    )
    return Exit.DONE
