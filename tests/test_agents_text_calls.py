"""Tool calls a model writes as text (Qwen's models under a chat template the server does not
parse): named in the lap's error when ralph does not run them, run with
`agent.compat.text_tool_calls`. The real client over real HTTP to the scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.repos import make_repo

from ralph.agents.base import AgentResult, LapTask
from ralph.agents.openai import USE_A_TOOL, OpenAIAgent
from ralph.agents.scripted import ScriptedServer, Step, call, finish, text, tool_calls
from ralph.config.agent import AgentConfig
from ralph.isolation import proc
from ralph.show import events


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"calc.py": "x = 1\n"})


def run_lap(repo: Path, base_url: str, **config: Any) -> AgentResult:
    log_dir = repo.parent / "logs"
    log_dir.mkdir(exist_ok=True)
    agent_config = AgentConfig(kind="openai", model="qwen2.5-coder", base_url=base_url, **config)
    task = LapTask("run", 1, repo, "Do the job.", 60, log_dir, proc.clean_env())
    return OpenAIAgent(agent_config, sleep=lambda _: None).run_lap(task)


def records(repo: Path) -> list[dict]:
    return [json.loads(line) for line in (repo.parent / "logs" / "transcript.jsonl").read_text().splitlines()]


def fenced(*calls: dict, before: str = "", after: str = "") -> str:
    blocks = "".join(f"```json\n{json.dumps(call)}\n```\n" for call in calls)
    return f"{before}\n{blocks}{after}".strip()


def written(name: str, key: str = "arguments", **arguments: object) -> dict:
    return {"name": name, key: arguments}


def assert_valid_history(messages: list[dict]) -> None:
    """What a strict server demands: each tool call answered, by its id, before anything else."""
    waiting: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] == waiting.pop(0), message
            continue
        assert not waiting, message
        for asked in message.get("tool_calls") or []:
            assert asked["type"] == "function" and isinstance(json.loads(asked["function"]["arguments"]), dict)
            assert isinstance(message["content"], str)
            waiting.append(asked["id"])
    assert not waiting


QWEN_REPLY = fenced(written("bash", command="touch ran"), before="I will create the file.")


def test_text_tool_calls_unrun_end_the_lap_saying_the_model_wrote_them_as_text(repo: Path) -> None:
    with ScriptedServer(lambda body, index: text(QWEN_REPLY)) as server:
        result = run_lap(repo, server.base_url)
    assert (result.outcome, len(server.requests)) == ("error", 3)
    assert result.detail.startswith(f"the model called no tool in 3 replies: qwen2.5-coder at {server.base_url}")
    assert (
        "wrote its tool calls as text (a JSON object naming the tool and its arguments) in 3 of them" in result.detail
    )
    assert "the server did not turn them into tool_calls (Qwen's stock chat template does this)" in result.detail
    assert "`agent.compat.text_tool_calls: true` makes ralph accept them" in result.detail
    assert not (repo / "ran").exists()
    assert server.requests[1].body["messages"][-1] == {"role": "user", "content": USE_A_TOOL}


RAN = json.dumps(written("bash", command="touch ran"))
SHOWN = {  # JSON a reply shows, not calls it makes
    "not-offered": fenced(written("python", code="print(1)")),
    "invalid": '```json\n{"name": "bash", "arguments": {"command": "touch ran"}\n```',
    "no-arguments": '{"name": "bash"}',  # a package.json's name, say
    "backticks": f"I will NOT run `{RAN}`, it would delete the file.",
    "prose": f"Do not run {RAN} here.",
    "line-start": f"{RAN} is what I would send",
    "python-block": "The call looks like this:\n```python\nCALL = "
    + json.dumps(written("finish", summary="done", status="done"))
    + f"\nRAN = {RAN}\n```",
    "python-block-whole": f"```python\n{RAN}\n```",  # the whole of a block of code: still code
    "nested": "```json\n" + json.dumps({"example": written("bash", command="touch ran")}) + "\n```",
    "schema": json.dumps(
        {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}
    ),
    "schema-described": fenced(
        {"name": "bash", "description": "Run a command", "parameters": {"type": "object", "properties": {}}}
    ),
}


@pytest.mark.parametrize("text_tool_calls", [True, False], ids=["run", "hint"])
@pytest.mark.parametrize("said", SHOWN.values(), ids=SHOWN.keys())
def test_json_that_is_no_call_of_an_offered_tool_is_text(repo: Path, said: str, text_tool_calls: bool) -> None:
    """Neither run (a lap that ends `error`, not one a shown finish ended) nor claimed by the hint."""
    with ScriptedServer(lambda body, index: text(said)) as server:
        result = run_lap(repo, server.base_url, compat={"text_tool_calls": text_tool_calls})
    assert result.outcome == "error" and "answers in text only" in result.detail
    assert "wrote its tool calls as text" not in result.detail and not (repo / "ran").exists()
    assert '"from_text"' not in (repo.parent / "logs" / "transcript.jsonl").read_text()  # no call came from text


QWEN_SHAPES = {  # how Qwen2.5-Coder writes calls when the server does not parse them
    "json-block": f"I will create the file.\n```json\n{RAN}\n```",
    "blocks": fenced(written("bash", command="touch one"), written("bash", command="touch ran"), before="Two steps:"),
    "tag": f"<tool_call>\n{RAN}\n</tool_call>",
    "tag-after-text": f"Creating it now.\n<tool_call>\n{RAN}\n</tool_call>",
    "bare": RAN,
    "bare-several": json.dumps(written("bash", command="touch one")) + "\n" + RAN + "\n",
}


@pytest.mark.parametrize("said", QWEN_SHAPES.values(), ids=QWEN_SHAPES.keys())
def test_calls_written_as_qwen_writes_them_are_run(repo: Path, said: str) -> None:
    with ScriptedServer([text(said), finish("made")]) as server:
        result = run_lap(repo, server.base_url, compat={"text_tool_calls": True})
    assert (result.outcome, result.summary) == ("ok", "made")
    assert (repo / "ran").exists() and (repo / "one").exists() == ("touch one" in said)
    assistant = server.requests[1].body["messages"][2]
    assert assistant["tool_calls"][-1]["function"] == {
        "name": "bash",
        "arguments": json.dumps({"command": "touch ran"}),
    }
    assert "{" not in assistant["content"] and "tool_call>" not in assistant["content"]


def test_calls_written_as_text_are_named_when_not_run(repo: Path) -> None:
    with ScriptedServer(lambda body, index: text(QWEN_SHAPES["tag"])) as server:
        result = run_lap(repo, server.base_url)
    assert result.outcome == "error" and "wrote its tool calls as text" in result.detail
    assert not (repo / "ran").exists()


def test_with_text_tool_calls_a_reply_runs_the_calls_it_spells(repo: Path) -> None:
    reply = fenced(
        written("bash", command="echo one > one.txt"),
        written("str_replace_based_edit_tool", key="parameters", command="create", path="two.txt", file_text="2\n"),
        before="First the files.",
        after="Then I check.",
    )
    arguments_as_a_string = json.dumps({"name": "bash", "arguments": json.dumps({"command": "cat one.txt two.txt"})})
    script: list[Step] = [
        text(reply),
        text(f"<tool_call>\n{arguments_as_a_string}\n</tool_call>"),
        finish("both written"),
    ]
    lines: list[str] = []
    with (
        events.listening(lambda event: lines.append(event.get("line", ""))),
        ScriptedServer(script) as server,
    ):
        result = run_lap(repo, server.base_url, compat={"text_tool_calls": True})
    assert (result.outcome, result.summary) == ("ok", "both written")
    assert (repo / "one.txt").read_text() == "one\n" and (repo / "two.txt").read_text() == "2\n"
    history = server.requests[2].body["messages"]
    assert_valid_history(history)
    assistant = history[2]
    assert assistant["content"] == "First the files.\n\nThen I check."  # the text around the calls
    assert [call["function"]["name"] for call in assistant["tool_calls"]] == ["bash", "str_replace_based_edit_tool"]
    assert [call["id"] for call in assistant["tool_calls"]] == ["call_ralph_1", "call_ralph_2"]
    assert history[5]["content"] == "" and history[6]["content"] == "one\n2\n[exit code 0]"
    marked = [record for record in records(repo) if record["event"] == "message" and record.get("from_text")]
    assert len(marked) == 2
    assert "bash: echo one > one.txt (written as text)" in lines
    assert "create two.txt (written as text)" in lines


def test_a_reply_with_real_tool_calls_is_not_read_for_text_ones(repo: Path) -> None:
    reply = tool_calls(call("bash", {"command": "touch real"}), content=fenced(written("bash", command="touch text")))
    with ScriptedServer([reply, finish()]) as server:
        assert run_lap(repo, server.base_url, compat={"text_tool_calls": True}).outcome == "ok"
    assert (repo / "real").exists() and not (repo / "text").exists()
