"""Rust's unit tests live in the code's own files: `*.rs#tests` in `protect` lets a lap add test
functions there but not weaken one (ralph/verdict/inline_tests.py, guard.py)."""

from __future__ import annotations

import json
import random
import shutil
import textwrap
import time
from pathlib import Path

import pytest
from helpers.repos import git, make_repo, python_agent
from helpers.running import lap_notes, ralph
from test_runners import RUST, _rust_env

from ralph import git as ralph_git
from ralph.config import DEFAULT_PROTECT
from ralph.verdict import guard
from ralph.verdict.inline_tests import is_test_attribute, rust_tests, tokens

LIB = textwrap.dedent(
    r"""
    //! A crate { with a brace in its docs
    use std::collections::HashMap;

    pub fn sub<T: std::ops::Sub<Output = T>>(a: T, b: T) -> T {
        a - b
    }

    pub fn longest<'a>(x: &'a str, y: &'a str) -> &'a str {
        let open = '{';
        let close = '}';
        let quote = '\'';
        let _ = (open, close, quote, b'{', '\u{7B}');
        if x.len() > y.len() { x } else { y }
    }

    /* a block comment { /* nested } */ still comment { */
    pub struct Table<'t> { rows: HashMap<&'t str, u32> }

    impl<'t> Table<'t> {
        pub fn get(&self, key: &str) -> Option<u32> {
            self.rows.get(key).copied()
        }
    }

    #[cfg(test)]
    mod tests {
        #![allow(clippy::all)]
        use super::*;

        /// Subtracts, { in a doc comment.
        #[test]
        fn subs() {
            assert_eq!(sub(5, 3), 2); // a brace } in a comment
        }

        #[test]
        fn strings() {
            let s = "}}\"{ not code";
            let r = r#"a "raw" } string"#;
            let b = br"{";
            let c = |x: u32| { x + 1 };
            assert_eq!(longest(s, r), s);
            assert_eq!(c(1), 2);
            assert_eq!(b, b"{");
        }

        fn helper() -> u32 {
            #[test]
            fn inside_a_function() {} // not a test rustc runs
            1
        }

        mod nested {
            use super::super::*;

            #[test]
            #[should_panic(expected = "}")]
            fn panics() {
                'outer: loop { break 'outer; }
                panic!("}}");
            }

            #[tokio::test(flavor = "multi_thread")]
            async fn awaits() -> Result<(), Box<dyn std::error::Error>> {
                Ok(())
            }
        }
    }
    """
)


def test_each_test_is_found_by_its_module_path_with_its_attributes_and_doc_comments():
    found = rust_tests(LIB)
    assert list(found) == ["tests::subs", "tests::strings", "tests::nested::panics", "tests::nested::awaits"]
    assert found["tests::subs"].startswith("/// Subtracts, { in a doc comment. # [ test ] fn subs ( ) {")
    assert found["tests::subs"].endswith("assert_eq ! ( sub ( 5 , 3 ) , 2 ) ; }")
    assert found["tests::strings"].endswith('assert_eq ! ( b , b"{" ) ; }')
    assert 'r#"a "raw" } string"#' in found["tests::strings"]
    assert found["tests::nested::panics"].startswith('# [ test ] # [ should_panic ( expected = "}" ) ] fn panics')
    assert "'outer" in found["tests::nested::panics"]
    assert found["tests::nested::awaits"].endswith("Ok ( ( ) ) }")


def test_whitespace_and_ordinary_comments_are_no_change():
    reformatted = LIB.replace("    ", "\t").replace("); // a brace } in a comment", ")  ;/* moved } */")
    reformatted = reformatted.replace("fn subs() {", "fn subs()\n{")
    assert rust_tests(reformatted) == rust_tests(LIB)


@pytest.mark.parametrize(
    "old, new",
    [
        ("assert_eq!(sub(5, 3), 2);", "assert!(true);"),  # the body
        ("    #[test]\n    fn subs", "    #[ignore]\n    #[test]\n    fn subs"),  # above
        ("    #[test]\n    fn subs", "    #[test]\n    #[ignore]\n    fn subs"),  # below
        ("    #[test]\n    fn subs", "    #[test]\n    #[should_panic]\n    fn subs"),
        ("    #[test]\n    fn subs", "    #[cfg(any())]\n    #[test]\n    fn subs"),
        ("/// Subtracts, { in a doc comment.", "/// Subtracts."),
        ('let s = "}}\\"{ not code";', 'let s = "}}\\"{  not code";'),  # whitespace in a string is text
        ("fn subs()", "fn subs_renamed()"),
    ],
)
def test_a_change_to_an_attribute_body_doc_or_name_is_one(old: str, new: str):
    assert old in LIB
    before, after = rust_tests(LIB), rust_tests(LIB.replace(old, new, 1))
    assert any(after.get(key) != text for key, text in before.items())


