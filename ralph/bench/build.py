"""A job, built: the package's sdist cut as its kind says (edits.py, migrate.py) into a git
repository at a base commit with ralph.yaml, TODO.md and PROGRESS.md, and a manifest (job.json)
holding the items, the edits that undo each (the scripted model's answers, kept outside the
repository) and the number of tests the finished job passes. Built once into the bench cache."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from pydantic import BaseModel

from ralph import git
from ralph.bench import edits, migrate, sdists
from ralph.bench.jobs import Job
from ralph.config import CheckSpec
from ralph.errors import RalphError
from ralph.isolation import proc
from ralph.verdict.checks import run_checks

FORMAT = 1  # of job.json, and of how jobs are cut: a change builds every job anew
LEFT_OVER = "checks/left_over.py"
LEFT_OVER_SCRIPT = '''\
"""The job's own check. `name NAME PATH`: fails while NAME is used in a .py file under PATH;
`comment REGEX PATH`: while a comment there matches REGEX (a `# type: ignore` that silences mypy)."""
import io, re, sys, tokenize
from pathlib import Path

kind, wanted, top = sys.argv[1], sys.argv[2], Path(sys.argv[3])
token_type = tokenize.NAME if kind == "name" else tokenize.COMMENT
found = []
for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
    for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        matched = token.string == wanted if kind == "name" else re.search(wanted, token.string)
        if token.type == token_type and matched:
            found.append(f"{path}:{token.start[0]}: {token.string}")
print("\\n".join(found) or f"none left under {top}")
sys.exit(1 if found else 0)
'''
GITIGNORE = "__pycache__/\n*.egg-info/\n.mypy_cache/\n.pytest_cache/\nbuild/\n"
IDENT = {"name": "ralph bench", "email": "bench@ralph.invalid"}  # who commits a job's base


class ItemAnswer(BaseModel):
    text: str  # the TODO item
    edits: list[dict[str, str | None]]  # {"path", "old", "new"}: what undoes the cut


class BuiltJob(BaseModel):
    format: int = FORMAT
    name: str
    kind: str
    package: str
    goal: str
    checks: list[str]  # with {python} for the interpreter the bench runs on; the first runs the tests
    items: list[ItemAnswer]
    tests_total: int  # tests the finished job passes: the score's denominator
    reference_tests: list[str]  # which they are, as test_id() names them: only these score
    build_s: float


def prepared(job: Job, cache: Path) -> tuple[Path, BuiltJob]:
    """The job's repository and manifest in `cache`, built the first time (and after a change of
    the job, its cut or the tools that count its tests). Benches at the same time build each job
    once: one waits for the other's build and takes it."""
    home = cache / "jobs" / f"{job.name}-{_fingerprint(job)}"
    if not (home / "job.json").is_file():
        home.parent.mkdir(parents=True, exist_ok=True)
        with open(cache / "jobs" / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the kernel lets go if this process dies
            if not (home / "job.json").is_file():
                _build_into(home, job, cache)
    return home / "repo", BuiltJob.model_validate_json((home / "job.json").read_text())


def _build_into(home: Path, job: Job, cache: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f".{job.name}-", dir=home.parent))
    try:
        built = _build(job, sdists.fetch(job.sdist, cache), scratch)
        (scratch / "job.json").write_text(built.model_dump_json(indent=1))
        os.replace(scratch, home)  # whole or not at all: an interrupted build is built again
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def render(check: str) -> str:
    """A job's check for the Python the bench runs on (quoted: a venv's path may hold a space)."""
    return check.replace("{python}", shlex.quote(sys.executable))


def _build(job: Job, archive: Path, scratch: Path) -> BuiltJob:
    started = time.monotonic()
    top = sdists.unpack(archive, scratch / "sdist")
    originals = {str(path.relative_to(top)): path.read_text() for path in sorted(top.rglob("*.py"))}
    cut, items = _cut(job, originals)
    checks = _checks(job)
    reference = {**originals, **cut}
    for item in items:
        reference.update(_applied(reference, item.edits))
    reference_tests = _tests_passing(top, reference, checks)
    repo = scratch / "repo"
    shutil.move(top, repo)
    _write(repo, cut)
    _write(repo, _ralph_files(job, checks, items))
    git.run(repo, "init", "-q", "-b", "main")
    git.run(repo, "add", "-A")
    git.run(repo, "config", "user.name", IDENT["name"])
    git.run(repo, "config", "user.email", IDENT["email"])
    git.run(repo, "commit", "-q", "--no-verify", "-m", f"bench job {job.name}: {job.package}, cut")
    return BuiltJob(
        name=job.name,
        kind=job.kind,
        package=job.package,
        goal=_goal(job),
        checks=checks,
        items=items,
        tests_total=len(reference_tests),
        reference_tests=reference_tests,
        build_s=round(time.monotonic() - started, 2),
    )


