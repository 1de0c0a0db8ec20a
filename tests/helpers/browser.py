"""Headless Chromium for the pages ralph writes (`ralph report`, `ralph bench --html`): the DOM
it builds and the pixels it draws."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.fail("the pages are tested in headless Chromium, which is not installed: apt-get install chromium")
    return found


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    command += ["--force-color-profile=srgb", f"--user-data-dir={profile}", *args, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)


def screenshot_rows(page: Path, profile: Path, shot: Path, size: str = "1100,1000") -> list[list[tuple[int, ...]]]:
    """The page as Chromium draws it: rows of RGB pixels, top to bottom."""
    browse(page, profile, f"--screenshot={shot}", f"--window-size={size}")
    print(f"screenshot: {shot}")
    image = Image.open(shot).convert("RGB")
    width, height = image.size
    data = image.tobytes()  # RGB, a byte a channel, row after row
    pixels = [tuple(data[at : at + 3]) for at in range(0, len(data), 3)]
    return [pixels[y * width : (y + 1) * width] for y in range(height)]


def rgb(hex_colour: str) -> tuple[int, ...]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def colour_runs(row: list[tuple[int, ...]], colours: dict[str, str]) -> list[str]:
    """The named colours along a row of pixels, each stretch once, in order."""
    names = {rgb(hex_): name for name, hex_ in colours.items()}
    runs: list[str] = []
    for pixel in row:
        name = names.get(pixel[:3])
        if name and (not runs or runs[-1] != name):
            runs.append(name)
    return runs