def test_new_tests_beside_the_old_change_none_of_them():
    added = LIB.replace(
        "    mod nested {", "    #[test]\n    fn more() { assert_eq!(sub(2, 2), 0); }\n\n    mod nested {"
    )
    before, after = rust_tests(LIB), rust_tests(added)
    assert {key: after[key] for key in before} == before
    assert set(after) - set(before) == {"tests::more"}


@pytest.mark.parametrize(
    "attribute, test",
    [
        ("test", True),
        ("tokio::test", True),
        ("async_std::test", True),
        ("test_log::test", True),
        ("rstest", True),
        ("test_case", True),
        ("wasm_bindgen_test", True),
        ("cfg", False),  # #[cfg(test)]
        ("should_panic", False),
        ("ignore", False),
        ("derive", False),
    ],
)
def test_which_attributes_make_a_test(attribute: str, test: bool):
    assert is_test_attribute(attribute.split("::")) is test
    source = f"#[cfg(test)]\nmod t {{\n    #[{attribute}(1, 2)]\n    fn f() {{ g({{ 1 }}); }}\n}}\n"
    assert list(rust_tests(source)) == (["t::f"] if test else [])


def test_attributes_with_braces_inside_and_macro_made_tests_are_read():
    source = textwrap.dedent(
        """\
        #[test_case(S { a: 1 } ; "one")]
        #[test_case(S { a: 2 } ; "two")]
        fn cases(s: S) { assert!(s.a > 0) }

        macro_rules! check {
            ($name:ident) => {
                #[test]
                fn $name() { assert!(true) }
            };
        }

        proptest! {
            #[test]
            fn prop(x in 0..10u32) { prop_assert!(x < 10) }
        }
        """
    )
    assert list(rust_tests(source)) == ["cases", "$name", "prop"]
    assert rust_tests(source)["cases"].startswith('# [ test_case ( S { a : 1 } ; "one" ) ]')


def test_a_second_test_of_the_same_path_is_numbered():
    source = "#[cfg(a)]\n#[test]\nfn t() { one() }\n#[cfg(b)]\n#[test]\nfn t() { two() }\n"
    found = rust_tests(source)
    assert list(found) == ["t", "t#2"] and found["t#2"].endswith("two ( ) }")


def test_the_lexer_tells_chars_from_lifetimes_and_skips_what_hides_braces():
    source = "fn f<'a>(x: &'a u8) { let c = '{'; let e = '\\''; let s = r##\"}\"#\"##; /* { /* } */ */ }"
    texts = [token.text for token in tokens(source)]
    assert "'a" in texts and "'{'" in texts and "'\\''" in texts and 'r##"}"#"##' in texts
    assert texts.count("{") == 1 and texts.count("}") == 1


@pytest.mark.parametrize(
    "source",
    [
        "",
        "}}}}",
        "#",
        "#!",
        "#[",
        "#[test",
        "#[test]",
        "#[test] fn",
        "#[test] fn f",
        "#[test] fn f() {",
        '#[test] fn f() { let s = "unterminated',
        '#[test] fn f() { let s = r###"raw',
        "#[test] fn f() { /* /* never closed */",
        "#[test] fn f() { '",
        '#[test] fn f() { "\\',
        "mod m { mod n { #[test] fn f() { ( [ ) ] } } } } } }",
        "\x00\xff\ufffd#[test]\x00fn \ufffd() {\x00}",
    ],
)
def test_odd_input_never_raises(source: str):
    found = rust_tests(source)
    assert isinstance(found, dict)


def test_a_test_whose_braces_never_close_runs_to_the_end_of_the_file():
    found = rust_tests("mod tests {\n    #[test]\n    fn open() {\n        assert!(x);\n")
    assert found == {"tests::open": "# [ test ] fn open ( ) { assert ! ( x ) ;"}


def test_random_junk_never_raises():
    alphabet = list("{}[]()#!;:'\"\\/*rbc $_\n\t") + ["fn ", "mod ", "test", "r#", "//", "/*", "*/", "#[test]"]
    generator = random.Random(37)
    for _ in range(500):
        rust_tests("".join(generator.choice(alphabet) for _ in range(generator.randrange(200))))
    rust_tests(bytes(generator.randrange(256) for _ in range(20_000)).decode("utf-8", "replace"))


@pytest.mark.parametrize(
    "unit",
    ["{", "}", "#[test] fn f() {", "#[test]", "/*", "'", '"', "r#", "mod m {", "#[test] fn f() {} ", "(", "a "],
)
def test_the_time_is_linear_in_the_length(unit: str):
    def seconds(repeats: int) -> float:  # CPU seconds, the best of two: others' load is not counted
        return min(_cpu_time(lambda: rust_tests(unit * repeats)) for _ in range(2))

    # Four times the text: about four times the time (quadratic: sixteen, and minutes at 20,000).
    # Measured against itself, not a clock's limit, so a slow machine does not fail it.
    assert seconds(20_000) < 8 * seconds(5_000) + 1.0


def _cpu_time(work) -> float:
    started = time.process_time()
    work()
    return time.process_time() - started


