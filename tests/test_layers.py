"""The package's folders are layered as the data flows (README, "How it is
built"): a module may import its own folder and the folders below it, never one
above, and no chain of imports — function-level ones included — comes back to
where it started."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "symbolic"

#: The pipeline, bottom to top. Folders of one rank do not import each other.
LAYERS = [
    ("core",),
    ("models",),
    ("layout",),
    ("ledgers",),
    ("bill",),
    ("step",),
    ("search",),
    ("claims",),
    ("render", "trace"),
    ("per_rank",),
    ("per_rank_states",),
    ("commands",),
    ("cli", "api"),
    ("__main__", "__init__"),
]
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path) -> set[str]:
    """Every ``symbolic`` module ``path`` imports, at any depth of its code."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    known = modules()
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("symbolic")}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if not target.startswith("symbolic"):
                continue
            submodules = {f"{target}.{alias.name}" for alias in node.names} & set(known)
            found |= submodules or {target}
    return {target for target in found if target in known and target != name}


def room(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_folder_has_a_rank():
    assert {room(name) for name in modules()} <= set(RANK)


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_module_imports_a_folder_above_its_own(name):
    upward = sorted(target for target in imports(name, modules()[name])
                    if target != "symbolic" and RANK[room(target)] > RANK[room(name)])
    assert not upward, f"{name} imports {upward}, above its own folder"


def test_folders_of_one_rank_do_not_import_each_other():
    for name, path in modules().items():
        for target in imports(name, path):
            if target != "symbolic" and room(target) != room(name):
                assert RANK[room(target)] != RANK[room(name)], f"{name} imports {target}"


def test_no_import_circle():
    graph = {name: imports(name, path) for name, path in modules().items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name, path):
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                circle = path[path.index(target):] + [target] if target in path else [name, target]
                pytest.fail("import circle: " + " -> ".join(circle))
            if state.get(target) is None:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(graph):
        if state.get(name) is None:
            visit(name, [name])


def test_each_folder_says_what_it_is_for_and_what_it_may_import():
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
        assert "import" in doc, f"{folder.name}/__init__.py does not say what it may import"
