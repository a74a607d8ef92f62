"""The layout by concern (STYLE.md "Layout"): rooms import one way, no import circles, the
plugin never imports its simulator, modules stay small, and the public API did not move."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import py_compile
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points, version
from pathlib import Path

import pytest

import ecpa

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ecpa", "dla_plugin")

# The order of the rooms: a module may import its own room and rooms before it, never after.
# ``ecpa.errors``, ``ecpa._files`` and ``ecpa._text`` sit at the top and are open to every room.
RANK: dict[str, float] = {
    "ecpa.errors": 0,
    "ecpa._files": 0,
    "ecpa._text": 0,
    "ecpa.profile.json": 0.8,  # strict JSON and JCS: below the shapes that bound integers
    "ecpa.shapes": 0.9,  # frozen records and their checks, which the profile's models use
    "ecpa.profile": 1,
    "ecpa.hsm": 1.5,  # keys held by a token over PKCS#11; secrets that unlock a key
    # The runtime room by role: documents and names, the pure judgement, the stores shared
    # across hosts, the local edge; its facade (``ecpa.runtime``) above them all.
    "ecpa.runtime.model": 2.1,
    "ecpa.runtime.judge": 2.2,
    "ecpa.runtime.stores": 2.3,
    "ecpa.runtime.host": 2.4,
    "ecpa.runtime": 2.5,
    "ecpa.observer": 3,
    "ecpa.launcher": 3,
    "ecpa.verify_jobs": 3,  # verify over many inputs, in one process or N
    "ecpa.corpus": 4,
    "ecpa._schemas": 5,
    "ecpa.serve": 5.2,  # the HTTP service over the runtime's verdicts (the serve extra)
    "ecpa.dev": 5.4,  # developers' tooling beside ``ecpa dev``: the throw-away PostgreSQL
    "ecpa.demo": 5.5,  # everything below the command line, never the command line
    "ecpa.cli": 6,
    "ecpa.__main__": 7,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


MODULES = all_modules()


def imports_of(name: str, path: Path) -> set[str]:
    """Every project module ``name`` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from ecpa.profile import jws`` imports the submodule ecpa.profile.jws; a name
            # that is no submodule is taken from the package (or module) ``base`` itself.
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in MODULES else base)
    return {t for t in targets if t in MODULES and t != name}


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}


