"""What fresh laps save over one long session: the largest request of each lap vs one growing context.

    python bench/token_growth.py              # 30 laps
    python bench/token_growth.py --laps 10

A real `ralph run` process (`[sys.executable, "-m", "ralph", "run", ...]`) drives the
built-in `openai` agent against ralph's scripted OpenAI-compatible server on loopback
(`ralph.agents.scripted.ScriptedServer`). Each lap the scripted model views a source file,
ticks the first open TODO item with str_replace, runs bash (appends to a file, rewrites
PROGRESS.md, `git status`) and calls finish: four requests a lap.

Token counts are the server's: prompt_tokens = request body bytes // 4, so they count the
JSON the client really sent (tool schemas included), a bytes-based proxy for a tokenizer.
Each lap note's agent.usage gives requests, prompt tokens and largest_prompt_tokens (the
biggest single request: "this lap"). "One session" = the sum of largest_prompt_tokens of
laps 1..n, what one agent's context would hold had it done every lap so far; "shared
once" counts the part every lap repeats (system prompt, tools, goal, TODO: the lap's first
request, read from `.git/ralph/<run>/lap-N/transcript.jsonl`) only once, a lower bound.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from common import git, make_repo, openai_agent, ralph_yaml, table

from ralph.agents.scripted import ScriptedServer, Step, bash, finish, tool_call
from ralph.records import ledger

SOURCE = "".join(f"def handler_{n}(request):\n    return {{'status': {n}, 'body': request}}\n\n" for n in range(40))


def next_step(body: dict, _index: int) -> Step:
    """The scripted model: which step of the lap comes from the assistant turns so far."""
    turn = sum(message["role"] == "assistant" for message in body["messages"])
    item = re.search(r"^- \[ \] (.+)$", body["messages"][1]["content"], re.MULTILINE).group(1)
    if turn == 0:
        return tool_call("str_replace_based_edit_tool", {"command": "view", "path": "src/app.py"})
    if turn == 1:
        return tool_call(
            "str_replace_based_edit_tool",
            {"command": "str_replace", "path": "TODO.md", "old_str": f"- [ ] {item}", "new_str": f"- [x] {item}"},
        )
    if turn == 2:
        return bash(
            f"echo '{item}' >> work.txt && printf 'Done: {item}. Next: the next open item.\\n' "
            "> PROGRESS.md && git status --short"
        )
    return finish(f"{item} done")


def first_request_tokens(transcript: Path) -> int:
    events = (json.loads(line) for line in transcript.read_text().splitlines())
    return next(event["prompt_tokens"] for event in events if event["event"] == "response")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--laps", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ralph-bench-") as root, ScriptedServer(next_step) as server:
        config = ralph_yaml(openai_agent(server.base_url), max_laps=args.laps)
        repo = make_repo(Path(root) / "repo", config, items=args.laps + 5, files={"src/app.py": SOURCE})
        done = subprocess.run(
            [sys.executable, "-m", "ralph", "run", "--name", "tokens"],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=60 + 10 * args.laps,
        )
        assert done.returncode == 3, done.stdout + done.stderr  # 3: max_laps reached
        laps = ledger.load(repo, "tokens").laps
        run_dir = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "ralph" / "tokens"
        shared = [first_request_tokens(run_dir / f"lap-{lap.number}" / "transcript.jsonl") for lap in laps]
    rows, session, shared_once, sent_laps, sent_session = [], 0, 0, 0, 0
    for lap, first in zip(laps, shared, strict=True):
        usage = lap.record.agent.usage
        assert lap.record.status == "green" and not usage.estimated, lap.record.reason
        largest = usage.largest_prompt_tokens
        # In one session each request of this lap would also carry the earlier laps (shared part once).
        carried = usage.requests * (shared_once - first) if shared_once else 0
        sent_laps += usage.prompt_tokens
        sent_session += usage.prompt_tokens + carried
        session += largest
        shared_once += largest - first if shared_once else largest
        rows.append(
            [
                lap.number,
                usage.requests,
                largest,
                session,
                f"{session / largest:.1f}×",
                shared_once,
                f"{shared_once / largest:.1f}×",
                sent_laps,
                sent_session,
                f"{sent_session / sent_laps:.1f}×",
            ]
        )
    print(f"{len(laps)} laps of the openai agent against the scripted server (tokens = request bytes // 4).\n")
    shown = rows if len(rows) <= 12 else rows[:3] + [["…"] * len(rows[0])] + rows[-3:]
    print(
        table(
            [
                "lap",
                "requests",
                "this lap: largest request",
                "one session",
                "ratio",
                "one session, shared once",
                "ratio",
                "prompt tokens sent, laps 1..n",
                "sent, one session (est.)",
                "ratio",
            ],
            shown,
        )
    )


if __name__ == "__main__":
    main()
