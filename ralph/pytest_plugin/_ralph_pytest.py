"""ralph's pytest plugin: what a pytest session ran and how it was set up, as JSON lines.

Loaded by `-p _ralph_pytest` (ralph adds it to PYTEST_ADDOPTS and this folder to PYTHONPATH)
into whatever Python runs the check, so it is written for old Pythons and pytests too: the
standard library only, nothing from ralph. It appends to the file named by RALPH_PYTEST_REPORT,
one write a line, so the processes of a pytest-xdist session can share it; ralph folds lines
that say the same thing twice.

Lines: {"test": node id, "when": phase, "outcome": ..., "xfail": bool}, {"collect_error": id},
{"deselected": id}, and at the session's end {"setup": {...}}: the configuration file and its
values, and every plugin registered (conftests, `pytest_plugins`, installed ones) with digests
of its code and of the hooks it implements.
"""

import hashlib
import json
import os
import sys

_cwd = os.getcwd()


def _write(line):
    path = os.environ.get("RALPH_PYTEST_REPORT")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(line, sort_keys=True) + "\n").encode("utf-8", "replace"))
    finally:
        os.close(fd)


def pytest_runtest_logreport(report):
    _write({"test": report.nodeid, "when": report.when, "outcome": report.outcome,
            "xfail": hasattr(report, "wasxfail")})


def pytest_collectreport(report):
    if report.failed:
        _write({"collect_error": report.nodeid})


def pytest_deselected(items):
    for item in items:
        _write({"deselected": item.nodeid})


def pytest_sessionfinish(session):
    config = session.config
    inipath = getattr(config, "inipath", None) or getattr(config, "inifile", None)
    values = {}
    for key, value in dict(getattr(config, "inicfg", {}) or {}).items():
        values[str(key)] = str(getattr(value, "value", value))
    plugins = {}
    for name, plugin in config.pluginmanager.list_name_plugin():
        if plugin is None:
            plugins["blocked: " + name] = []
            continue
        identity = _identity(plugin)
        if identity == _identity(sys.modules[__name__]):
            continue
        hooks = sorted(caller.name for caller in config.pluginmanager.get_hookcallers(plugin) or [])
        digest = hashlib.sha256((_code_digest(plugin) + " ".join(hooks)).encode()).hexdigest()[:16]
        plugins[identity] = sorted(set(plugins.get(identity, [])) | {digest})
    _write({"setup": {"config": _shown(str(inipath)) if inipath else None, "values": values,
                      "plugins": plugins}})


def _identity(plugin):
    """A module in the checked tree by its path, any other by its name, anything else by its
    class (names such as `id(object)` change from run to run); pytest's own parts are one."""
    path = getattr(plugin, "__file__", None)
    if path and not _shown(os.path.abspath(path)).startswith(os.sep):
        return _shown(os.path.abspath(path))
    kind = plugin if isinstance(plugin, type) or path else type(plugin)
    name = str(getattr(kind, "__module__", None) or getattr(kind, "__name__", "?"))
    if name.split(".")[0] in ("_pytest", "pytest"):
        return "pytest"
    return name if path else "{}.{}".format(name, getattr(kind, "__qualname__", "?"))


def _code_digest(plugin):
    path = getattr(plugin, "__file__", None)
    if path and os.path.isfile(path):
        with open(path, "rb") as code:
            return hashlib.sha256(code.read()).hexdigest()
    return ""


def _shown(path):
    inside = os.path.relpath(path, _cwd)
    return path if inside.startswith(os.pardir) else inside.replace(os.sep, "/")
