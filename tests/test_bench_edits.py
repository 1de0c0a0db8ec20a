"""How the bench cuts a job from a package's source, and the scripted model's unittest → pytest
rewrite: on small modules written here, run for real where it matters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ralph.bench.edits import rename, strip_annotations, stub_bodies
from ralph.bench.migrate import to_pytest

MODULE = '''\
"""A module."""
import functools


def add(a: int, b: int = 2) -> int:
    """Add them."""
    total = a + b
    return total


class Box:
    def __init__(self, *items: str, **named: "int | None") -> None:
        self.items = list(items)

    @functools.cached_property
    def size(self) -> int:
        return len(self.items)

    def one_liner(self): return 1
'''


def test_stubbing_keeps_signatures_and_docstrings_and_says_how_to_undo_it():
    cut, units = stub_bodies(MODULE, {"add", "Box.size"})
    assert "    total = a + b" not in cut and '    """Add them."""\n    raise NotImplementedError\n' in cut
    assert "    @functools.cached_property\n    def size(self) -> int:\n        raise NotImplementedError\n" in cut
    assert [unit.name for unit in units] == ["add", "Box.size"]
    undone = cut
    for unit in units:
        assert undone.count(unit.cut) == 1
        undone = undone.replace(unit.cut, unit.original)
    assert undone == MODULE
    with pytest.raises(ValueError, match="no function nope"):
        stub_bodies(MODULE, {"nope"})
    with pytest.raises(ValueError, match="no body of its own lines"):
        stub_bodies(MODULE, {"Box.one_liner"})


def test_annotations_come_out_of_signatures_only():
    stripped, units = strip_annotations(MODULE)
    assert "def add(a, b = 2):" in stripped  # the default stays; PEP 8's spacing is the model's to restore
    assert "def __init__(self, *items, **named):" in stripped and "def size(self):" in stripped
    assert [unit.name for unit in units] == ["add", "Box"]
    compile(stripped, "m.py", "exec")
    undone = stripped
    for unit in units:
        undone = undone.replace(unit.cut, unit.original)
    assert undone == MODULE


def test_a_rename_touches_names_not_strings_or_comments():
    source = 'from .encoding import want_bytes\n# want_bytes is old\nx = want_bytes("want_bytes")\ny = my_want_bytes\n'
    assert rename(source, "want_bytes", "force_bytes") == (
        'from .encoding import force_bytes\n# want_bytes is old\nx = force_bytes("want_bytes")\ny = my_want_bytes\n'
    )


TESTS = '''\
import unittest
from calc import div


def helper(x):
    return x * 2


class DivTestCase(unittest.TestCase):
    """Division."""

    def test_div(self):
        self.assertEqual(div(6, 3), 2, "six by three")
        self.assertTrue(div(1, 1))
        self.assertFalse(div(0, 1))
        self.assertIn(div(4, 2), (2, 3))
        self.assertIsNone(None)
        self.assertLess(div(1, 2), 1)

    def test_zero(self):
        self.assertRaises(ZeroDivisionError, div, 1, 0)
        with self.assertRaises(ZeroDivisionError):
            div(2, 0)

    if helper(1) == 2:
        def test_helper(self):
            self.assertNotEqual(helper(2), 3)


if __name__ == "__main__":
    unittest.main()
'''


def test_unittest_classes_become_pytest_functions_that_still_pass(tmp_path: Path):
    (tmp_path / "calc.py").write_text("def div(a, b):\n    return a / b\n")
    converted = to_pytest(TESTS)
    assert "unittest" not in converted and "self" not in converted and "class " not in converted
    assert "import pytest" in converted and "assert div(6, 3) == 2, 'six by three'" in converted
    (tmp_path / "test_calc.py").write_text(converted)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "3 passed" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("    def setUp(self):\n        self.x = 1\n", "fixtures are not rewritten"),
        ("    def test_a(self):\n        self.assertAlmostEqual(1, 1)\n", "assertAlmostEqual"),
        ("    def test_a(self):\n        return self.id()\n", "uses self beyond its asserts"),
        ("    limit = 3\n", "class-level Assign"),
    ],
)
def test_what_the_rewrite_cannot_do_it_refuses(body: str, refused: str):
    with pytest.raises(ValueError, match=refused):
        to_pytest(f"import unittest\n\n\nclass T(unittest.TestCase):\n{body}")
