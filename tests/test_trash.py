"""Folders of ralph's cache deleted off the user's time: moved into a trash folder at once,
deleted there by a thread; never through a link, and nothing outside the cache moved."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ralph.isolation.files import empty_trash, remove_path, use_trash


def _tree(folder: Path, files: int = 30) -> Path:
    for n in range(files):
        (folder / f"d{n % 5}").mkdir(parents=True, exist_ok=True)
        (folder / f"d{n % 5}" / f"f{n}").write_text(str(n))
    return folder


def _emptied(trash: Path, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not os.listdir(trash):
            return True
        time.sleep(0.02)
    return False


def test_a_folder_in_the_cache_is_gone_at_once_and_deleted_in_the_background(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    outside = _tree(tmp_path / "precious")  # a lap's link to it must not lead the deletion there
    workspace = _tree(cache / "workspaces" / "w")
    (workspace / "d0" / "link").symlink_to(outside)
    trash = cache / "trash"
    use_trash(trash)

    remove_path(workspace)

    assert not os.path.lexists(workspace)
    assert _emptied(trash)
    assert sorted(path.name for path in outside.rglob("f*")) == sorted(f"f{n}" for n in range(30))


def test_a_folder_outside_the_cache_is_deleted_in_place(tmp_path: Path) -> None:
    trash = tmp_path / "cache" / "trash"
    use_trash(trash)
    assert _emptied(trash)
    elsewhere = _tree(tmp_path / "elsewhere")

    remove_path(elsewhere)

    assert not os.path.lexists(elsewhere)
    assert os.listdir(trash) == []  # never moved there: deleted where it was


def test_what_an_earlier_process_left_in_the_trash_is_deleted(tmp_path: Path) -> None:
    trash = tmp_path / "cache" / "trash"
    _tree(trash / "123-0")
    _tree(trash / "123-1")
    assert empty_trash(trash) == 2
    assert os.listdir(trash) == []
    assert empty_trash(tmp_path / "none") == 0