def room(name: str) -> str | None:
    for prefix in sorted(RANK, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    return None


def test_the_graph_was_read() -> None:
    # Guards the test itself: a broken scanner would find no edges and pass everything.
    assert "ecpa.profile.verify" in GRAPH
    assert "ecpa.profile.jws" in GRAPH["ecpa.profile.verify"]
    assert "ecpa.runtime.judge.records" in GRAPH["ecpa.runtime.judge.derive"]
    assert len(MODULES) > 60


def test_no_import_circles() -> None:
    # Tarjan's strongly connected components over project modules (lazy imports included).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in GRAPH[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert cycles == []


def test_rooms_import_one_way() -> None:
    wrong = []
    for name, targets in GRAPH.items():
        mine = room(name)
        if mine is None or name == "ecpa":  # the facade re-exports from every room
            continue
        for target in targets:
            theirs = room(target)
            if target == "ecpa":  # the public facade: for the command line only
                if RANK[mine] < RANK["ecpa.cli"]:
                    wrong.append(f"{name} -> ecpa (the facade)")
            elif theirs is None:
                wrong.append(f"{name} -> {target} (outside the rooms)")
            elif RANK[theirs] > RANK[mine]:
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_plugin_modules_never_import_the_simulator_or_ecpa() -> None:
    plugin = [n for n in GRAPH if n.startswith("dla_plugin") and not n.startswith("dla_plugin.sim")]
    assert "dla_plugin.selector" in plugin
    wrong = {
        f"{n} -> {t}"
        for n in plugin
        if n != "dla_plugin.drive"  # the documented command's thin shim over the driver
        for t in GRAPH[n]
        if t.startswith(("dla_plugin.sim", "ecpa"))
        # the selector's lazy lookup of the process observer, on its first call (DLA.md)
        and not (n == "dla_plugin.selector" and t in ("ecpa", "ecpa.observer"))
    }
    assert wrong == set()


def test_profile_core_imports_nothing_from_other_rooms() -> None:
    profile = [n for n in GRAPH if n.startswith("ecpa.profile")]
    assert len(profile) >= 12
    outside = {
        f"{n} -> {t}"
        for n in profile
        for t in GRAPH[n]
        if not (
            t.startswith(("ecpa.profile", "ecpa.shapes")) or t in ("ecpa.errors", "ecpa._files")
        )
    }
    assert outside == set()


def test_profile_core_loads_alone() -> None:
    # The same, as Python sees it: importing every profile module loads no other room.
    code = (
        "import importlib, json, pkgutil, sys\n"
        "import ecpa.profile\n"
        "for m in pkgutil.iter_modules(ecpa.profile.__path__):\n"
        "    importlib.import_module('ecpa.profile.' + m.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(out.stdout)
    assert "ecpa.profile.verify" in loaded
    others = [
        m
        for m in loaded
        if m.startswith(
            (
                "ecpa.runtime",
                "ecpa.observer",
                "ecpa.launcher",
                "ecpa.verify_jobs",
                "ecpa.corpus",
                "ecpa.demo",
                "ecpa.cli",
            )
        )
    ]
    # ``import ecpa.profile`` runs ``ecpa/__init__`` first, which is the public facade and
    # re-exports the replay fences of the runtime room: only those may appear, and the
    # PostgreSQL fence without its driver (psycopg is loaded when a fence is opened).
    allowed = {
        "ecpa.runtime",
        "ecpa.runtime.stores",
        "ecpa.runtime.stores.replay",
        "ecpa.runtime.stores.postgres",
        "ecpa.runtime.stores.pgconn",
    }
    assert set(others) <= allowed
    assert "psycopg" not in loaded


def test_importing_the_plugin_imports_no_simulator() -> None:
    code = (
        "import json, sys\n"
        "import dla_plugin, dla_plugin.selector, dla_plugin.admission, dla_plugin.rule\n"
        "import dla_plugin.contract, dla_plugin.manifests, dla_plugin.host_evidence\n"
        "from importlib.metadata import entry_points\n"
        "ep = entry_points(group='vllm.victim_selector')['dla'].load()\n"
        "ep()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(out.stdout)
    assert "dla_plugin.selector" in loaded
    assert [m for m in loaded if m.startswith("dla_plugin.sim") or m == "dla_plugin.drive"] == []
    assert [m for m in loaded if m == "ecpa" or m.startswith("ecpa.")] == []


#: The document that lists the public API: docs/profile.md (§9 "Python API", and the
#: sections it refers to: the error codes, the trust store, the encodings).
API_DOC = ROOT / "docs" / "profile.md"

#: ``ecpa.__all__`` without ``__version__`` (a plain string, checked on its own).
PUBLIC = sorted(set(ecpa.__all__) - {"__version__"})


def _own_doc(obj: object) -> str:
    """The docstring ``obj`` carries itself: never a base class's, nor the signature line a
    dataclass or a shape writes for a class without one."""
    doc = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    doc = (doc or "").strip()
    generated = doc.startswith(f"{getattr(obj, '__name__', '')}(") and "\n" not in doc
    return "" if generated else doc


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_name_is_the_packages_own_and_says_what_it_is(name: str) -> None:
    """Each name ``ecpa`` exports resolves to the object of the ``ecpa`` module the facade
    says it lives in; a class or function is defined in the package (not re-exported from a
    dependency) and carries its own docstring (STYLE rule 9)."""
    home = ecpa._EXPORTS[name]
    assert home == "ecpa" or home.startswith("ecpa."), home
    obj = getattr(ecpa, name)
    assert obj is getattr(importlib.import_module(home), name)
    if isinstance(obj, type) or inspect.isfunction(obj):
        assert obj.__module__.startswith("ecpa."), obj.__module__
        assert _own_doc(obj), f"{name} has no docstring"
    else:
        assert isinstance(obj, str), repr(obj)  # the schema and profile identifiers
        assert obj


@pytest.mark.parametrize("name", PUBLIC)
def test_each_public_name_is_in_the_api_document(name: str) -> None:
    assert re.search(rf"\b{re.escape(name)}\b", API_DOC.read_text(encoding="utf-8")), name


def test_every_name_the_api_document_gives_is_exported() -> None:
    """Each ``ecpa.<name>`` the API's document shows is still in ``ecpa.__all__`` (a
    subpackage it names, ``ecpa.runtime`` say, is not a name of the facade); and
    ``__version__`` is the installed distribution's."""
    named = set(re.findall(r"\becpa\.([A-Za-z_]\w*)", API_DOC.read_text(encoding="utf-8")))
    subpackages = {n for n in named if (ROOT / "ecpa" / n / "__init__.py").is_file()}
    assert len(named - subpackages) >= 10, named  # guards the test itself
    assert sorted(named - subpackages - set(ecpa.__all__)) == []
    assert ecpa.__version__ == version("ecpa")


def test_entry_points_resolve() -> None:
    (script,) = [e for e in entry_points(group="console_scripts") if e.name == "ecpa"]
    assert callable(script.load())
    selector = entry_points(group="vllm.victim_selector")["dla"].load()
    assert selector.__name__ == "DlaVictimSelector"
    bundle = entry_points(group="vllm.extension_bundles")["org.vllm-hust.dla"].load()
    assert bundle.__name__ == "dla_plugin.manifests"


@pytest.mark.parametrize("module", ["dla_plugin.sim", "dla_plugin.drive", "ecpa"])
def test_documented_module_commands_still_run(module: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert "usage" in out.stdout.lower()


#: STYLE rule 10's "about 400 lines at most", as a cap with headroom rather than a ratchet.
MAX_MODULE_LINES = 450
#: A command module's cap: arguments, a library call, printing.
MAX_COMMAND_LINES = 250


def test_modules_stay_small() -> None:
    lines = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert len(lines) > 60  # guards the test itself
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}


def test_the_command_line_stays_thin() -> None:
    """STYLE "cli/": parse arguments, call the library, print. No command module holds the
    demo or an engine (ecpa/demo/, ecpa/verify_jobs/ and the library do; ``_demo`` is the
    command's thin module), and none grows past :data:`MAX_COMMAND_LINES`: a long command
    module is work that belongs in the library. No budget on their total."""
    modules = sorted((ROOT / "ecpa" / "cli").rglob("*.py"))
    assert len(modules) >= 5, modules  # guards the test itself
    lines = {path.name: len(path.read_text(encoding="utf-8").splitlines()) for path in modules}
    assert {name: n for name, n in lines.items() if n > MAX_COMMAND_LINES} == {}
    assert [path.name for path in modules if "demo" in path.stem and path.stem != "_demo"] == []


def test_every_room_says_what_it_may_import() -> None:
    rooms = ["profile", "runtime", "observer", "launcher", "corpus", "corpus/generator"]
    rooms += ["verify_jobs", "demo", "serve", "hsm", "dev", "shapes", "profile/json"]
    rooms += [f"runtime/{sub}" for sub in ("model", "judge", "stores", "host")]
    for package in rooms:
        doc = ast.get_docstring(ast.parse((ROOT / "ecpa" / package / "__init__.py").read_text()))
        assert doc is not None, package
        assert "May import" in doc, package
    for package in ("dla_plugin/sim", "dla_plugin/sim/host"):
        doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text()))
        assert doc is not None, package
        assert "May import" in doc, package


def test_the_runtime_room_is_split_by_role() -> None:
    top = sorted(p.name for p in (ROOT / "ecpa" / "runtime").glob("*.py"))
    subs = sorted(p.parent.name for p in (ROOT / "ecpa" / "runtime").glob("*/__init__.py"))
    assert len(subs) >= 3, subs
    assert len(top) <= 6, top
    assert {f"ecpa.runtime.{sub}" for sub in subs} <= set(RANK)


#: The shared helpers' homes, open to every room despite their ``_``: files, and text shown.
SHARED = ("ecpa._files", "ecpa._text")


def _private(module: str) -> bool:
    """Whether ``module`` is private to its room: a part after ``ecpa`` starts with ``_``
    (the :data:`SHARED` helpers' homes are open to every room)."""
    return module not in SHARED and any(
        part.startswith("_") and not part.startswith("__") for part in module.split(".")[1:]
    )


def test_no_room_imports_another_rooms_private_names() -> None:
    """A room's ``_`` modules and names are its own: another room gets a public name or
    nothing (the :data:`SHARED` helpers' homes are open to every room)."""
    wrong = []
    for name, path in MODULES.items():
        mine = room(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("ecpa"):
                continue
            module = node.module or ""
            if room(module) == mine or room(module) is None:
                continue
            names = [a.name for a in node.names]
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if _private(module) or private:
                wrong.append(f"{name} -> {module} {private or ''}".strip())
    assert wrong == []


def test_no_module_level_assert() -> None:
    """An invariant checked at import must hold under ``python -O`` too: code that raises."""
    found = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assert)
    ]
    assert found == []


