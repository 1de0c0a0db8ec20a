"""The bench's jobs: what each is cut from (a package's sdist at a pinned version and hash),
how, and what scores it. The jobs themselves are built at bench time (build.py); nothing of the
packages is kept in this repository."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ralph.bench.sdists import Sdist
from ralph.errors import RalphError

Kind = Literal["rebuild", "migrate", "types", "rename"]
KINDS: dict[Kind, str] = {
    "rebuild": "rebuild a module whose function bodies raise NotImplementedError",
    "migrate": "migrate unittest TestCase classes to plain pytest functions",
    "types": "add the type hints `mypy --strict` needs to a module",
    "rename": "rename a deprecated name across the package, every caller updated",
}

ITSDANGEROUS = Sdist("itsdangerous", "2.2.0", "e0050c0b7da1eea53ffaf149c0cfbb5c6e2e2b69c4bef22c81fa6eb73e5f6173")
ISODATE = Sdist("isodate", "0.7.2", "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6")
XMLTODICT = Sdist("xmltodict", "0.13.0", "341595a488e3e01a85a9d8911d8912fd922ede5fecc4dce437eb4b6c8d037e56")

ITSDANGEROUS_TESTS = (
    "tests/test_itsdangerous/test_encoding.py",
    "tests/test_itsdangerous/test_signer.py",
    "tests/test_itsdangerous/test_serializer.py",
)


@dataclass(frozen=True)
class Job:
    name: str
    kind: Kind
    sdist: Sdist
    tests: tuple[str, ...]  # the package's tests that score the job (pytest paths in the sdist)
    target: str  # rebuild, types: the module; migrate: the tests' folder; rename: the source folder
    # rebuild, types: the units of each item; migrate: each item's file; rename: the module defining the name
    groups: tuple[tuple[str, ...], ...] = ()
    pythonpath: str = "."  # where the package imports from (a src layout: "src")
    names: tuple[str, str] = ("", "")  # rename: the deprecated name, the name it becomes

    @property
    def package(self) -> str:
        return f"{self.sdist.name} {self.sdist.version}"


JOBS = (
    Job(
        "itsdangerous-encoding",
        "rebuild",
        ITSDANGEROUS,
        ("tests/test_itsdangerous/test_encoding.py",),
        "src/itsdangerous/encoding.py",
        (("want_bytes",), ("base64_encode", "base64_decode"), ("int_to_bytes", "bytes_to_int")),
        pythonpath="src",
    ),
    Job(
        "isodate-duration",
        "rebuild",
        ISODATE,
        ("tests/test_duration.py",),
        "src/isodate/duration.py",
        (
            ("fquotmod", "max_days_in_month"),
            ("Duration.__init__", "Duration.__getstate__", "Duration.__setstate__", "Duration.__getattr__"),
            ("Duration.__str__", "Duration.__repr__", "Duration.__hash__"),
            ("Duration.__neg__", "Duration.__add__", "Duration.__mul__", "Duration.__sub__", "Duration.__rsub__"),
            ("Duration.__eq__", "Duration.__ne__", "Duration.totimedelta"),
        ),
        pythonpath="src",
    ),
    Job(
        "xmltodict-core",
        "rebuild",
        XMLTODICT,
        ("tests",),
        "xmltodict.py",
        (
            (
                "_DictSAXHandler.__init__",
                "_DictSAXHandler._build_name",
                "_DictSAXHandler._attrs_to_dict",
                "_DictSAXHandler.startNamespaceDecl",
            ),
            (
                "_DictSAXHandler.startElement",
                "_DictSAXHandler.endElement",
                "_DictSAXHandler.characters",
                "_DictSAXHandler.comments",
                "_DictSAXHandler.push_data",
                "_DictSAXHandler._should_force_list",
            ),
            ("parse",),
            ("_process_namespace", "_emit", "unparse"),
        ),
    ),
    Job(
        "xmltodict-pytest",
        "migrate",
        XMLTODICT,
        ("tests",),
        "tests",
        (("tests/test_dicttoxml.py",), ("tests/test_xmltodict.py",)),
    ),
    Job(
        "itsdangerous-signer-types",
        "types",
        ITSDANGEROUS,
        ("tests/test_itsdangerous/test_signer.py",),
        "src/itsdangerous/signer.py",
        (("SigningAlgorithm", "NoneAlgorithm", "HMACAlgorithm"), ("_lazy_sha1", "_make_keys_list"), ("Signer",)),
        pythonpath="src",
    ),
    Job(
        "itsdangerous-want-bytes",
        "rename",
        ITSDANGEROUS,
        ITSDANGEROUS_TESTS,
        "src/itsdangerous",
        (("src/itsdangerous/encoding.py",),),  # where the name is defined
        pythonpath="src",
        names=("force_bytes", "want_bytes"),
    ),
)


def chosen(names: str | None) -> list[Job]:
    """The jobs `--jobs a,b` names (all of them when None), in the catalogue's order."""
    if names is None:
        return list(JOBS)
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    if not wanted:
        raise RalphError("bench: --jobs names no job — `ralph bench --list` names them")
    known = {job.name for job in JOBS}
    if unknown := [name for name in wanted if name not in known]:
        raise RalphError(f"bench: no job {', '.join(unknown)} — `ralph bench --list` names them")
    return [job for job in JOBS if job.name in wanted]
