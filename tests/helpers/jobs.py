"""Jobs that more than one test file runs: ralph's own scripted agents with the repository made
for them."""

from __future__ import annotations

from pathlib import Path

from helpers.repos import PY, make_repo, python_agent

# A command agent that does the TODO items its slot claimed (or the first open one), taking
# SLEEP seconds: `--parallel` and `--remote` runs.
ITEMS_AGENT = r"""
import os, pathlib, re, time
# Its items, or (a lap of a run without slots) the first open one.
items = [line for line in os.environ.get("RALPH_ITEMS", "").splitlines() if line]
items = items or re.findall(r"- \[ \] (.*)", pathlib.Path("TODO.md").read_text())[:1]
prompt = pathlib.Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
print("slot", os.environ.get("RALPH_SLOT"), "items", items, "saw a conflict" if "conflict:" in prompt else "")
time.sleep(SLEEP)
todo = pathlib.Path("TODO.md")
text = todo.read_text()
for item in items:
    written = re.match(r"Write (\S+)", item)
    if written:
        pathlib.Path(written[1]).write_text(item + "\n")
    greeting = re.match(r"Set the greeting to (\w+)", item)
    if greeting:
        pathlib.Path("greeting.txt").write_text(greeting[1] + "\n")
    text = text.replace(f"- [ ] {item}", f"- [x] {item}")
    if "tick every item" in item:  # a lap that ticks what others claimed
        text = text.replace("- [ ]", "- [x]")
todo.write_text(text)
progress = pathlib.Path("PROGRESS.md")
progress.write_text(progress.read_text() + f"\n## Slot {os.environ.get('RALPH_SLOT')}\nlap {os.environ['RALPH_LAP']}: {items}\n")
"""


def items_repo(tmp_path: Path, items: list[str], sleep: float = 0.5, **limits: object) -> Path:
    """A repository whose agent does the items it claimed, taking `sleep` seconds."""
    config = {
        "goal": "Do every item",
        "agent": python_agent(tmp_path / "agent.py", ITEMS_AGENT.replace("SLEEP", str(sleep))),
        "checks": [f"{PY} -c 'import pathlib; assert pathlib.Path(\"TODO.md\").exists()'"],
        "limits": {"max_laps": 12, "stagnation": 6, **limits},
    }
    files = {"TODO.md": "# TODO\n" + "".join(f"- [ ] {item}\n" for item in items), "greeting.txt": "hello\n"}
    return make_repo(tmp_path / "repo", files, config=config, progress="# Progress\n")


def mul_repo(tmp_path: Path, base_url: str, **more: object) -> Path:
    """calc.py to finish with the built-in agent: importing it passes, multiplying fails (an exit
    code with no per-test results, so it is marked expected red)."""
    multiplies = {"run": f"{PY} -c 'import calc; assert calc.mul(2, 3) == 6'", "expect_red": True}
    config = {
        "goal": "Finish calc",
        "agent": {"kind": "openai", "model": "scripted-1", "base_url": base_url, "fix_attempts": 0},
        "checks": [f"{PY} -c 'import calc'", multiplies],
        **more,
    }
    files = {"calc.py": "def mul(a, b):\n    raise NotImplementedError\n", "TODO.md": "# TODO\n- [ ] Implement mul\n"}
    return make_repo(tmp_path / "repo", files, config=config, progress="nothing yet\n")