def test_the_fast_statement_pattern_is_checked_against_the_models() -> None:
    from ecpa.profile import fast
    from ecpa.profile.statement import Process, Statement

    assert set(fast._MEMBERS) == Statement.__wire__
    assert set(fast._PROCESS) == Process.__wire__
    with pytest.raises(RuntimeError, match="expected the drift caught"):
        fast._require(False, "the drift caught")


def test_one_proc_parser_one_atomic_writer() -> None:
    """``/proc`` is read in one module (its root a parameter), files are written whole by
    one function: no other module names ``/proc`` or a process's ``stat``, and none renames a
    temporary file into place itself."""
    proc_home = "ecpa.runtime.model.process"
    writer_home = "ecpa._files"
    wrong = []
    for name, path in MODULES.items():
        if not name.startswith("ecpa"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                name != proc_home
                and isinstance(node, ast.Constant)
                and node.value in ("/proc", "stat")
            ):
                wrong.append(f"{name}:{node.lineno} names {node.value!r}")
            if (
                name != writer_home
                and isinstance(node, ast.Attribute)
                and node.attr in ("replace", "link", "rename", "mkstemp")
                and isinstance(node.value, ast.Name)
                and node.value.id in ("os", "tempfile")
            ):
                wrong.append(f"{name}:{node.lineno} calls {node.value.id}.{node.attr}")
    assert wrong == []


