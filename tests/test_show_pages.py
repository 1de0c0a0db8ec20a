"""The pages ralph writes show hostile text as text: every string of a lap that `ralph report`
shows, and every string of a bench's results that `ralph bench --html` shows, holds markup, a
`</style>`, quotes and a `javascript:` URL; headless Chromium loads the page, runs nothing, and
shows each value as it was written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

from helpers.browser import browse
from helpers.repos import git, make_repo, python_agent
from helpers.running import ralph

from ralph.bench import page
from ralph.bench.results import Report, Result, TokenTotals
from ralph.git.layout import RunRefs
from ralph.records.formats import LapRecord
from ralph.show import pages

ATTACKS = (
    "<script>document.title='pwned'</script>",  # first: a shown prefix (a parent's first 10) is markup too
    "</style><script>document.title='pwned'</script>",
    '"><img src=x onerror="document.title=\'pwned\'">',
    "' onmouseover='document.title=`pwned`' x='",
    "</title></textarea><svg onload=document.title='pwned'>",
    "javascript:alert(1)",
)
# What the pages are made of: an element or attribute outside these was written by the text.
TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "div", "span", "b", "code", "pre"}
TAGS |= {"ul", "li", "table", "tbody", "tr", "th", "td", "details", "summary", "section"}
TAGS |= {"svg", "g", "rect", "text", "line", "polyline"}
ATTRIBUTES = {"lang", "charset", "name", "content", "class", "id", "style", "title", "role", "aria-label"}
ATTRIBUTES |= {"data-status", "data-job", "viewbox", "width", "height", "x", "y", "x1", "y1", "x2", "y2"}
ATTRIBUTES |= {"fill", "stroke", "stroke-width", "points", "text-anchor", "font-size"}
# Set to a note's string fields as they are (the note must still read): the others take hostile text.
VALIDATED = {"format", "run", "lap", "status", "outcome", "commit", "parent", "started_at"}

# Each lap ticks the first open item and writes a line of hostile text, saying it did.
AGENT = r"""
import pathlib, re
todo = pathlib.Path("TODO.md")
todo.write_text(re.sub(r"- \[ \]", "- [x]", todo.read_text(), count=1))
with open("page.txt", "a") as page:
    page.write(HOSTILE + "\n")
print(HOSTILE)
"""


def hostile(field: str) -> str:
    return f"{ATTACKS[0]} {field} {' '.join(ATTACKS[1:])}"


class Dom(HTMLParser):
    """The elements, attributes and text nodes of a page, as Chromium left its DOM."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str]] = []
        self.texts: list[str] = []
        self.title = self.style = ""
        self._in: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [(name, value or "") for name, value in attrs]
        if tag != "meta":  # the one void element of the pages: no end tag
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._in:
            del self._in[len(self._in) - 1 - self._in[::-1].index(tag) :]

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        if self._in[-2:] == ["head", "title"]:
            self.title += data
        if self._in[-1:] == ["style"]:
            self.style += data


def assert_shown_as_text(dom_html: str, title: str, shown: list[str]) -> Dom:
    dom = Dom(dom_html)
    assert dom.title == title  # no script ran: each would have renamed the page
    assert set(dom.tags) <= TAGS, set(dom.tags) - TAGS
    assert dom.tags.count("style") == 1 and "script" not in dom.tags and "pwned" not in dom.style
    assert {name for name, _ in dom.attributes} <= ATTRIBUTES, {name for name, _ in dom.attributes} - ATTRIBUTES
    assert all(value.startswith("background:#") for name, value in dom.attributes if name == "style")
    for value in shown:
        assert any(value in text for text in dom.texts), value
    return dom


