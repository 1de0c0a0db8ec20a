"""Per-test results read from `go test -json` and `cargo test` output: the real tools' output
kept in tests/fixtures/runners (how each was made: go_1.19_README.md, cargo_1.95_README.md),
odd input that must not crash ralph, and, marked slow, today's real go and cargo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ralph.facts.pytest_results import TestResults
from ralph.verdict import go_test, libtest

RUNNERS = Path(__file__).parent / "fixtures" / "runners"
GO_PROJECT, CARGO_PROJECT = RUNNERS / "go_1.19_project", RUNNERS / "cargo_1.95_project"
GO = shutil.which("go")
CARGO = shutil.which("cargo")
RUSTUP_HOME = os.environ.get("RUSTUP_HOME") or str(Path.home() / ".rustup")  # before the HOME fixture hides it
ODD_INPUTS = [
    "",
    "\x00\x01\xff\ufffd binary junk \x1b[31m",
    "{" * 100_000,  # nested deeper than json recurses
    "[" * 100_000 + "\n" + "x" * 5_000_000,  # a huge line
    '{"Action":"pass","Package":"example.com/demo","Test":"TestAdd"',  # cut short
    '[1, 2]\n3\n"text"\nnull\n{"Action": 7, "Package": "p"}\n{"Action": "pass", "Package": ["p"]}\n{"Test": "TestX"}',
    "bad byte \udcff here\n" + json.dumps({"Action": "pass", "Package": "example.com/\udcff", "Test": "Test\udcff"}),
    "test \udcff ... ok\n     Running \udcff (x)\nrunning 1 test\ntest \udcff ... FAILED\ntest result: ",
    "\u2028\x1c\x85\r\n" * 1000,
]


def _fixture(name: str) -> str:
    return (RUNNERS / name).read_text()


def _ids(results: TestResults | None) -> tuple[list[str], list[str]]:
    assert results is not None
    return results.passed_ids, results.failing_ids


# go test -json


def test_go_ids_name_the_file_that_declares_the_test_and_every_way_a_package_fails():
    results = go_test.read(_fixture("go_1.19_test_json.txt"), GO_PROJECT)
    passed, failing = _ids(results)
    assert "demo_test.go::TestAdd" in passed  # the module's top: no folder before the file
    assert {"pkg/mix/a_test.go::TestSub", "pkg/mix/a_test.go::TestSub/three/nested/deep"} <= set(passed)
    assert {"pkg/mix/a_test.go::TestParallel/a", "pkg/mix/b_test.go::TestSubFail/ok"} <= set(passed)
    assert failing == [
        "pkg/broken::<collection>",  # go 1.19: `FAIL <pkg> [build failed]`, a plain line
        "pkg/crash/crash_test.go::TestCrash",  # a panic in the test: go reports it failed
        "pkg/gopanic/g_test.go::TestGoPanic",  # a panic in another goroutine: it never ended
        "pkg/initpanic::<collection>",  # a panic in init: the binary failed outside any test
        "pkg/kill/k_test.go::TestKilled",  # SIGKILL: it never ended
        "pkg/mainearly::<collection>",  # TestMain's os.Exit(3) before the tests
        "pkg/mainexit/m_test.go::TestExits",
        "pkg/mix/a_test.go::TestFail",  # TestForge printed `--- PASS: TestFail`: failing wins
        "pkg/mix/a_test.go::TestForge",
        "pkg/mix/b_test.go::TestSubFail",  # the parent of a failing subtest fails too
        "pkg/mix/b_test.go::TestSubFail/bad",
        "pkg/noeol/n_test.go::TestNoEOL",  # output with no newline hid its `--- FAIL`: never ended
        "pkg/parse::<collection>",  # `[setup failed]`: a _test.go file that does not parse
        "pkg/stderr/s_test.go::TestStderrForge",
    ]
    assert not any("TestGhost" in test for test in passed)  # a forged pass of a function no file declares
    assert results is not None
    assert (results.counts.passed, results.counts.failed, results.counts.errors) == (13, 7, 4)
    assert (results.counts.skipped, results.counts.not_run) == (2, 3)  # TestSkip, TestSub/two_skipped


def test_a_skipped_subtest_is_skipped_while_its_parent_passes():
    package = "example.com/demo/pkg/mix"
    events = [
        {"Action": "run", "Package": package, "Test": "TestSub"},
        {"Action": "run", "Package": package, "Test": "TestSub/two_skipped"},
        {"Action": "skip", "Package": package, "Test": "TestSub/two_skipped"},
        {"Action": "pass", "Package": package, "Test": "TestSub"},
        {"Action": "pass", "Package": package},
    ]
    results = go_test.read("\n".join(map(json.dumps, events)), GO_PROJECT)
    assert results is not None
    assert results.passed_ids == ["pkg/mix/a_test.go::TestSub"]
    assert results.counts.skipped == 1


def test_go_1_24s_build_events_and_a_test_file_not_found():
    """The form go 1.24 documents for build failures (`FailedBuild`, `build-output`), and a test
    of a package in no module of the tree, named by its import path."""
    lines = [
        json.dumps({"ImportPath": "example.com/demo/pkg/broken [x.test]", "Action": "build-output", "Output": "x"}),
        json.dumps({"Action": "start", "Package": "example.com/demo/pkg/broken"}),
        json.dumps(
            {
                "Action": "output",
                "Package": "example.com/demo/pkg/broken",
                "Output": "FAIL\texample.com/demo/pkg/broken [build failed]\n",
            }
        ),
        json.dumps({"Action": "fail", "Package": "example.com/demo/pkg/broken", "FailedBuild": "x [x.test]"}),
        json.dumps({"Action": "pass", "Package": "golang.org/x/other", "Test": "TestElsewhere"}),
    ]
    passed, failing = _ids(go_test.read("\n".join(lines), GO_PROJECT))
    assert (passed, failing) == (["golang.org/x/other::TestElsewhere"], ["pkg/broken::<collection>"])


def test_nested_modules_are_found_and_a_forged_package_never_leads_outside_the_tree(tmp_path):
    (tmp_path / "go.mod").write_text("module example.com/top\n")
    (tmp_path / "sub" / "inner").mkdir(parents=True)
    (tmp_path / "sub" / "go.mod").write_text('module "example.com/sub"\n')
    (tmp_path / "sub" / "inner" / "x_test.go").write_text("package inner\n\nfunc TestX(t *testing.T) {}\n")
    (tmp_path.parent / "outside_test.go").write_text("func TestOut(t *testing.T) {}\n")
    lines = [
        {"Action": "pass", "Package": "example.com/sub/inner", "Test": "TestX"},
        {"Action": "fail", "Package": f"example.com/top/../../{tmp_path.parent.name}", "Test": "TestOut"},
    ]
    passed, failing = _ids(go_test.read("\n".join(map(json.dumps, lines)), tmp_path))
    assert passed == ["sub/inner/x_test.go::TestX"]
    assert failing == [f"example.com/top/../../{tmp_path.parent.name}::TestOut"]


def test_go_text_is_what_go_test_prints_for_people():
    shown = go_test.text(_fixture("go_1.19_test_json.txt"))
    assert not [line for line in shown.split("\n") if line.startswith('{"Time"')]  # TestForge's own JSON stays
    assert "--- FAIL: TestFail (0.00s)\n" in shown
    assert "FAIL\texample.com/demo/pkg/broken [build failed]\n" in shown  # go's own line, kept
    assert "pkg/broken/broken.go:3:23: cannot use" in shown
    assert go_test.text('not json\n{"Action":"output","Package":"p","Output":"x"}\n[1]') == "not json\nx[1]"


@pytest.mark.parametrize("odd", ODD_INPUTS)
def test_odd_output_never_crashes_a_reader(odd):
    for reader in (go_test, libtest):
        results = reader.read(odd, GO_PROJECT)
        assert results is None or isinstance(results, TestResults)
        for test in [*results.passed_ids, *results.failing_ids] if results else []:
            test.encode()  # every id is writable to a note
    assert isinstance(go_test.text(odd), str)


def test_no_event_and_no_summary_is_no_evidence():
    assert go_test.read("go: errors parsing go.mod:\ngo.mod:1: unknown directive: modul\n", GO_PROJECT) is None
    assert libtest.read("error: rustup could not choose a version of cargo to run\n", CARGO_PROJECT) is None


def test_the_readers_are_linear_in_the_output():
    """Lines built to make a backtracking parser quadratic: each reader takes well under the
    seconds a quadratic one would take for each."""
    package = "example.com/demo/pkg/mix"
    events = "\n".join(
        json.dumps({"Action": "pass", "Package": package, "Test": f"TestPass/{n}"}) for n in range(50_000)
    )
    glued = "     Running tests/api.rs (x)\n" + "test a - " * 300_000 + "\n" + "test x ... " * 300_000
    lines = ("test a - " * 500 + "test x ... " * 500 + " ... ignored, \n") * 500 + "test result: " + "1" * 3_000_000
    for reader, output in ((go_test, events), (libtest, glued), (libtest, "     Running x (y)\n" + lines)):
        started = time.monotonic()
        reader.read(output, GO_PROJECT)
        assert time.monotonic() - started < 10


# cargo test (libtest)


def test_cargo_ids_name_the_member_file_and_fold_doc_tests_by_item():
    results = libtest.read(_fixture("cargo_1.95_test.txt"), CARGO_PROJECT)
    passed, failing = _ids(results)
    assert passed == [
        "crates/alpha/src/lib.rs::tests::forges",
        "crates/alpha/src/lib.rs::tests::inner::nested",
        "crates/alpha/src/lib.rs::tests::panics_ok",  # ` - should panic` is how it is judged, not its name
        "crates/alpha/src/lib.rs::tests::passes",
        "crates/beta-core/src/lib.rs::(crate)",  # the crate's own docs
        "crates/beta-core/src/lib.rs::Pair<A,B>::new",  # four doc-tests, line numbers dropped
        "crates/beta-core/src/lib.rs::tests::one_is_one",
    ]
    assert failing == [
        # tests::forges printed `test tests::fails ... ok` three times (println!, eprintln! and
        # stdout().write_all, which libtest does not capture): 5 passes named, 4 counted.
        "crates/alpha/src/lib.rs::<collection>",
        "crates/alpha/src/lib.rs::add",  # one of its two doc-tests failed
        "crates/alpha/src/lib.rs::tests::fails",  # its forged pass does not hide its failure
        "crates/alpha/tests/api.rs::<collection>",  # SIGABRT before `test result:`
    ]
    assert results is not None
    assert (results.counts.skipped, results.counts.not_run) == (3, 2)  # #[ignore] twice, ```ignore


def test_single_threaded_output_with_the_tests_own_output_between_name_and_result():
    results = libtest.read(_fixture("cargo_1.95_single_thread_nocapture.txt"), CARGO_PROJECT)
    passed, failing = _ids(results)
    assert failing == ["crates/alpha/src/lib.rs::tests::fails"]
    assert len(passed) == 4 and "crates/alpha/src/lib.rs::tests::forges" in passed  # as libtest counted


def test_a_test_binary_that_dies_inside_a_test():
    passed, failing = _ids(libtest.read(_fixture("cargo_1.95_crash_single_thread.txt"), CARGO_PROJECT))
    assert (passed, failing) == (
        [],
        ["crates/alpha/tests/api.rs::<collection>", "crates/alpha/tests/api.rs::api_aborts"],
    )


def test_a_crate_that_does_not_compile():
    passed, failing = _ids(libtest.read(_fixture("cargo_1.95_compile_error.txt"), CARGO_PROJECT))
    assert (passed, failing) == ([], ["crates/broken::<collection>"])
    failing = _ids(
        libtest.read('error: could not compile `alpha` (test "api") due to 1 previous error', CARGO_PROJECT)
    )[1]
    assert failing == ["crates/alpha/tests/api.rs::<collection>"]


def _binary(*lines: str, summary: str = "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured") -> str:
    head = "     Running unittests src/lib.rs (target/debug/deps/beta_core-c944c5f0c5454fde)\n\nrunning 2 tests\n"
    return head + "\n".join(lines) + f"\n\n{summary}\n"


def test_a_failure_hidden_behind_glued_output_is_still_failing():
    base = "crates/beta-core/src/lib.rs"
    glued = _binary("test tests::a ... ok", "garbage without newlinetest tests::b ... FAILED")
    assert _ids(libtest.read(glued, CARGO_PROJECT)) == ([f"{base}::tests::a"], [f"{base}::tests::b"])
    listed = _binary("test tests::a ... ok", "test tests::b ... ok", "failures:", "    tests::b")
    assert _ids(libtest.read(listed, CARGO_PROJECT))[1] == [f"{base}::<collection>", f"{base}::tests::b"]
    unnamed = _binary("test tests::a ... ok", "junk test tests::b ... FAI", "LED")
    assert _ids(libtest.read(unnamed, CARGO_PROJECT))[1] == [f"{base}::<collection>"]


def test_a_forged_pass_of_a_test_that_did_not_run_fails_the_binary():
    base = "crates/beta-core/src/lib.rs"
    forged = _binary(
        "test tests::a ... ok", "test tests::deleted ... ok", summary="test result: ok. 1 passed; 0 failed"
    )
    passed, failing = _ids(libtest.read(forged, CARGO_PROJECT))
    assert failing == [f"{base}::<collection>"]


def test_older_cargo_and_colours():
    old = "     Running target/debug/deps/alpha-f61697eead3e4da0\n\nrunning 1 test\ntest tests::x ... ok\n"
    old += "\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
    assert _ids(libtest.read(old, CARGO_PROJECT)) == (["crates/alpha::tests::x"], [])
    coloured = old.replace("Running", "\x1b[1m\x1b[92mRunning\x1b[0m").replace("... ok", "... \x1b[32mok\x1b[0m")
    assert _ids(libtest.read(coloured, CARGO_PROJECT)) == (["crates/alpha::tests::x"], [])


def test_doc_test_paths_relative_to_the_package_as_older_cargo_printed_them():
    doc = "   Doc-tests beta_core\n\nrunning 1 test\ntest src/lib.rs - Pair<A,B>::new (line 21) ... ok\n"
    doc += "\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n"
    assert _ids(libtest.read(doc, CARGO_PROJECT)) == (["crates/beta-core/src/lib.rs::Pair<A,B>::new"], [])


# today's real tools


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return done.stdout.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.skipif(GO is None, reason="go is not installed: no real `go test -json` output to read")
def test_todays_go_test_json(tmp_path):
    env = dict(os.environ, GOPATH=str(tmp_path / "gopath"), GOCACHE=str(tmp_path / "gocache"), GOFLAGS="-mod=mod")
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "go.mod").write_text("module example.com/p\n\ngo 1.19\n")
    (project / "p.go").write_text("package p\n\nfunc One() int { return 1 }\n")
    tests = {
        "TestPass": "if One() != 1 { t.Fatal() }",
        "TestFail": 't.Error("no")',
        "TestTable": 't.Run("a", func(t *testing.T) {}); t.Run("b", func(t *testing.T) { t.Skip() })',
    }
    body = "".join(f"func {name}(t *testing.T) {{ {code} }}\n\n" for name, code in tests.items())
    (project / "p_test.go").write_text(f'package p\n\nimport "testing"\n\n{body}')
    crash = (
        'package sub\n\nimport "testing"\n\nfunc TestCrash(t *testing.T) { go func() { panic("x") }(); select {} }\n'
    )
    (project / "sub" / "sub_test.go").write_text(crash)
    assert GO is not None
    passed, failing = _ids(go_test.read(_run([GO, "test", "-json", "./..."], project, env), project))
    assert passed == ["p_test.go::TestPass", "p_test.go::TestTable", "p_test.go::TestTable/a"]
    assert failing == ["p_test.go::TestFail", "sub/sub_test.go::TestCrash"]
    (project / "p_test.go").write_text(
        f'package p\n\nimport "testing"\n\nfunc TestTable(t *testing.T) {{ {tests["TestTable"]} }}\n'
    )
    (project / "sub" / "broken.go").write_text('package sub\n\nvar X int = "s"\n')
    results = go_test.read(_run([GO, "test", "-json", "./..."], project, env), project)
    assert _ids(results) == (["p_test.go::TestTable", "p_test.go::TestTable/a"], ["sub::<collection>"])
    assert results is not None and results.counts.skipped == 1


@pytest.mark.slow
@pytest.mark.skipif(CARGO is None, reason="cargo is not installed: no real `cargo test` output to read")
def test_todays_cargo_test(tmp_path):
    env = dict(os.environ, RUSTUP_HOME=RUSTUP_HOME, CARGO_HOME=str(tmp_path / "cargo"))
    env["CARGO_TARGET_DIR"] = str(tmp_path / "target")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "Cargo.toml").write_text('[package]\nname = "demo-crate"\nversion = "0.1.0"\nedition = "2021"\n')
    units = {"passes": "", "fails": "assert!(false);", "skipped": ""}
    body = "".join(
        f"    #[test]{' #[ignore]' if name == 'skipped' else ''}\n    fn {name}() {{ {code} }}\n"
        for name, code in units.items()
    )
    (project / "src" / "lib.rs").write_text(
        f"/// ```\n/// assert!(true);\n/// ```\npub fn f() {{}}\n\n#[cfg(test)]\nmod tests {{\n{body}}}\n"
    )
    (project / "tests" / "crash.rs").write_text("#[test]\nfn dies() { std::process::abort() }\n")
    command = [str(CARGO), "test", "--offline", "--no-fail-fast"]
    results = libtest.read(_run(command, project, env), project)
    assert _ids(results) == (
        ["src/lib.rs::f", "src/lib.rs::tests::passes"],
        ["src/lib.rs::tests::fails", "tests/crash.rs::<collection>"],
    )
    assert results is not None and (results.counts.skipped, results.counts.not_run) == (1, 1)
    (project / "src" / "lib.rs").write_text("#[cfg(test)]\nmod tests {\n    #[test]\n    fn passes() {}\n}\n")
    assert _ids(libtest.read(_run(command, project, env), project))[0] == ["src/lib.rs::tests::passes"]
    (project / "src" / "lib.rs").write_text('pub fn f() -> u8 { "s" }\n')
    assert _ids(libtest.read(_run(command, project, env), project)) == ([], [".::<collection>"])