#: The tests mirror the rooms: a folder under ``tests/`` holds the tests of the room (or
#: sub-room) it is named after.
TEST_ROOMS: dict[str, str] = {
    "profile": "ecpa.profile",
    "hsm": "ecpa.hsm",
    "shapes": "ecpa.shapes",
    "runtime": "ecpa.runtime",
    **{f"runtime/{sub}": f"ecpa.runtime.{sub}" for sub in ("model", "judge", "stores", "host")},
    "observer": "ecpa.observer",
    "launcher": "ecpa.launcher",
    "verify_jobs": "ecpa.verify_jobs",
    "corpus": "ecpa.corpus",
    "demo": "ecpa.demo",
    "serve": "ecpa.serve",
    "cli": "ecpa.cli",
    "dla": "dla_plugin",
    "dla/sim": "dla_plugin.sim",
}

#: The only tests at the top of ``tests/``: those about the whole project.
WHOLE_PROJECT_TESTS = frozenset(
    {
        "test_layout.py",
        "test_docs.py",
        "test_bench.py",
        "test_files.py",
        "test_schemas.py",
        "test_deploy.py",
        "test_wheel.py",
    }
)


def test_the_tests_mirror_the_rooms() -> None:
    """Every test module but the whole project's sits in a folder named after the room it
    tests, and every folder on the way is a package (``tests.<room>.test_x`` imports)."""
    tests = ROOT / "tests"
    modules = sorted(tests.rglob("test_*.py"))
    assert len(modules) > 50, modules  # guards the test itself
    assert {p.name for p in modules if p.parent == tests} == WHOLE_PROJECT_TESTS
    folders = {p.parent.relative_to(tests).as_posix() for p in modules if p.parent != tests}
    assert len(folders) >= 6, folders
    assert sorted(folders - set(TEST_ROOMS)) == []
    assert [room for room in TEST_ROOMS.values() if room not in MODULES] == []
    not_packages = sorted(
        folder.relative_to(tests).as_posix()
        for p in modules
        for folder in p.parents
        if folder.is_relative_to(tests) and not (folder / "__init__.py").is_file()
    )
    assert not_packages == []


