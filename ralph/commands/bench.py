"""`ralph bench`: the jobs built (cached), each run in the modes asked with the agent of a
ralph.yaml-style file or the scripted model, then the table, the summary, the JSON and the page."""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ralph.agents.scripted import ScriptedServer
from ralph.bench import build, jobs, page, sdists
from ralph.bench.modes import BUDGETED, MODES, JobRun, Mode, budget, config_text, run_job
from ralph.bench.results import Report, Result, print_table
from ralph.bench.scripted_model import MODEL, ScriptedModel
from ralph.config import parse
from ralph.errors import Exit, RalphError
from ralph.isolation import proc
from ralph.isolation.files import replace_with
from ralph.show import ui, view

SCRIPTED_LIMITS = {"max_laps": 10}
_STAND_INS = {"goal": "bench", "checks": ["true"]}  # what a bench config need not have: the jobs bring theirs


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    jobs: str | None = None  # --jobs a,b
    mode: str = "both"  # laps, session or both
    config: Path | None = None  # --config: the agent (and limits) to bench
    scripted: bool = False
    json_to: Path | None = None
    html_to: Path | None = None
    keep: Path | None = None  # --keep: leave each job's clone (and its run's refs) in this folder
    display: view.Display = "auto"


def list_jobs() -> Exit:
    _needs_tools(list(jobs.JOBS))  # building a job runs its finished form's checks
    cache = sdists.cache_root()
    rows = []
    for job in jobs.JOBS:
        _, built = build.prepared(job, cache)
        rows.append([job.name, job.kind, job.package, str(len(built.items)), str(built.tests_total)])
    ui.table(["job", "kind", "package", "items", "tests"], rows)
    for kind, what in jobs.KINDS.items():
        ui.say(f"[dim]{kind}: {what}[/]")
    return Exit.DONE


def bench(options: BenchOptions) -> Exit:
    if options.scripted and options.config is not None:
        raise RalphError("bench: --config and --scripted exclude each other: bench your agent, or the scripted model")
    if not options.scripted and options.config is None:
        raise RalphError("bench: give --config FILE (the agent to bench) or --scripted (ralph's scripted model)")
    modes: tuple[Mode, ...] = MODES if options.mode == "both" else (options.mode,)  # type: ignore[assignment]
    chosen = jobs.chosen(options.jobs)
    _writable(options)
    _needs_tools(chosen)
    cache = sdists.cache_root()
    settings = _settings(options.config) if options.config else {}
    if settings and "session" in modes:  # the file's own keys are checked as it is read; the session's here
        config_text("bench", ["true"], budget(settings, "session"))
    # Laps must not read the bench's cache: the answers, and the packages as they were.
    how = JobRun(display=options.display, keep=options.keep, hide=(cache,))
    results: list[Result] = []
    for job in chosen:
        repo, built = build.prepared(job, cache)
        for mode in modes:
            ui.say(f"[bold]bench: {job.name}[/] ({job.package}, {len(built.items)} items), {mode} mode")
            with _agent_settings(built, settings, scripted=options.scripted) as agent:
                results.append(run_job(repo, built, agent, mode, how))
    print_table(results)
    report = Report(model=_model_label(settings, scripted=options.scripted), results=results)
    if options.json_to:
        _write(options.json_to, report.model_dump_json(indent=1) + "\n")
    if options.html_to:
        _write(options.html_to, page.render(report))
    return Exit.DONE


@contextlib.contextmanager
def _agent_settings(built: build.BuiltJob, settings: dict[str, Any], *, scripted: bool) -> Iterator[dict[str, Any]]:
    """The job's agent settings: the user's, or the scripted model's server for this one job."""
    if not scripted:
        yield settings
        return
    with ScriptedServer(ScriptedModel(built)) as server:
        yield {"agent": {"kind": "openai", "model": MODEL, "base_url": server.base_url}, "limits": SCRIPTED_LIMITS}


def _writable(options: BenchOptions) -> None:
    """Where the results go, checked before hours of laps are spent on them."""
    for path in (options.json_to, options.html_to):
        if path is not None and (path.is_dir() or not path.parent.is_dir()):
            why = "is a folder" if path.is_dir() else f"has no folder {path.parent} to go in"
            raise RalphError(f"bench: cannot write {path}: it {why}")
    if options.keep is not None and options.keep.exists() and not options.keep.is_dir():
        raise RalphError(f"bench: --keep {options.keep}: not a folder")


def _settings(path: Path) -> dict[str, Any]:
    """What a ralph.yaml-style file gives the jobs (its agent, limits, prices, env, sandbox); its
    goal and checks are the user's repository's, not the jobs'. Checked as the file is, so an
    error names its line."""
    try:
        text = path.read_text()
        data = yaml.safe_load(text)
    except OSError as exc:
        raise RalphError(f"{path}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise RalphError(f"{path}: not valid YAML ({ui.one_line(str(exc), 120)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("agent"), dict):
        raise RalphError(f"{path}: the bench needs an `agent:` section (as in ralph.yaml) to know what to bench")
    settings = {key: data[key] for key in BUDGETED if key in data}
    filled = "".join(f"{key}: {json.dumps(value)}\n" for key, value in _STAND_INS.items() if key not in data)
    parse(text.rstrip("\n") + "\n" + filled, str(path))
    return settings


def _needs_tools(chosen: list[jobs.Job]) -> None:
    """pytest scores every job, mypy checks the types jobs: missing, say so now, not as red laps."""
    needed = ["pytest"] + (["mypy"] if any(job.kind == "types" for job in chosen) else [])
    for module in needed:
        if not proc.run([sys.executable, "-c", f"import {module}"], Path(tempfile.gettempdir()), timeout=120).ok:
            raise RalphError(
                f"bench: the jobs need {module} in this Python ({sys.executable}): pip install {module} "
                "(or ralph with its bench extra: pip install 'git-ralph[bench]')"
            )


def _model_label(settings: dict[str, Any], *, scripted: bool) -> str:
    if scripted:
        return f"{MODEL} (ralph's scripted model: it knows the answers; it tests the harness, not a model)"
    agent = settings["agent"]
    if agent.get("kind", "command") == "openai":
        return f"{agent.get('model')} at {agent.get('base_url') or 'OpenAI'}"
    return f"preset {agent['preset']}" if agent.get("preset") else f"command `{agent.get('command')}`"


def _write(path: Path, text: str) -> None:
    try:
        replace_with(path, text)
    except OSError as exc:
        raise RalphError(f"bench: cannot write {path}: {exc.strerror}") from None
    ui.say(f"bench: wrote {ui.safe(path)}")
