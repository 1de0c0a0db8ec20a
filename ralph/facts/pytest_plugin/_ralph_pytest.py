"""ralph's pytest plugin: what a pytest session ran and how it was set up, as JSON lines.

Loaded by `-p _ralph_pytest` (ralph adds it to PYTEST_ADDOPTS and this folder to PYTHONPATH)
into whatever Python runs the check, so it is written for old Pythons and pytests too: the
standard library only, nothing from ralph. It appends to the file named by RALPH_PYTEST_REPORT,
one write a line, so the processes of a pytest-xdist session can share it.

Every line names its session (process id and depth). A test's line is a JSON array, written when
its teardown is reported: [session, node id, setup, call, teardown, xfail], each phase's outcome
(null for a phase it never reported) and whether pytest said it was expected to fail. One line a
test, not one a phase, so that reading a session of 100,000 tests takes a fraction of a second;
still written as each test ends, so a session that is killed leaves every test it finished (a
phase reported twice, as a rerun plugin does, ends the line early: each line has one outcome a
phase). Every other line is an object: {"session", "parent", "worker"} first; {"collect_error":
id}; {"collect_skip": id} for a module whose collection was skipped (`pytest.skip(...,
allow_module_level=True)`, a module-level `pytest.importorskip`); {"collected": [ids]}, every test
it means to run; {"deselected": [ids]}; and at the session's end (after the lines of tests it left
unfinished: `pytest.exit`, an interrupt) {"setup": {...}}:
the configuration file and its values, every plugin ever registered with a digest of its hook
functions' code (conftests, `pytest_plugins`, installed ones; a plugin that unregisters itself
is still counted), the modules of the tree that were imported in front of another module of the
same name, and modules imported from the user's own work tree (RALPH_PYTEST_USER_TREE).

This plugin never fails a session: each hook's body is guarded, and a failure in it becomes a
line {"plugin_error": "<hook>: <exception type>: <first line of its message>"} (once a
process), so ralph can tell its own plugin's failure from the tests' outcomes. It uses no API
that pytest 7.4 to 9.x deprecate, so it warns of nothing, even under `filterwarnings = error`.
"""

import contextlib
import hashlib
import importlib.machinery
import json
import os
import sys

_cwd = os.getcwd()
# The running sessions of this process, innermost last (pytester runs one inside another).
_sessions = []  # type: list[str]
# id(plugin manager) -> {plugin identity -> set of digests}, from every registration.
_seen = {}  # type: dict[int, dict[str, set[str]]]
# Every plugin_error this process wrote (or tried to).
_failures = set()  # type: set[str]
# (session, node id) -> [setup, call, teardown, xfail]: the phases of a test not yet written.
_unfinished = {}  # type: dict[tuple[str, str], list]
_PHASES = {"setup": 0, "call": 1, "teardown": 2}  # a phase pytest never names goes with setup: judged alike


def _session():
    return _sessions[-1] if _sessions else str(os.getpid())


def _write(line):
    line["session"] = _session()
    _append(json.dumps(line, sort_keys=True))


def _append(text):
    """One write a line, appended: the processes of an xdist session share the file."""
    path = os.environ.get("RALPH_PYTEST_REPORT")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (text + "\n").encode("utf-8", "replace"))
    finally:
        os.close(fd)


@contextlib.contextmanager
def _guarded(hook):
    """Whatever fails in the body stays here: pytest goes on as if ralph were not there, and the
    report says so, so that ralph does not read the gaps as results."""
    try:
        yield
    except Exception as error:  # not KeyboardInterrupt or SystemExit: those are the user's to raise
        try:
            lines = str(error).splitlines()
            text = "{}: {}: {}".format(hook, type(error).__name__, lines[0] if lines else "")
            if text not in _failures:  # a hook that fails for every test says so once
                _failures.add(text)
                _write({"plugin_error": text})
        except Exception:  # the report cannot be written either: nothing is left to tell
            pass


