"""The packages the jobs are built from: sdists from the user's package index at a pinned
version and hash, downloaded once and kept in the bench cache."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ralph.errors import RalphError
from ralph.isolation import proc

DOWNLOAD_TIMEOUT = 300


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    sha256: str  # of the .tar.gz the index serves: a different file is never built from

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


def cache_root() -> Path:
    """$RALPH_BENCH_CACHE, else ralph/bench in the user's cache folder ($XDG_CACHE_HOME or ~/.cache)."""
    if os.environ.get("RALPH_BENCH_CACHE"):
        return Path(os.environ["RALPH_BENCH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ralph" / "bench"


def fetch(sdist: Sdist, cache: Path) -> Path:
    """The sdist's archive in `cache`: downloaded through pip (so the user's index, proxy and
    certificates apply) the first time, checked against its pinned hash every time. pip checks
    the hash too (`--require-hashes`), before it runs anything of the package's to read its
    metadata; its own cache is left out, so no copy of the package stays where laps may read."""
    kept = cache / "sdists" / f"{sdist.name}-{sdist.version}.tar.gz"
    if kept.is_file() and _sha256(kept) == sdist.sha256:
        return kept
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=kept.parent) as scratch:
        wanted = Path(scratch) / "requirements.txt"
        wanted.write_text(f"{sdist.spec} --hash=sha256:{sdist.sha256}\n")
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", sdist.name]
        command += ["--require-hashes", "--no-cache-dir", "--dest", scratch, "-r", str(wanted)]
        done = proc.run(command, scratch, timeout=DOWNLOAD_TIMEOUT)
        archives = sorted(Path(scratch).glob("*.tar.gz"))
        if got := re.search(r"Got +([0-9a-f]{64})", done.output):
            raise RalphError(f"bench: {sdist.spec} from the index has sha256 {got[1]}, not the pinned {sdist.sha256}")
        if not done.ok or len(archives) != 1:
            first = next((line for line in done.tail().splitlines() if "ERROR" in line), done.tail(200).strip())
            raise RalphError(f"bench: could not download {sdist.spec} with pip — {first or 'no .tar.gz came'}")
        if (found := _sha256(archives[0])) != sdist.sha256:
            raise RalphError(f"bench: {archives[0].name} has sha256 {found}, not the pinned {sdist.sha256}")
        os.replace(archives[0], kept)
    return kept


def unpack(archive: Path, into: Path) -> Path:
    """The sdist's top folder, unpacked under `into` with tarfile's `data` filter (no links out,
    no devices, no absolute paths)."""
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    (top,) = [entry for entry in into.iterdir() if entry.is_dir()]
    return top


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
