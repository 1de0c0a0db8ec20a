"""`ralph demo`: a small sample repository, worked by real laps of the built-in openai agent.

By default the model is scripted (ralph/agents/scripted.py on 127.0.0.1): everything else is
real — HTTP, tool calls, a sandboxed workspace, commits, checks, a red lap discarded. With --model
and --base-url the same sample goes to a real endpoint instead.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ralph import git
from ralph.agents.scripted import ScriptedServer, Step, bash, finish, tool_call
from ralph.errors import Exit, RalphError
from ralph.run.loop import run
from ralph.run.options import RunOptions
from ralph.show import ui

PY = shlex.quote(sys.executable)
WORDS = """\
from collections import Counter


def word_count(text):
    raise NotImplementedError


def top_words(text, n):
    raise NotImplementedError
"""
WORDS_DONE = """\
from collections import Counter


def word_count(text):
    return len(text.split())


def top_words(text, n):
    counts = Counter(word.lower() for word in text.split())
    return [word for word, _ in counts.most_common(n)]
"""
SLUG = """\
import re


def slugify(title):
    raise NotImplementedError
"""
SAMPLE = {
    "textkit/__init__.py": '"""Small text helpers."""\n',
    "textkit/words.py": WORDS,
    "textkit/slug.py": SLUG,
    "tests/__init__.py": "",
    "tests/test_words.py": """\
import unittest

from textkit.words import top_words, word_count


class WordsTest(unittest.TestCase):
    def test_word_count(self):
        self.assertEqual(word_count("the cat and the hat"), 5)

    def test_top_words(self):
        self.assertEqual(top_words("b a b c b a", 2), ["b", "a"])
""",
    "tests/test_slug.py": """\
import unittest

from textkit.slug import slugify


class SlugTest(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("  Hello, World!  "), "hello-world")
""",
    "tools/docstrings.py": '''\
"""Fails when a public function in textkit/ has no docstring."""
import ast, pathlib, sys

missing = [f"{path}:{node.lineno} {node.name}" for path in sorted(pathlib.Path("textkit").glob("*.py"))
           for node in ast.walk(ast.parse(path.read_text()))
           if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and not ast.get_docstring(node)]
print("\\n".join(missing) or "every public function has a docstring")
sys.exit(1 if missing else 0)
''',
    "TODO.md": """\
# TODO
- [ ] Implement word_count and top_words in textkit/words.py
- [ ] Implement slugify in textkit/slug.py
- [ ] Give every public function in textkit/ a docstring
""",
    "PROGRESS.md": "# Progress\nNothing yet.\n",
    ".gitignore": "__pycache__/\n",
}
# unittest's verbose lines judge each test; the docstring tool fails until the last item, judging no lap.
CHECKS = [
    f"{PY} -m unittest -v tests.test_words",
    f"{PY} -m unittest -v tests.test_slug",
    {"run": f"{PY} tools/docstrings.py", "expect_red": True},
]
ITEMS = [
    "Implement word_count and top_words in textkit/words.py",
    "Implement slugify in textkit/slug.py",
    "Give every public function in textkit/ a docstring",
]


def edit(command: str, path: str, **arguments: object) -> Step:
    return tool_call("str_replace_based_edit_tool", dict(command=command, path=path, **arguments))


def tick(item: str) -> Step:
    return edit("str_replace", "TODO.md", old_str=f"- [ ] {item}", new_str=f"- [x] {item}")


def handoff(text: str) -> Step:
    return edit("create", "PROGRESS.md", file_text=f"# Progress\n{text}\n")


def implement_slugify() -> Step:
    """The edit that implements slugify, as both demo laps that do it send it."""
    return edit(
        "str_replace",
        "textkit/slug.py",
        old_str="    raise NotImplementedError",
        new_str='    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")',
    )


def lap_plan(prompt: str) -> list[Step]:
    """The scripted model's whole lap, chosen from what the lap prompt says."""
    was_red = "was red and its edits were discarded" in prompt
    if f"- [ ] {ITEMS[0]}" in prompt:
        return [
            edit("view", "textkit/words.py"),
            edit("create", "textkit/words.py", file_text=WORDS_DONE),
            bash(f"{PY} -m unittest -q tests.test_words"),
            tick(ITEMS[0]),
            handoff("Done: words.py.\nNext: slugify."),
            finish("implemented word_count and top_words"),
        ]
    if f"- [ ] {ITEMS[1]}" in prompt and not was_red:
        # A plausible mistake: a "tidy-up" of top_words that breaks its ordering.
        return [
            implement_slugify(),
            edit(
                "str_replace", "textkit/words.py", old_str="counts.most_common(n)", new_str="sorted(counts.items())[:n]"
            ),
            tick(ITEMS[1]),
            finish("implemented slugify and tidied top_words"),
        ]
    if f"- [ ] {ITEMS[1]}" in prompt:
        return [
            implement_slugify(),
            bash(f"{PY} -m unittest -q tests.test_slug tests.test_words"),
            tick(ITEMS[1]),
            edit(
                "insert",
                "PROGRESS.md",
                insert_line=1,
                new_str="Tried: reordering top_words broke test_top_words; left it alone.",
            ),
            finish("implemented slugify without touching words.py"),
        ]
    if f"- [ ] {ITEMS[2]}" in prompt:
        docs = [
            ("textkit/words.py", 4, "Number of whitespace-separated words."),
            ("textkit/words.py", 9, "The n most common words, most common first."),
            ("textkit/slug.py", 4, "A lowercase, dash-separated form of a title."),
        ]
        return [
            bash(f"{PY} tools/docstrings.py"),
            *[edit("insert", path, insert_line=line, new_str=f'    """{text}"""') for path, line, text in docs],
            tick(ITEMS[2]),
            handoff("Done: everything."),
            finish("added docstrings"),
        ]
    return [finish("nothing left to do", status="blocked")]