def pytest_configure(config):
    with _guarded("pytest_configure"):
        _sessions.append("{}.{}".format(os.getpid(), len(_sessions)))
        _write({"parent": "{}.0".format(os.getppid()), "worker": hasattr(config, "workerinput")})


def pytest_unconfigure(config):
    with _guarded("pytest_unconfigure"):
        if _sessions:
            _sessions.pop()


def pytest_plugin_registered(plugin, manager):
    """Historic: pytest replays every registration made before this plugin came."""
    with _guarded("pytest_plugin_registered"):
        _record(plugin, manager)


def _record(plugin, manager):
    if plugin is not sys.modules[__name__]:
        _seen.setdefault(id(manager), {}).setdefault(_identity(plugin), set()).add(_digest(plugin, manager))


def pytest_runtest_logreport(report):
    with _guarded("pytest_runtest_logreport"):
        key, phase = (_session(), report.nodeid), _PHASES.get(report.when, 0)
        if key in _unfinished and _unfinished[key][phase] is not None:  # reported again: a rerun
            _finish(key)
        line = _unfinished.setdefault(key, [None, None, None, False])
        line[phase] = report.outcome
        line[3] = line[3] or hasattr(report, "wasxfail")
        if report.when == "teardown":
            _finish(key)


def _finish(key):
    """The test's line, written once: [session, node id, setup, call, teardown, xfail]."""
    _append(json.dumps([key[0], key[1]] + _unfinished.pop(key)))


def pytest_collectreport(report):
    with _guarded("pytest_collectreport"):
        if report.failed:
            _write({"collect_error": report.nodeid})
        elif report.skipped:  # its tests were never collected, so no test line tells of them
            _write({"collect_skip": report.nodeid})


def pytest_collection_finish(session):
    """Every test the session means to run: one that never reports (the code under test ended
    the session early, with `pytest.exit` or an interrupt) ran no verdict."""
    with _guarded("pytest_collection_finish"):
        if getattr(session.config.option, "collectonly", False):
            return  # --collect-only: it means to run none
        _write({"collected": [item.nodeid for item in session.items]})


def pytest_deselected(items):
    with _guarded("pytest_deselected"):
        _write({"deselected": [item.nodeid for item in items]})


def pytest_sessionfinish(session):
    with _guarded("pytest_sessionfinish"):  # the tests the session left unfinished first: it ends after them
        for key in [key for key in _unfinished if key[0] == _session()]:
            _finish(key)
    with _guarded("pytest_sessionfinish"):
        config = session.config
        seen = _seen.setdefault(id(config.pluginmanager), {})
        for name, plugin in config.pluginmanager.list_name_plugin():
            if plugin is None:
                seen.setdefault("blocked: " + name, set()).add("")
            else:
                _record(plugin, config.pluginmanager)
        inipath = getattr(config, "inipath", None)  # pytest 6.1+; `inifile` is its py.path legacy
        _write(
            {
                "setup": {
                    "config": _shown(str(inipath)) if inipath else None,
                    "values": _config_values(config),
                    "plugins": dict((name, sorted(found)) for name, found in seen.items()),
                    "shadowing": _shadowing(),
                    "user_tree": _user_tree(),
                }
            }
        )


def _config_values(config):
    """The configuration file's keys, each with a digest of its value, not the value: the notes
    that keep them may travel further than the file did. pytest has no public way to list them
    (`config.getini()`, which its deprecation of `config.inicfg` points to, reads one key that a
    plugin registered): up to 9.0.1 they are the instance's own `inicfg` (wrapped in ConfigValue
    in 9.0), from 9.0.2 its `_inicfg`, `inicfg` being a property that warns from 9.1 on. Read
    from the instance's attributes, so that no such property ever runs."""
    attributes = vars(config)
    found = attributes["_inicfg"] if "_inicfg" in attributes else attributes.get("inicfg")
    values = {}
    for key, value in dict(found or {}).items():
        text = str(getattr(value, "value", value)).encode("utf-8", "replace")
        values[str(key)] = hashlib.sha256(text).hexdigest()[:16]
    return values


