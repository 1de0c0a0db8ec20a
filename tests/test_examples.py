"""The workers in examples/ (a GitHub Actions workflow, a Kubernetes Job) are valid against
their published schemas, checked offline: check-jsonschema's vendored schema of GitHub
workflows, and kubernetes-validate's schemas of the Kubernetes API. Each would catch a broken
copy, and each runs `ralph run --remote origin --name <run>` with options ralph has."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ralph.cli import main

EXAMPLES = Path(__file__).parent.parent / "examples"
WORKFLOW = EXAMPLES / "github-actions" / "ralph.yml"
JOB = EXAMPLES / "kubernetes" / "ralph-job.yaml"


def workflow_errors(path: Path) -> str:
    checked = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
    )
    return "" if checked.returncode == 0 else checked.stdout + checked.stderr


def runs_ralph_as_a_worker(script: str) -> None:
    """The script's one `ralph run` line parses as `ralph run` options: a worker of a remote run."""
    (line,) = [line.strip() for line in script.splitlines() if "ralph run " in line]
    args = [arg.strip('"') for arg in line.removeprefix("exec ").split()[2:]]
    command = main.commands["run"]
    params = command.make_context("run", args).params  # an unknown option would raise
    assert params["remote"] == "origin" and params["name"] == "$RUN_NAME"


def test_the_github_actions_workflow_is_a_valid_workflow_of_n_workers_on_one_run(tmp_path: Path):
    assert workflow_errors(WORKFLOW) == ""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    job = workflow["jobs"]["worker"]
    assert len(job["strategy"]["matrix"]["worker"]) >= 2 and job["strategy"]["fail-fast"] is False
    assert workflow[True]["workflow_dispatch"]["inputs"]["run"]["required"]  # YAML 1.1 reads `on` as True
    step = next(step for step in job["steps"] if "ralph run" in step.get("run", ""))
    assert step["env"] == {"OPENAI_API_KEY": "${{ secrets.OPENAI_API_KEY }}", "RUN_NAME": "${{ inputs.run }}"}
    assert "${{" not in step["run"].split("ralph run")[1]  # the run name reaches the shell as a variable
    runs_ralph_as_a_worker(step["run"])
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "run-on:"))
    assert "runs-on" in workflow_errors(broken)


def test_the_kubernetes_job_is_a_valid_batch_v1_job_of_n_workers_on_one_run():
    job = yaml.safe_load(JOB.read_text())
    version = kubernetes_validate.latest_version()
    kubernetes_validate.validate(job, version, strict=True)
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert job["spec"]["parallelism"] >= 2 and "completions" not in job["spec"]  # the work-queue pattern
    (container,) = job["spec"]["template"]["spec"]["containers"]
    keys = {variable["name"]: variable.get("valueFrom", {}).get("secretKeyRef") for variable in container["env"]}
    assert keys["OPENAI_API_KEY"] == {"name": "ralph", "key": "openai-api-key"}
    runs_ralph_as_a_worker(container["args"][0])
    broken = dict(job, spec=dict(job["spec"], parallelism="four"))
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)
    misspelt = dict(job, spec=dict(job["spec"], paralelism=4))
    with pytest.raises(kubernetes_validate.ValidationError):  # strict: an unknown field is an error
        kubernetes_validate.validate(misspelt, version, strict=True)