def _is_e2e(node: ast.expr) -> bool:
    """Whether ``node`` is ``pytest.mark.e2e``, or a list or tuple holding it."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(_is_e2e(element) for element in node.elts)
    return ast.unparse(node) == "pytest.mark.e2e"


def _marks_e2e(body: list[ast.stmt]) -> bool:
    """Whether ``body`` (a module's or a class's) sets ``pytestmark`` to include e2e."""
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and _is_e2e(node.value)
        for node in body
    )


def _asks_for(node: ast.FunctionDef) -> set[str]:
    """The fixtures a test or fixture asks for: its parameters and ``usefixtures``."""
    args = node.args
    used = {
        arg.value
        for d in node.decorator_list
        if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.usefixtures"
        for arg in d.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    }
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} | used


Fixtures = dict[str, tuple[set[str], bool]]


def _fixtures(tree: ast.Module) -> Fixtures:
    """Each fixture a module defines: the fixtures it asks for, and whether it is autouse."""
    return {
        node.name: (_asks_for(node), "autouse=True" in ast.unparse(d))
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        for d in node.decorator_list
        if ast.unparse(d).startswith("pytest.fixture")
    }


def _reaches(
    names: set[str], fixtures: Fixtures, e2e: frozenset[str], seen: frozenset[str]
) -> bool:
    """Whether asking for ``names`` asks, through any chain of fixtures, for one of ``e2e``."""
    return any(
        name in e2e
        or (name in fixtures and _reaches(fixtures[name][0], fixtures, e2e, seen | {name}))
        for name in names - seen
    )


def _marked(
    body: list[ast.stmt], inherited: bool, e2e_fixtures: Callable[[set[str]], bool]
) -> list[str]:
    """The tests of ``body`` (``Class::test`` in a class) marked e2e."""
    found = []
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            own = any(_is_e2e(d) for d in node.decorator_list) or _marks_e2e(node.body)
            inner = _marked(node.body, inherited or own, e2e_fixtures)
            found += [f"{node.name}::{name}" for name in inner]
        elif (
            isinstance(node, ast.FunctionDef)
            and node.name.startswith("test")
            and (
                inherited
                or any(_is_e2e(d) for d in node.decorator_list)
                or e2e_fixtures(_asks_for(node))
            )
        ):
            found.append(node.name)
    return found


def e2e_tests(tests: Path) -> list[str]:
    """The test functions under ``tests`` that pytest marks e2e, found by reading the files:
    a module's ``pytestmark``, a class's decorators or ``pytestmark``, a function's
    decorators, and conftest's rule that a test asking (through any chain of fixtures) for
    one of :data:`tests.conftest.E2E_FIXTURES` is e2e. One entry per function, whatever
    its parametrization."""
    from tests.conftest import E2E_FIXTURES

    trees = {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(tests.rglob("*.py"))}
    by_module = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in trees}
    marked = []
    for path, tree in trees.items():
        if not path.name.startswith("test_"):
            continue
        fixtures: Fixtures = {}
        for folder in reversed([d for d in path.parents if d.is_relative_to(tests)]):
            if folder / "conftest.py" in trees:
                fixtures.update(_fixtures(trees[folder / "conftest.py"]))
        for node in tree.body:  # fixtures imported from a helper module (tests._x)
            if isinstance(node, ast.ImportFrom) and node.module in by_module:
                theirs = _fixtures(trees[by_module[node.module]])
                fixtures.update(
                    {a.asname or a.name: theirs[a.name] for a in node.names if a.name in theirs}
                )
        fixtures.update(_fixtures(tree))
        prefix = path.relative_to(ROOT).as_posix()
        marked += [f"{prefix}::{name}" for name in _e2e_in(tree, fixtures, E2E_FIXTURES)]
    return marked


def _e2e_in(tree: ast.Module, fixtures: Fixtures, e2e: frozenset[str]) -> list[str]:
    """The tests of one module marked e2e, given the fixtures it sees."""
    autouse = {name for name, (_, auto) in fixtures.items() if auto}

    def asks_e2e(names: set[str]) -> bool:
        return _reaches(names | autouse, fixtures, e2e, frozenset())

    return _marked(tree.body, _marks_e2e(tree.body), asks_e2e)


def test_conftest_marks_e2e_each_test_asking_for_a_real_process_fixture() -> None:
    """The rule :func:`e2e_tests` reads is the one conftest's hook applies: a test asking
    for one of ``E2E_FIXTURES`` gets the marker, another does not."""
    from tests.conftest import E2E_FIXTURES, pytest_collection_modifyitems

    class Item:
        def __init__(self, fixturenames: list[str]) -> None:
            self.fixturenames = fixturenames
            self.markers: list[str] = []

        def add_marker(self, marker: pytest.MarkDecorator) -> None:
            self.markers.append(marker.name)

    asking = [Item(["tmp_path", name]) for name in sorted(E2E_FIXTURES)]
    other = Item(["tmp_path", "monkeypatch"])
    pytest_collection_modifyitems([*asking, other])  # type: ignore[list-item]
    assert [item.markers for item in asking] == [["e2e"]] * len(E2E_FIXTURES)
    assert other.markers == []


def test_real_process_tests_are_marked() -> None:
    """``pytest -m "not e2e"`` is the quick loop: at least 20 tests start real processes and
    say so. Counted by reading the test files (:func:`e2e_tests`), one per test function, not
    per parametrized item; ``pytest --collect-only -m e2e`` selected the same 197 functions
    (280 items) when this was written."""
    marked = e2e_tests(ROOT / "tests")
    assert len(marked) >= 20, marked
    assert any(m.startswith("tests/launcher/test_e2e_launch.py::") for m in marked)


def test_other_rooms_use_the_runtime_through_its_facade() -> None:
    """``ecpa.runtime`` exports what other rooms use; its sub-rooms are its own."""
    wrong = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if name.startswith("ecpa") and not name.startswith("ecpa.runtime")
        for target in targets
        if target.startswith("ecpa.runtime.")
    )
    assert wrong == []


def test_every_name_the_runtime_facade_exports_resolves() -> None:
    import ecpa.runtime

    assert len(ecpa.runtime.__all__) >= 20
    for name in ecpa.runtime.__all__:
        assert getattr(ecpa.runtime, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing_of_the_kind'"):
        ecpa.runtime.nothing_of_the_kind


def test_the_runtime_facade_lists_each_name_once_for_both_readers() -> None:
    """The names type checkers see (the ``TYPE_CHECKING`` imports, read here with ``ast``)
    are exactly the table the facade loads from (read from the same lines at run time)."""
    import ecpa.runtime

    tree = ast.parse((ROOT / "ecpa" / "runtime" / "__init__.py").read_text())
    block = next(
        n for n in tree.body if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.dump(n.test)
    )
    seen = {
        alias.asname: (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert len(seen) == sum(len(n.names) for n in block.body if isinstance(n, ast.ImportFrom))
    assert seen == ecpa.runtime._EXPORTS
    assert ecpa.runtime.__all__ == sorted(seen)


def test_the_runtime_facade_reads_its_names_without_its_source(tmp_path: Path) -> None:
    """An install of compiled files only (no ``.py``) reads the same table from the
    facade's compiled code."""
    import ecpa.runtime

    copy = tmp_path / "ecpa"
    shutil.copytree(ROOT / "ecpa", copy, ignore=shutil.ignore_patterns("__pycache__"))
    facade = copy / "runtime" / "__init__.py"
    assert py_compile.compile(str(facade), cfile=str(facade) + "c", doraise=True)
    facade.unlink()
    code = (
        "import json, ecpa.runtime as r\n"
        "print(json.dumps([r.__file__, {n: list(v) for n, v in r._EXPORTS.items()}]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    where, table = json.loads(out.stdout)
    assert where.endswith("__init__.pyc"), where
    assert table == {n: list(v) for n, v in ecpa.runtime._EXPORTS.items()}


def test_a_blank_line_inside_the_facades_block_loses_no_name() -> None:
    import ecpa.runtime

    source = (
        "x = 1\nif TYPE_CHECKING:\n    from ecpa.runtime.a import A as A\n\n"
        "    from ecpa.runtime.b import B as B\n\n\ndef f() -> None: ...\n"
    )
    assert ecpa.runtime._from_source(source) == [
        ("ecpa.runtime.a", "A", "A"),
        ("ecpa.runtime.b", "B", "B"),
    ]
    with pytest.raises(ImportError, match="expected each export"):
        ecpa.runtime._from_source(source.replace("import B as B", "import B"))


def test_the_runtime_facade_loads_only_what_is_asked_for() -> None:
    """``import ecpa`` loads nothing of the library (its names load on first use), and
    asking the runtime facade for one name loads that name's module and nothing else of the
    runtime, of the profile's models or of another room."""
    code = (
        "import json, sys\n"
        "import ecpa\n"
        "before = set(sys.modules)\n"
        "from ecpa.runtime import ProcessIdentity\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('ecpa'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    loaded = json.loads(out.stdout)
    assert [m for m in loaded if m.startswith("ecpa.runtime")] == [
        "ecpa.runtime",
        "ecpa.runtime.model",
        "ecpa.runtime.model.process",
    ]
    assert set(loaded) - {"ecpa.runtime", "ecpa.runtime.model", "ecpa.runtime.model.process"} <= {
        "ecpa.errors",
        "ecpa._files",
        "ecpa._text",
    }
