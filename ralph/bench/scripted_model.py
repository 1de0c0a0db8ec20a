"""`ralph bench --scripted`: a deterministic model that really does the jobs, through the real
tool calls a model would send (view, edit, run the tests, tick, hand off, finish).

It knows the answers (the job's manifest: the edits that undo the cut, outside the job's
repository), so it tests the harness, never a model: the suite, both modes, the scoring and the
page run offline. What it does next is read from the request alone, as a server sees it: the
items still open in the lap prompt, the assistant turns so far, and whether the prompt gives
the whole job to one session (then it works through every item, else the first open one)."""

from __future__ import annotations

from ralph.agents.scripted import Step, bash, finish, tool_call
from ralph.bench.build import BuiltJob, ItemAnswer, render
from ralph.lap.prompt import WHOLE_JOB

EDITOR = "str_replace_based_edit_tool"
MODEL = "scripted-bench"


class ScriptedModel:
    def __init__(self, job: BuiltJob):
        self.job = job

    def __call__(self, body: dict, index: int) -> Step:
        prompt = next(message["content"] for message in body["messages"] if message["role"] == "user")
        turn = sum(1 for message in body["messages"] if message["role"] == "assistant")
        plan = self.plan(prompt)
        return plan[min(turn, len(plan) - 1)]

    def plan(self, prompt: str) -> list[Step]:
        """The lap's every step, chosen from what its prompt says."""
        todo = prompt.split("# TODO.md", 1)[-1]
        open_items = [item for item in self.job.items if f"- [ ] {item.text}" in todo]
        if not open_items:
            return [finish("nothing is left to do")]
        whole_job = WHOLE_JOB.split(":")[0] in prompt  # "- You have the whole job in this one session"
        doing = open_items if whole_job else open_items[:1]
        steps = [step for item in doing for step in self._item(item)]
        left = len(open_items) - len(doing)
        if not whole_job:  # a handoff is for the next lap; a session has none
            handoff = f"# Progress\nDone: {len(self.job.items) - left} of {len(self.job.items)} items.\n"
            next_one = "Next: the first open item.\n" if left else ""
            steps.append(_edit("create", "PROGRESS.md", file_text=handoff + next_one))
        steps.append(finish(f"did {len(doing)} item(s); {left} left"))
        return steps

    def _item(self, item: ItemAnswer) -> list[Step]:
        first = str(item.edits[0]["path"])
        steps: list[Step] = [_edit("view", first)]
        for edit in item.edits:
            path, old, new = str(edit["path"]), edit["old"], str(edit["new"])
            if old is None:
                steps.append(_edit("create", path, file_text=new))
            else:
                steps.append(_edit("str_replace", path, old_str=old, new_str=new))
        steps.append(bash(render(self.job.checks[0])))
        steps.append(_edit("str_replace", "TODO.md", old_str=f"- [ ] {item.text}", new_str=f"- [x] {item.text}"))
        return steps


def _edit(command: str, path: str, **arguments: object) -> Step:
    return tool_call(EDITOR, dict(command=command, path=path, **arguments))