def test_a_laps_hostile_text_is_shown_as_text_in_the_report(tmp_path: Path):
    agent = python_agent(tmp_path / "agent.py", f"HOSTILE = {hostile('diff line')!r}\n" + AGENT)
    config = {"goal": hostile("goal"), "agent": agent, "checks": ["true"]}
    items = [hostile("item 1"), hostile("item 2"), "the last"]
    repo = make_repo(tmp_path / "repo", config=config, todo=items)
    result = ralph(repo, "run", "--name", "h")
    assert result.returncode == 0, result.stdout + result.stderr

    def plant(lap: int, change: dict) -> None:
        """The lap's note with every string hostile (as a remote anyone can push to could have it)."""
        ref = RunRefs("h").lap(lap)
        note = json.loads(git(repo, "notes", "--ref=ralph", "show", ref)) | change
        git(repo, "notes", "--ref=ralph", "add", "-f", "-m", json.dumps(_hostile_strings(note)), ref)

    scores = [{"dimension": "", "reason": "", "evidence": "", "score": 0.5, "counted": False}]
    judge = {"status": "held", "score": 0.5, "scores": scores, "blocking": [""], "suggestions": [""]}
    plant(1, {"slot": 1, "items": [""], "judge": judge, "output_tail": "", "told": [""]})
    plant(2, {"judge": {"status": "unavailable", "detail": ""}})  # (commit ids are allowed hex only: test_git_records)
    # A note that does not read: the problem said is the key it names.
    plant(3, {"judge": {"status": "held", "signals": {hostile("note key"): "not a number"}}})

    report = tmp_path / "report.html"
    shown = ralph(repo, "report", "-o", str(report))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    dom = browse(report, tmp_path / "profile", "--dump-dom").stdout
    assert_shown_as_text(
        dom,
        "ralph run h",
        [
            hostile("goal"),
            *(hostile(field) for field in ("reason", "agent.summary", "ticked.0", "items.0", "checks.0.command")),
            *(hostile(f"judge.{field}") for field in ("scores.0.dimension", "scores.0.reason", "blocking.0")),
            hostile("judge.detail"),  # lap 2's
            f"+{hostile('diff line')}",
            hostile("note key"),
        ],
    )
    assert LapRecord.model_validate_json(git(repo, "notes", "--ref=ralph", "show", RunRefs("h").lap(1))).judge
    assert dom.count('<details class="lap" data-status="green">') == 2  # two notes read, the third did not


def _hostile_strings(value: object, path: str = "") -> object:
    """`value` with each string in it replaced by hostile text naming where it was."""
    if isinstance(value, dict):
        return {
            key: item if key in VALIDATED else _hostile_strings(item, _at(path, key)) for key, item in value.items()
        }
    if isinstance(value, list):
        return [_hostile_strings(item, _at(path, str(number))) for number, item in enumerate(value)]
    if isinstance(value, str):
        return hostile(path)
    return value


def _at(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def test_a_bench_results_hostile_text_is_shown_as_text_in_its_page(tmp_path: Path):
    """The job's name (a bench file names it), the model, the modes and why a job was not judged
    (a check's own words) are all text from outside."""
    tokens = TokenTotals(prompt=1200, completion=300, largest_request=900)
    counts = dict(tests_passed=1, tests_total=2, tests_at_start=0, items_done=1, items_total=2, requests=3)
    results = [
        Result(
            job=hostile("job"),
            mode=mode,
            finished=False,
            not_judged=hostile(f"not judged {mode}"),
            tokens=tokens,
            wall_s=1.0,
            laps=2,
            red_laps=1,
            exit_code=3,
            curve=[(0, 0), (600, 1)],
            largest_per_lap=[400, 500],
            **counts,
        )
        for mode in ("laps", hostile("mode"))
    ]
    html = tmp_path / "bench.html"
    html.write_text(page.render(Report(model=hostile("model"), results=results)))
    dom = assert_shown_as_text(
        browse(html, tmp_path / "profile", "--dump-dom").stdout,
        "ralph bench",
        [hostile("job"), hostile("model"), hostile("mode")],
    )
    titles = [value for name, value in dom.attributes if name == "title"]  # an attribute's text, never its markup
    assert titles == [hostile("not judged laps"), hostile(f"not judged {hostile('mode')}")]
    assert [value for name, value in dom.attributes if name == "data-job"] == [hostile("job")]


def test_jinja2_is_loaded_only_to_write_a_page():
    """`ralph --help` and every command that writes no page start without it."""
    code = (
        "import sys\nfrom ralph.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import ralph.commands.report, ralph.bench.page\nassert 'jinja2' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_no_template_turns_escaping_off():
    """What the test above cannot reach (a field added later): no value is marked safe, and every
    attribute a value goes into is quoted (escaping does not hold an unquoted one together)."""
    for template in (Path(pages.__file__).parent / "templates").glob("*.j2"):
        text = template.read_text()
        assert not re.search(r"\|\s*safe\b|autoescape\s+false|Markup|=\{\{", text), template.name
