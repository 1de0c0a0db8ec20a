"""The credentials git finds for a repository's remotes: what a lap's sandbox must hide, since
with them code of the lap's could push to the run's remote (a `--remote` run's green line) or
to any of the user's."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ralph import git


def credential_files(cwd: Path) -> tuple[Path, ...]:
    """Where git finds credentials for this repository's remotes: the config files that set a
    helper, an askpass program, an http header (actions/checkout's token) or a URL with a user
    in it (a token as the user, or a password: `url.<with-token>.insteadOf` and a proxy's
    included), the file or socket a `store` or `cache` helper names, the files `http.cookieFile`,
    `http.sslKey`, `http.sslCert` and `core.sshCommand -i` name, and the usual places (~/.git-credentials,
    ~/.ssh, the cache helper's socket, the GitHub CLI's). Every config file of the repository
    counts, not only those git reads here: its submodules' (which actions/checkout gives the
    token too) and its worktrees' (`config.worktree`)."""
    keys = (
        r"^(credential\..*|core\.askpass|core\.sshcommand|http\..*(extraheader|cookiefile|sslkey|sslcert|proxy)"
        r"|remote\..*\.(push)?url|remote\..*\.proxy|url\..*\.(push)?insteadof)$"
    )
    listing = git.run(cwd, "config", "--show-origin", "--get-regexp", keys, check=False).output
    for config in _config_files(git.common_dir(cwd)):
        reading = ("config", "--file", str(config), "--includes", "--show-origin", "--get-regexp", keys)
        listing += git.run(cwd, *reading, check=False).output
    found: set[Path] = set()
    for line in listing.splitlines():
        origin, _, setting = line.partition("\t")
        key, _, value = setting.partition(" ")
        if ("url" in key or "proxy" in key) and not re.search(r"://[^/@\s]+@", setting):  # no user in it
            continue
        if key.endswith(("cookiefile", "sslkey", "sslcert", "sshcommand")):  # it names the secret: a file
            named = re.search(r"-i\s*(\S+)", value) if key == "core.sshcommand" else None
            if named or key != "core.sshcommand":
                found.add(Path(cwd, os.path.expanduser(named[1] if named else value)))
            continue
        if origin.startswith("file:"):
            found.add(Path(cwd, origin.removeprefix("file:")))
        named = re.search(r"--(?:file|socket)[= ]?(\S+)", value) if key.startswith("credential.") else None
        if named:  # a `store` helper's file, a `cache` helper's socket
            found.add(Path(cwd, os.path.expanduser(named[1])))
    home = Path.home()
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache")
    found |= {home / ".git-credentials", home / ".ssh", config / "git" / "credentials", config / "gh"}
    found |= {cache / "git" / "credential", home / ".git-credential-cache"}  # the cache helper's socket
    return tuple(sorted({Path(os.path.abspath(path)) for path in found}))


def _config_files(git_dir: Path) -> list[Path]:
    """The config files of a git dir, its worktrees' and its submodules' (modules/<name>, a name
    may hold slashes; a submodule's own submodules are in its modules/), at any depth."""
    found = [git_dir / "config", git_dir / "config.worktree", *git_dir.glob("worktrees/*/config.worktree")]
    folders = [git_dir / "modules"]
    while folders:
        folder = folders.pop()
        for entry in folder.iterdir() if folder.is_dir() and not folder.is_symlink() else ():
            if entry.is_symlink():  # git makes none here; one could lead back up, for ever
                continue
            if (entry / "HEAD").is_file():
                found += _config_files(entry)
            elif entry.is_dir():
                folders.append(entry)
    return [path for path in found if path.is_file()]