def scripted_model(body: dict, index: int) -> Step:
    prompt = next(message["content"] for message in body["messages"] if message["role"] == "user")
    turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
    plan = lap_plan(prompt)
    return plan[min(turn, len(plan) - 1)]


@dataclass(frozen=True)
class DemoLimits:
    max_laps: int = 8
    lap_timeout: float = 600
    max_turns: int = 60


def demo(folder: Path | None, model: str | None, base_url: str | None, limits: DemoLimits = DemoLimits()) -> Exit:
    if (model is None) != (base_url is None):
        raise RalphError("give both --model and --base-url to run the demo against a real endpoint")
    repo = _create_sample(folder)
    if model and base_url:
        ui.say(f"demo: a sample repository in {ui.safe(repo)}, worked by {ui.safe(model)} at {ui.safe(base_url)}")
        return _run_in(repo, model, base_url, limits)
    with ScriptedServer(scripted_model) as server:
        ui.say(
            f"demo: a sample repository in {repo}\n"
            f"demo: [bold]the model is scripted[/] (a fake OpenAI-compatible server at {server.base_url});"
            " the HTTP, tool calls, commits and checks are real"
        )
        return _run_in(repo, "scripted-demo", server.base_url, limits)


def _run_in(repo: Path, model: str, base_url: str, limits: DemoLimits) -> Exit:
    config = {
        "goal": "Finish textkit: implement its functions and document them",
        "agent": {"kind": "openai", "model": model, "base_url": base_url, "max_turns": limits.max_turns},
        "checks": CHECKS,
        "limits": {"max_laps": limits.max_laps, "stagnation": 3, "lap_timeout": limits.lap_timeout},
    }
    (repo / "ralph.yaml").write_text(json.dumps(config, indent=2) + "\n")
    git.run(repo, "add", "-A")
    git.run(repo, "commit", "-q", "-m", "ralph demo: the job")
    code = run(RunOptions(cwd=repo, name="demo"))
    where = f"cd {ui.safe(shlex.quote(str(repo)))} && ralph log"
    if code != Exit.DONE:
        ui.say(f"\n[bold]demo: the run did not end done (exit {int(code)})[/]: see why with {where}")
    else:
        ui.say(f"\nlook around: {where} && git log --stat ralph/demo")
    return code


def _create_sample(folder: Path | None) -> Path:
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="ralph-demo-"))
    elif folder.exists() and any(folder.iterdir()):
        raise RalphError(f"{folder} is not empty — give the demo a new or empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in SAMPLE.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    git.run(folder, "init", "-q", "-b", "main")
    if not git.run(folder, "var", "GIT_COMMITTER_IDENT", check=False).ok:
        git.run(folder, "config", "user.name", "ralph demo")
        git.run(folder, "config", "user.email", "demo@ralph.invalid")
    git.run(folder, "add", "-A")
    git.run(folder, "commit", "-q", "-m", "textkit: the sample, before the job")
    return folder.resolve()