def _cut(job: Job, originals: dict[str, str]) -> tuple[dict[str, str], list[ItemAnswer]]:
    """The files the job changes, as the agent finds them, and one answer per TODO item."""
    if job.kind == "rebuild":
        text, units = edits.stub_bodies(originals[job.target], {name for group in job.groups for name in group})
        return {job.target: text}, _unit_items(job, units, "Implement {} in {} (each body raises NotImplementedError)")
    if job.kind == "types":
        text, units = edits.strip_annotations(originals[job.target])
        return {job.target: text}, _unit_items(job, units, "Add the type hints of {} in {} that `mypy --strict` needs")
    if job.kind == "migrate":
        items = [
            ItemAnswer(
                text=f"Migrate {path} from unittest.TestCase classes to plain pytest test functions "
                f"(may change: {path})",
                edits=[{"path": path, "old": None, "new": migrate.to_pytest(originals[path])}],
            )
            for (path,) in job.groups
        ]
        return {}, items
    return _rename_items(job, originals)


def _rename_items(job: Job, originals: dict[str, str]) -> tuple[dict[str, str], list[ItemAnswer]]:
    """A rename in steps that each keep the tests passing, as a careful person does it: the new
    name where it is defined with the old one kept as an alias, then each caller, then no alias."""
    old, new = job.names
    (home,) = job.groups[0]
    renamed = {
        path: edits.rename(text, new, old) for path, text in originals.items() if path.startswith(job.target + "/")
    }
    changed = {path: text for path, text in renamed.items() if text != originals[path]}
    alias = f"\n\n{old} = {new}  # deprecated: the old name, until every caller uses the new one\n"
    items = [
        ItemAnswer(
            text=f"Rename `{old}` to `{new}` in {home}, where it is defined; keep `{old} = {new}` there as an alias",
            edits=[{"path": home, "old": None, "new": originals[home].rstrip("\n") + alias}],
        ),
        *(
            ItemAnswer(
                text=f"Use `{new}` instead of the deprecated `{old}` in {path}",
                edits=[{"path": path, "old": None, "new": originals[path]}],
            )
            for path in sorted(changed)
            if path != home
        ),
        ItemAnswer(
            text=f"Remove the `{old}` alias from {home}: no `{old}` is left anywhere",
            edits=[{"path": home, "old": alias, "new": "\n"}],
        ),
    ]
    return changed, items


def _unit_items(job: Job, units: list[edits.Unit], wording: str) -> list[ItemAnswer]:
    by_name = {unit.name: unit for unit in units}
    items = []
    for group in job.groups:
        chosen = [by_name[name] for name in group if name in by_name]
        if not chosen:
            raise RalphError(f"bench: job {job.name}: nothing of {', '.join(group)} was cut")
        named = _listing([f"`{unit.name}`" for unit in chosen])
        items.append(
            ItemAnswer(
                text=wording.format(named, job.target),
                edits=[{"path": job.target, "old": unit.cut, "new": unit.original} for unit in chosen],
            )
        )
    return items


def _applied(files: dict[str, str], answer: list[dict[str, str | None]]) -> dict[str, str]:
    """The files an item's edits change, applied to `files` (each replacement found once)."""
    out: dict[str, str] = {}
    for edit in answer:
        path, old, new = str(edit["path"]), edit["old"], str(edit["new"])
        text = out.get(path, files.get(path, ""))
        if old is not None and text.count(old) != 1:
            raise RalphError(f"bench: {path}: an answer's text occurs {text.count(old)} times, not once")
        out[path] = new if old is None else text.replace(old, new)
    return out