def _lap(tmp_path: Path, old_lib: str, new_lib: str | bytes | None) -> guard.GuardReport:
    """The guard's report on a lap that turns src/lib.rs from `old_lib` into `new_lib` (None: deletes it)."""
    repo = make_repo(tmp_path / "repo", {"TODO.md": "- [ ] x\n"})
    target = repo / "src" / "lib.rs"
    target.parent.mkdir()
    target.write_text(old_lib)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "green")
    green = git(repo, "rev-parse", "HEAD")
    if new_lib is None:
        target.unlink()
    else:
        target.write_bytes(new_lib if isinstance(new_lib, bytes) else new_lib.encode())
    git(repo, "commit", "-qam", "lap")
    commit = git(repo, "rev-parse", "HEAD")
    changes = ralph_git.changes(repo, green, commit)
    return guard.check_lap(repo, green, commit, changes, DEFAULT_PROTECT, "TODO.md", "PROGRESS.md", green)


@pytest.mark.parametrize(
    "new, protected",
    [
        (LIB.replace("assert_eq!(sub(5, 3), 2);", "assert!(true);"), True),
        (LIB.replace("    #[test]\n    fn subs", "    #[test]\n    #[ignore]\n    fn subs"), True),
        (LIB.replace("    fn subs() {", "    fn subs() {\n        return;"), True),
        (LIB.replace("    #[test]\n    fn strings", "    #[allow(dead_code)]\n    fn strings"), True),
        (None, True),  # deleted: its tests vanish
        (LIB.replace("a - b", "b - a"), False),  # the code is the lap's to change
        (
            LIB.replace("    mod nested {", "    #[test]\n    fn more() { assert!(sub(1, 1) == 0) }\n    mod nested {"),
            False,
        ),
        (LIB.replace("    ", "  "), False),
        (LIB.replace("a - b", "a - b // \ufffd"), False),  # a real U+FFFD beside the code: no test changed
    ],
)
def test_a_lap_may_change_the_code_and_add_tests_but_not_change_a_test(
    tmp_path: Path, new: str | None, protected: bool
):
    report = _lap(tmp_path, LIB, new)
    assert report.protected_touched == (["src/lib.rs"] if protected else [])


# Each lap's edits of src/lib.rs and the items it ticks, by RALPH_LAP.
AGENT = r"""
import json, os, pathlib, sys
lap = json.loads(pathlib.Path(sys.argv[1]).read_text())[os.environ["RALPH_LAP"]]
lib = pathlib.Path("src/lib.rs")
for old, new in lap["edits"]:
    assert old in lib.read_text(), old
    lib.write_text(lib.read_text().replace(old, new, 1))
todo = pathlib.Path("TODO.md")
for item in lap["ticks"]:
    todo.write_text(todo.read_text().replace(f"- [ ] {item}", f"- [x] {item}"))
"""

SUBS = "        assert_eq!(super::sub(5, 3), 2);"
FIX = ["    0\n", "    _a - _b\n"]
NEW_TEST = [
    "    #[test]\n    fn subs() {",
    "    #[test]\n    fn subs_to_zero() {\n        assert_eq!(super::sub(3, 3), 0);\n    }\n\n    #[test]\n    fn subs() {",
]
GRANT = "Rewrite the subs test in src/lib.rs (may change: src/lib.rs)"
STEPS = {  # a weakened test without a grant is red: test_a_lap_may_change_the_code_and_add_tests_but_not_change_a_test
    "1": {"edits": [FIX, NEW_TEST], "ticks": ["Make sub subtract"]},  # fixed, a test added: green
    "2": {"edits": [[SUBS, "        assert_eq!(super::sub(7, 3), 4);"]], "ticks": [GRANT]},  # granted: green
}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed (.ci/run installs it)")
def test_a_rust_unit_test_a_users_item_grants_may_be_rewritten(tmp_path: Path):
    agent = python_agent(tmp_path / "agent" / "agent.py", AGENT)
    (tmp_path / "agent" / "steps.json").write_text(json.dumps(STEPS))
    agent["command"] += f" {tmp_path / 'agent' / 'steps.json'}"
    config = {
        "goal": "Make sub subtract",
        "agent": agent,
        "checks": ["cargo test --no-fail-fast"],  # `protect` left out: the default protects Rust's tests
        "limits": {"max_laps": 2, "stagnation": 10, "check_timeout": 300},
    }
    repo = make_repo(tmp_path / "repo", RUST.files, config=config, todo=["Make sub subtract", GRANT])
    result = ralph(repo, "run", "--name", "r", env=_rust_env(), timeout=600)
    notes = lap_notes(repo, "r")
    reasons = [note["reason"] for note in notes]
    assert [note["status"] for note in notes] == ["green", "green"], (reasons, result.stdout + result.stderr)
    assert notes[1]["granted"] == ["src/lib.rs"], notes[1]
    assert result.returncode == 0, result.stdout + result.stderr
    lib = git(repo, "show", "ralph/r:src/lib.rs")
    assert "fn subs_to_zero()" in lib and "sub(7, 3), 4" in lib