def _identity(plugin):
    """A file of the checked tree by its path; any other module as `module <name>`, anything
    else as `object <class>` (names such as `id(object)` change from run to run); pytest's
    own parts are one. A plugin can lie about these names: its digest, of its code, is what
    it cannot fake, and only a real file of the tree can be granted by a TODO item."""
    path = getattr(plugin, "__file__", None)
    if isinstance(path, str) and os.path.isfile(path) and not _shown(os.path.abspath(path)).startswith(os.sep):
        return _shown(os.path.abspath(path))
    kind = plugin if isinstance(plugin, type) or path else type(plugin)
    name = str(getattr(kind, "__module__", None) or getattr(kind, "__name__", "?"))
    if name.split(".")[0] in ("_pytest", "pytest"):
        return "pytest"
    return "module " + name if path else "object {}.{}".format(name, getattr(kind, "__qualname__", "?"))


def _digest(plugin, manager):
    """The code of every hook function the plugin implements, as compiled, and of its module's
    file when it has one (the helpers its hooks call)."""
    parts = []
    for caller in manager.get_hookcallers(plugin) or []:
        for hookimpl in caller.get_hookimpls():
            if hookimpl.plugin is plugin:
                parts.append(caller.name + ":" + _code(getattr(hookimpl.function, "__code__", None)))
    path = getattr(plugin, "__file__", None)
    if isinstance(path, str) and os.path.isfile(path):
        with open(path, "rb") as source:
            parts.append(hashlib.sha256(source.read()).hexdigest())
    return hashlib.sha256("\0".join(sorted(parts)).encode("utf-8", "replace")).hexdigest()[:16]


def _code(code):
    """A code object as text that is the same in every process (marshal's bytes are not: they
    depend on reference counts), nested functions and classes included."""
    if code is None:
        return "?"
    consts = []
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            consts.append(_code(const))
        elif isinstance(const, frozenset):
            consts.append(repr(sorted(map(repr, const))))
        else:
            consts.append(repr(const))
    return "{}|{}|{}|{}".format(
        code.co_code.hex(), ",".join(code.co_names), ",".join(code.co_varnames), "|".join(consts)
    )


def _shadowing():
    """Top-level modules imported, that the path resolves into the tree while another module of
    that name is on it too: {name: "where it resolves over what it hides"}. Resolved afresh by
    the import system's own path search, not read from the modules, which can say anything."""
    found = {}
    path = [entry for entry in sys.path if isinstance(entry, str)]  # a test may put anything there
    for name in [name for name in list(sys.modules) if "." not in name]:
        origin = _origin(name, path)
        if origin is None or _shown(origin).startswith(os.sep):
            continue
        folder = os.path.dirname(origin)
        if os.path.basename(origin).startswith("__init__."):
            folder = os.path.dirname(folder)
        hidden = _origin(name, [entry for entry in path if os.path.abspath(entry or ".") != folder])
        if hidden is not None:
            found[name] = "{} over {}".format(_shown(origin), _shown(hidden))
    return found


def _user_tree():
    """Files of imported modules under RALPH_PYTEST_USER_TREE (the user's own checkout, not the
    lap's tree): what an editable install or an absolute path in a config brings in."""
    top = os.environ.get("RALPH_PYTEST_USER_TREE", "").rstrip(os.sep)
    found = set()
    for module in list(sys.modules.values()) if top else []:
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.abspath(path).startswith(top + os.sep):
            if _shown(os.path.abspath(path)).startswith(os.sep):  # not the tree pytest runs in
                found.add(os.path.abspath(path))
    return sorted(found)[:10]


def _origin(name, path):
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, path)
    except Exception:  # a broken path entry: nothing found
        return None
    return os.path.abspath(spec.origin) if spec is not None and spec.origin and os.path.exists(spec.origin) else None


def _shown(path):
    inside = os.path.relpath(path, _cwd)
    return path if inside.startswith(os.pardir) else inside.replace(os.sep, "/")