def _checks(job: Job) -> list[str]:
    tests = " ".join(job.tests)
    checks = [f"{{python}} -m pytest -q -p no:cacheprovider -o pythonpath={job.pythonpath} {tests}"]
    if job.kind == "migrate":
        checks.append(f"{{python}} {LEFT_OVER} name TestCase {job.target}")
    elif job.kind == "rename":
        checks.append(f"{{python}} {LEFT_OVER} name {job.names[0]} {job.target}")
    elif job.kind == "types":
        checks.append(f"{{python}} -m mypy --strict --follow-imports=silent --cache-dir=/dev/null {job.target}")
        # mypy --strict passes a module that silences it: `# type: ignore`, `# mypy: ignore-errors`
        checks.append(f"{{python}} {LEFT_OVER} comment 'type: *ignore|mypy:' {job.target}")
    return checks


def _tests_passing(top: Path, reference: dict[str, str], checks: list[str]) -> list[str]:
    """The tests the finished job passes: the reference solution's, checked to pass every check.
    (The original package's own code, or for a migration the scripted model's rewrite, run as
    pip would have run its build: outside the sandbox.)"""
    with tempfile.TemporaryDirectory(prefix="ralph-bench-reference-") as folder:
        tree = Path(folder) / "tree"
        shutil.copytree(top, tree)
        _write(tree, {**reference, LEFT_OVER: LEFT_OVER_SCRIPT})
        specs = [CheckSpec(run=render(check)) for check in checks]
        results = run_checks(specs, tree, timeout=600, env=proc.clean_env(), log_dir=Path(folder))
    failing = [result for result in results if not result.passed]
    if failing or results[0].tests is None:
        why = failing[0].could_not_run or failing[0].output_tail[-300:] if failing else "pytest reported no tests"
        raise RalphError(f"bench: the finished job fails its own checks here — {why.strip()}")
    return sorted({test_id(test) for test in results[0].tests.passed_ids})


def test_id(node_id: str) -> str:
    """A test by its file and its name, whatever class holds it: a migration moves tests out of
    their TestCase classes (`tests/t.py::Case::test_a` and `tests/t.py::test_a` are one test)."""
    path, _, rest = node_id.partition("::")
    return f"{path}::{rest.rpartition('::')[2]}"


def _ralph_files(job: Job, checks: list[str], items: list[ItemAnswer]) -> dict[str, str]:
    config = {
        "goal": _goal(job),
        "agent": {"kind": "openai", "model": "set-by-ralph-bench"},
        "checks": entries([check.replace("{python}", "python") for check in checks]),
    }
    todo = "# TODO\n\n" + "".join(f"- [ ] {item.text}\n" for item in items)
    files = {
        "ralph.yaml": json.dumps(config, indent=2) + "\n",
        "TODO.md": todo,
        "PROGRESS.md": "# Progress\nNothing yet.\n",
        ".gitignore": GITIGNORE,
    }
    if len(checks) > 1 and LEFT_OVER in checks[-1]:
        files[LEFT_OVER] = LEFT_OVER_SCRIPT
    return files


def entries(checks: list[str]) -> list[str | dict[str, object]]:
    """The checks as ralph.yaml lists them: the tests first, judged test by test; a job's other
    checks (a left-over name or comment, mypy) give no per-test results and most fail at its
    start, so they are marked `expect_red`: only done waits for them (one that passes at the
    start is still held to passing)."""
    return [checks[0], *({"run": check, "expect_red": True} for check in checks[1:])]


def _goal(job: Job) -> str:
    where = f"{job.target} of {job.package}"
    if job.kind == "rebuild":
        return f"Rebuild {where}: its functions' bodies raise NotImplementedError; implement them so the tests pass"
    if job.kind == "migrate":
        return f"Migrate the tests in {where} from unittest.TestCase classes to plain pytest functions, all passing"
    if job.kind == "types":
        return f"Type {where} so that `mypy --strict` passes on it without being silenced; the tests keep passing"
    old, new = job.names
    return f"In {job.package}, `{old}` is the deprecated name of `{new}`: use `{new}` everywhere, no `{old}` left"


def _write(top: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text(text)


def _listing(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _fingerprint(job: Job) -> str:
    """What a built job depends on: the job, how it is cut (this package's code), and the Python,
    pytest and mypy that count its tests."""
    cutting = [Path(module.__file__ or "") for module in (edits, migrate)] + [Path(__file__)]
    tools = [_version(name) for name in ("pytest", "mypy")]
    key = json.dumps([FORMAT, repr(job), list(sys.version_info[:2]), tools, [p.read_text() for p in cutting]])
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
