"""The import graph of lietraj: no cycle between its modules, and the layers import one way (DESIGN.md):
``optimal_control`` imports ``dynamics``, ``sim`` (the MuJoCo plant) only ``dynamics``, ``mpc`` the ``optimal_control``
layer, ``problems`` imports both, ``viz`` and the command line sit on top; never the reverse.

Every ``import`` statement of a module counts, at module level or inside a function or an ``if TYPE_CHECKING``
block: a lazy or type-only import is still a dependency that a reader must untangle."""

from __future__ import annotations

import ast
from pathlib import Path

import lietraj

ROOT = Path(lietraj.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in ROOT.rglob("*.py")}


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The lietraj modules ``name`` imports: ``from package import submodule`` counts as the submodule."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_import_graph_is_read_from_the_sources():
    edges = graph()
    assert "lietraj.optimal_control.problem" in edges
    assert "lietraj.dynamics.lie.state" in edges["lietraj.optimal_control.problem"]


def test_a_cycle_is_found_where_there_is_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_inside_lietraj():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


LAYERS = {  # a package and the lietraj packages it must not import
    "lietraj.dynamics": ("lietraj.optimal_control", "lietraj.problems", "lietraj.viz", "lietraj.cli",
                         "lietraj.warmup"),
    "lietraj.optimal_control": ("lietraj.problems", "lietraj.viz", "lietraj.cli", "lietraj.warmup", "lietraj.mpc",
                                "lietraj.sim"),
    "lietraj.sim": ("lietraj.optimal_control", "lietraj.mpc", "lietraj.problems", "lietraj.viz", "lietraj.cli"),
    "lietraj.mpc": ("lietraj.sim", "lietraj.problems", "lietraj.viz", "lietraj.cli"),
    "lietraj.problems": ("lietraj.viz", "lietraj.cli", "lietraj.warmup", "lietraj.scenarios", "lietraj.mpc",
                         "lietraj.sim"),
    "lietraj.scenarios": ("lietraj.viz", "lietraj.cli", "lietraj.warmup"),
    "lietraj.viz": ("lietraj.cli", "lietraj.warmup"),
    "lietraj.batch": ("lietraj.cli", "lietraj.viz", "lietraj.mpc", "lietraj.sim", "lietraj.scenarios"),
}


def test_the_layers_import_one_way():
    wrong = []
    for name, targets in graph().items():
        for layer, forbidden in LAYERS.items():
            if name == layer or name.startswith(layer + "."):
                wrong += [f"{name} -> {t}" for t in targets if any(t == f or t.startswith(f + ".") for f in forbidden)]
    assert not wrong, "imports against the layers: " + ", ".join(wrong)


ARCHITECTURE = (  # the README's layers, lowest first: a module may import its own layer and the ones before it
    ("lietraj._jit", "lietraj.dynamics._tuples"),
    ("lietraj.dynamics.lie",),
    ("lietraj.dynamics.model", "lietraj.dynamics._checks", "lietraj.dynamics._spatial"),
    ("lietraj.dynamics.kinematics", "lietraj.dynamics.algorithms", "lietraj.dynamics.contacts"),
    ("lietraj.sim",),
    ("lietraj.optimal_control.dynamics",),
    ("lietraj.optimal_control.costs", "lietraj.optimal_control.constraints"),
    ("lietraj.optimal_control.problem",),
    ("lietraj.optimal_control.solvers",),
    ("lietraj.optimal_control.feedback", "lietraj.optimal_control.solution_io"),
    ("lietraj.mpc",),
    ("lietraj.problems",),
    ("lietraj.scenarios",),
    ("lietraj.viz",),
    ("lietraj.warmup",),
    ("lietraj.batch",),
    ("lietraj.cli",),
)


def layer(name: str) -> int | None:
    """The index of ``name``'s layer in ARCHITECTURE; None for the packages' ``__init__`` that gather them."""
    for i, prefixes in enumerate(ARCHITECTURE):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_every_module_has_a_layer():
    packages = {"lietraj", "lietraj.dynamics", "lietraj.optimal_control"}
    assert [name for name in graph() if layer(name) is None and name not in packages] == []


# The one import upwards: DiscreteDynamics.rollout_policy, public since before the rollout of a policy moved into the
# solvers' forward pass, hands its work to that forward pass.
UPWARDS = {("lietraj.optimal_control.dynamics.discrete_dynamics", "lietraj.optimal_control.solvers.forward_pass")}


def test_the_layers_of_the_architecture_import_downwards():
    wrong = [f"{name} -> {t}" for name, targets in graph().items() for t in targets
             if layer(name) is not None and layer(t) is not None and layer(t) > layer(name)
             and (name, t) not in UPWARDS]
    assert not wrong, "imports of a later layer: " + ", ".join(wrong)
