"""TODO.md read at 1k / 10k / 80k items: markdown-it's parse against ralph's line scanner (issue 41).

    python bench/todo_parse.py                          # 1000,10000,80000 items, 5 reps
    python bench/todo_parse.py --items 100 --reps 1     # the tiny mode: a few seconds

The TODO is one a long run grows: a heading every 1,000 items, items nested up to two deep,
one in ten wrapped over two lines, three in ten ticked, each naming a file it may change.
Each rep times, back to back on the same text (A B C D A B C D ..., so that each rep's figures
share the machine's mood):

- markdown-it: todo.by_markdown_it, markdown-it-py's block parse and the items read from its tokens
- scanner: todo.by_scanner, ralph/todo/scan.py's line scanner (the same items: checked once a size)
- parse: todo.parse with nothing kept, as a lap reads a TODO it has not seen (the scanner, and
  each item's own lines)
- ticked: todo.parse of the text with one more box ticked, the text before it read already: what
  a lap pays for its agent's TODO when the agent only ticked (todo._reticked)

Medians in ms and µs an item; "markdown-it ÷ scanner" is the median of each rep's ratio.
"""

from __future__ import annotations

import argparse
import random
import time

from common import median, table  # common isolates HOME first

from ralph import todo


def checklist(items: int) -> str:
    rnd, lines, depth = random.Random(items), ["# TODO", ""], 0
    for number in range(items):
        if number % 1000 == 999:
            lines += ["", f"## Part {number // 1000 + 1}", ""]
            depth = -1
        depth = min(depth + 1, rnd.choice([0, 0, 0, 1, 1, 2]))  # under the item before it, at most
        indent = "  " * depth
        box = "[x]" if rnd.random() < 0.3 else "[ ]"
        lines.append(f"{indent}- {box} Item {number}: make it so (may change: src/module_{number}.py)")
        if rnd.random() < 0.1:
            lines.append(f"{indent}  and wrapped onto a second line")
    return "\n".join(lines) + "\n"


def forget() -> None:
    todo._scanned.cache_clear()
    todo._RECENT.clear()


def seconds(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def ticked(text: str) -> float:
    """todo.parse of `text` with its first open box ticked, `text` read before (not timed)."""
    forget()
    todo.parse(text)
    return seconds(todo.parse, text.replace("- [ ]", "- [x]", 1))


def measure(items: int, reps: int) -> dict[str, float]:
    text = checklist(items)
    scanned = todo.by_scanner(text)  # the bench's TODO is one the scanner decides, as markdown-it does
    assert scanned == todo.by_markdown_it(text) and len(scanned) == items, "the scanner disagrees"
    times: dict[str, list[float]] = {"markdown-it": [], "scanner": [], "parse": [], "ticked": []}
    for _ in range(reps):
        times["markdown-it"].append(seconds(todo.by_markdown_it, text))
        times["scanner"].append(seconds(todo.by_scanner, text))
        forget()
        times["parse"].append(seconds(todo.parse, text))
        times["ticked"].append(ticked(text))
    measured = {name: median(values) for name, values in times.items()}
    measured["ratio"] = median(a / b for a, b in zip(times["markdown-it"], times["scanner"], strict=True))
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="1000,10000,80000", help="TODO items, comma-separated")
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args()
    rows = []
    for items in (int(size) for size in options.items.split(",")):
        found = measure(items, options.reps)
        ms = [found[name] * 1000 for name in ("markdown-it", "scanner", "parse", "ticked")]
        per_item = [found[name] * 1e6 / items for name in ("markdown-it", "scanner")]
        rows.append([items, *ms, *per_item, found["ratio"]])
    columns = ["items", "markdown-it ms", "scanner ms", "parse ms", "ticked ms"]
    columns += ["markdown-it µs/item", "scanner µs/item", "markdown-it ÷ scanner"]
    print(table(columns, rows))


if __name__ == "__main__":
    main()
