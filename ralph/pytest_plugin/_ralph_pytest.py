"""ralph's pytest plugin: what a pytest session ran and how it was set up, as JSON lines.

Loaded by `-p _ralph_pytest` (ralph adds it to PYTEST_ADDOPTS and this folder to PYTHONPATH)
into whatever Python runs the check, so it is written for old Pythons and pytests too: the
standard library only, nothing from ralph. It appends to the file named by RALPH_PYTEST_REPORT,
one write a line, so the processes of a pytest-xdist session can share it.

Every line names its session (process id and depth). Lines: {"session", "parent", "worker"} first;
{"test": node id, "when": phase, "outcome", "xfail"}; {"collect_error": id}; {"deselected": id};
and at the session's end {"setup": {...}}: the configuration file and its values, every plugin
ever registered with a digest of its hook functions' code (conftests, `pytest_plugins`,
installed ones; a plugin that unregisters itself is still counted), the modules of the tree
that were imported in front of another module of the same name, and modules imported from the
user's own work tree (RALPH_PYTEST_USER_TREE).
"""

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


def _write(line):
    path = os.environ.get("RALPH_PYTEST_REPORT")
    if not path:
        return
    line["session"] = _sessions[-1] if _sessions else str(os.getpid())
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode("utf-8", "replace"))
    finally:
        os.close(fd)


def pytest_configure(config):
    _sessions.append("{}.{}".format(os.getpid(), len(_sessions)))
    _write({"parent": "{}.0".format(os.getppid()), "worker": hasattr(config, "workerinput")})


def pytest_unconfigure(config):
    if _sessions:
        _sessions.pop()


def pytest_plugin_registered(plugin, manager):
    """Historic: pytest replays every registration made before this plugin came."""
    if plugin is not sys.modules[__name__]:
        _seen.setdefault(id(manager), {}).setdefault(_identity(plugin), set()).add(_digest(plugin, manager))


def pytest_runtest_logreport(report):
    _write(
        {"test": report.nodeid, "when": report.when, "outcome": report.outcome, "xfail": hasattr(report, "wasxfail")}
    )


def pytest_collectreport(report):
    if report.failed:
        _write({"collect_error": report.nodeid})


def pytest_deselected(items):
    for item in items:
        _write({"deselected": item.nodeid})


def pytest_sessionfinish(session):
    config = session.config
    seen = _seen.setdefault(id(config.pluginmanager), {})
    for name, plugin in config.pluginmanager.list_name_plugin():
        if plugin is None:
            seen.setdefault("blocked: " + name, set()).add("")
        else:
            pytest_plugin_registered(plugin, config.pluginmanager)
    inipath = getattr(config, "inipath", None) or getattr(config, "inifile", None)
    values = {}
    for key, value in dict(getattr(config, "inicfg", {}) or {}).items():
        # A digest, not the value: the notes that keep it may travel further than the file did.
        text = str(getattr(value, "value", value)).encode("utf-8", "replace")
        values[str(key)] = hashlib.sha256(text).hexdigest()[:16]
    _write(
        {
            "setup": {
                "config": _shown(str(inipath)) if inipath else None,
                "values": values,
                "plugins": dict((name, sorted(found)) for name, found in seen.items()),
                "shadowing": _shadowing(),
                "user_tree": _user_tree(),
            }
        }
    )


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
