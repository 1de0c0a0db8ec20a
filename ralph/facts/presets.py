"""Agent CLIs people already have, as `agent: {kind: command, preset: NAME}`: the command each
runs non-interactively in the lap's work tree, the credential variables it is given, how it
says it hit a usage or rate limit, and how it reports tokens and cost.

Each tool gets the lap's prompt once, by the one channel it reads whole (`prompt`): stdin, or a
file it is named by a flag. Never as an argument: one argv word holds 128 KiB at most, and the
prompt holds all of TODO.md and PROGRESS.md. Four of the tools append stdin to an argument, so
stdin is closed for those that read a file. `written_for` is the version of the tool its
command was last checked against, run for real (tests/test_agent_clis.py).

A tool logs in by its variables, or by a copy of its login file alone in the phase's private
HOME (ralph/facts/logins.py), not by the user's HOME: what a lap writes there (a hook in
~/.claude/settings.json, an MCP server in ~/.claude.json) would run outside the sandbox the
next time the user starts the tool.

Nor does a lap take in the user's own setup: where the tool documents a switch for it, its
command leaves out the user-level settings, hooks, MCP servers and extensions (unsandboxed, laps
run in the user's HOME). A user who wants them back replaces the preset's command with `command:`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ralph.facts.logins import LoginFile, present

# The model-provider keys of tools that talk to many providers (through LiteLLM or their own).
PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "XAI_API_KEY",
    "AZURE_API_KEY",
)
# What of aider's config logs it in: its keys, and where its models are.
AIDER_LOGIN = ("api-key", "openai-api-key", "anthropic-api-key", "openai-api-base", "openai-api-type")
# Where a provider's API is, which agent CLIs read from these (a proxy, a local server): given,
# like a preset's credentials, to a preset's agent only, never to setup, hooks or checks.
ENDPOINTS = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
# Rate limits every HTTP-based tool may print, whatever its own words.
RATE_LIMITED = (r"\b429\b.*(too many requests|rate limit)", r"rate limit (exceeded|reached)", r"rate limited you")


# How the tool reports a lap (ralph/agents/reports.py): in its output, or in its report file.
Reports = Literal[
    "text", "claude-json", "codex-jsonl", "gemini-json", "opencode-jsonl", "aider-text", "mini-trajectory"
]


@dataclass(frozen=True)
class Preset:
    name: str
    executable: str  # looked for on PATH when the run starts
    command: str  # through the shell, in the lap's work tree
    credentials: tuple[str, ...]  # the variables of its login the tool is given, and no other tool nor check
    limits: tuple[str, ...]  # regular expressions (case-insensitive) on its output: a usage or rate limit
    reports: Reports
    written_for: str
    # stdin; file: $RALPH_PROMPT_FILE, named by a flag; task-config: $RALPH_TASK_FILE, a config file
    # that holds it as {run: {task: …}} (mini-swe-agent's `-c`, which has no task-file flag)
    prompt: Literal["stdin", "file", "task-config"] = "stdin"
    login: str = ""  # the long-lived way to log the tool in, when more than a key of `credentials`
    login_files: tuple[LoginFile, ...] = ()  # copied into a sandboxed lap's private HOME (ralph/facts/logins.py)
    # Set in the tool's environment when it runs in bubblewrap: how it is told it is sandboxed,
    # where it refuses to skip its permission prompts as root otherwise.
    sandboxed: tuple[tuple[str, str], ...] = ()
    leaves: tuple[str, ...] = ()  # what the tool writes in the work tree for itself (globs): never committed

    def logged_in_by(self, env: Mapping[str, str], kept: tuple[str, ...] = ()) -> str | None:
        """What logs the tool in: the first of its credential variables set (not one `kept` from
        agent CLIs), else its login file; None when neither is there."""
        keys = [name for name in self.credentials if env.get(name) and name not in kept]
        files = present(self.login_files, env)
        return keys[0] if keys else (f"its login file {files[0]}" if files else None)

    def no_login(self) -> str:
        """Why the tool cannot log in, and how it could."""
        files = " or ".join(f"~/{file.path}" for file in self.login_files if file.logs_in)
        also = f", or log in so that {files} is there" if files else ""
        return f"the {self.name} preset's tool has no login: set {self.login}{also}"


COSTED = ("claude-json", "opencode-jsonl", "aider-text", "mini-trajectory")  # the outputs that tell a lap's cost

PRESETS = {
    preset.name: preset
    for preset in (
        Preset(
            "claude",
            "claude",
            # As root, Claude Code refuses to skip permissions unless told it runs in a sandbox (IS_SANDBOX=1).
            # The project's settings (committed in the work tree) stay; ~/.claude/settings.json, with its
            # hooks and plugins, does not. MCP servers live in ~/.claude.json too, which only
            # --strict-mcp-config keeps out: it drops the project's .mcp.json as well.
            "claude -p --output-format json --dangerously-skip-permissions "
            "--setting-sources project,local --strict-mcp-config",
            ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
            (
                r"usage limit reached",
                r"you've hit your (?:session |weekly )?limit",
                r"API Error: Rate limit reached",
                r"rate_limit_error",
                *RATE_LIMITED,
            ),
            "claude-json",
            "Claude Code 2.1.332",
            login="CLAUDE_CODE_OAUTH_TOKEN (made by `claude setup-token`) or ANTHROPIC_API_KEY",
            # The login alone (the file holds MCP servers' tokens and plugins' secrets too); its
            # refresh token is single-use: the copy's is empty.
            login_files=(
                LoginFile(
                    ".claude/.credentials.json",
                    ("CLAUDE_CONFIG_DIR", ".credentials.json"),
                    blank=("refreshToken",),
                    only=("claudeAiOauth",),
                ),
            ),
            sandboxed=(("IS_SANDBOX", "1"),),
        ),
        Preset(
            "codex",
            "codex",
            # Skips $CODEX_HOME/config.toml (MCP servers, hooks, profiles); the login in CODEX_HOME still counts.
            "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox --ignore-user-config -",
            ("CODEX_API_KEY", "CODEX_ACCESS_TOKEN", "OPENAI_API_KEY"),
            (r"you've hit your usage limit", r"quota exceeded", r"429 Too Many Requests", *RATE_LIMITED),
            "codex-jsonl",
            "Codex CLI 0.171.0",
            login="CODEX_API_KEY (an API key) or CODEX_ACCESS_TOKEN",
            login_files=(LoginFile(".codex/auth.json", ("CODEX_HOME", "auth.json"), blank=("refresh_token",)),),
        ),
        Preset(
            "aider",
            "aider",
            # --no-gitignore: .gitignore is no lap's to change. Its analytics log (written with analytics
            # off) has each answer's exact tokens; a chat history over --max-chat-history-tokens would be
            # summarized as it exits, in requests cut off unreported.
            'aider --yes-always --message-file "$RALPH_PROMPT_FILE" --no-auto-commits --no-check-update '
            "--no-show-release-notes --analytics-disable --no-pretty --no-stream --no-fancy-input --no-gitignore "
            '--analytics-log "$RALPH_REPORT_FILE" --max-chat-history-tokens 1000000000',
            PROVIDER_KEYS,
            (r"RateLimitError", r"has rate limited you", *RATE_LIMITED),
            "aider-text",
            "aider 0.86.2",
            "file",
            # Its keys and where they go; not the commands the config runs (test-cmd, lint-cmd).
            login_files=(LoginFile(".aider.conf.yml", only=AIDER_LOGIN),),
            leaves=(".aider*",),  # its chat and input histories, its repository map's cache
        ),
        Preset(
            "gemini",
            "gemini",
            # Extensions (installed in ~/.gemini/extensions) bring MCP servers and context; no switch
            # documented keeps out the hooks and MCP servers of ~/.gemini/settings.json.
            "gemini --approval-mode yolo --skip-trust --extensions none --output-format json",
            ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"),
            (r"exhausted your capacity", r"quota (?:will reset|exceeded)", r"RESOURCE_EXHAUSTED", *RATE_LIMITED),
            "gemini-json",
            "Gemini CLI 0.61.0",
            login="GEMINI_API_KEY",
            # Google's refresh tokens are not single-use: the copy keeps it. Of the settings, only how it logs in.
            login_files=(
                LoginFile(".gemini/oauth_creds.json"),
                LoginFile(".gemini/google_accounts.json", logs_in=False),
                LoginFile(".gemini/settings.json", only=("security", "selectedAuthType"), logs_in=False),
            ),
        ),
        Preset(
            "opencode",
            "opencode",
            # --auto approves what is not denied; --pure leaves out external plugins; a --title of its
            # own spares the request that would title the session with the whole prompt again.
            'opencode run --format json --auto --pure --title "ralph lap $RALPH_LAP"',
            # Its login and its config as variables: either may hold a provider's key.
            (*PROVIDER_KEYS, "OPENCODE_AUTH_CONTENT", "OPENCODE_CONFIG_CONTENT"),
            RATE_LIMITED,
            "opencode-jsonl",
            "opencode 1.18.33",
            # Its providers' keys, and their OAuth logins, whose refresh tokens the copy holds empty.
            login_files=(
                LoginFile(
                    ".local/share/opencode/auth.json", ("XDG_DATA_HOME", "opencode/auth.json"), blank=("refresh",)
                ),
            ),
        ),
        Preset(
            "goose",
            "goose",
            'GOOSE_MODE=auto goose run --no-session --instructions "$RALPH_PROMPT_FILE"',
            PROVIDER_KEYS,
            RATE_LIMITED,
            "text",
            "goose 1.x",
            "file",
        ),
        Preset(
            "mini-swe-agent",
            "mini",
            # Started in the lap's own folder: mini reads `-c mini.yaml` from where it starts before its
            # own; its commands run in the work tree (the task config's environment.cwd).
            'cd "${RALPH_TASK_FILE%/*}" && MSWEA_CONFIGURED=true MSWEA_COST_TRACKING=ignore_errors '
            'MSWEA_SILENT_STARTUP=1 mini --yolo --exit-immediately -c mini.yaml -c "$RALPH_TASK_FILE" '
            '--output "$RALPH_REPORT_FILE"',
            PROVIDER_KEYS,
            (r"RateLimitError", *RATE_LIMITED),
            "mini-trajectory",
            "mini-swe-agent 2.4.6",
            "task-config",
        ),
    )
}

COSTED_PRESETS = [name for name, preset in PRESETS.items() if preset.reports in COSTED]
