"""Importing xpgrad, and using it on NumPy arrays, imports no optional backend."""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import subprocess
import sys
import textwrap

OPTIONAL = ("torch", "jax", "jaxlib", "cupy", "dask", "array_api_strict")


def run_isolated(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter; it prints a JSON object as its last line."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_pulls_in_no_backend() -> None:
    out = run_isolated(
        f"""
        import json, sys
        import xpgrad
        print(json.dumps({{m: m in sys.modules for m in {OPTIONAL!r}}}))
        """
    )
    assert not any(out.values()), out


def test_numpy_path_pulls_in_no_backend() -> None:
    out = run_isolated(
        f"""
        import json, sys
        import numpy as np
        import xpgrad as xg

        def loss(w, x):
            xp = xg.array_namespace(w, x)
            return xp.sum(xp.exp(w) * x)

        g = xg.grad(loss)(np.ones(3), np.arange(3.0))
        assert type(g) is np.ndarray
        t = xg.asarray([1.0, 2.0], requires_grad=True)
        (t * t).sum().backward()
        with xg.default_device("numpy", dtype="float32", seed=0):
            z = xg.zeros(2) + xg.random.normal(2) + xg.random.uniform(2)
        xg.random.seed(1)
        xg.random.permutation(np.ones(3))
        print(json.dumps({{m: m in sys.modules for m in {OPTIONAL!r}}}))
        """
    )
    assert not any(out.values()), out


def test_imports_only_what_is_asked() -> None:
    # asking for one backend by name imports that one, not the others
    out = run_isolated(
        """
        import json, sys
        import xpgrad as xg
        with xg.default_device("array_api_strict"):
            xg.zeros(1)
        print(json.dumps({m: m in sys.modules for m in ("array_api_strict", "torch", "jax", "dask", "cupy")}))
        """
    )
    assert out == {"array_api_strict": True, "torch": False, "jax": False, "dask": False, "cupy": False}


# ---------------------------------------------------------------------- the import order
# xpgrad's modules form layers, imported bottom up: a module imports (at module level)
# only modules of its own layer or of a lower one, the module-level imports form no
# circle, and no function imports an xpgrad module (a lower layer that calls into a
# higher one at run time gets what it needs handed down at import: see the ``set_*`` and
# ``_bind*`` functions the upper modules call). Optional backends (torch, jax, dask, ...)
# are imported inside functions on purpose (importing xpgrad imports none of them): this
# test looks only at imports of xpgrad's own modules.
#
# Each layer lists module names; a name covers its submodules, and the longest match wins.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("xpgrad._exceptions", "xpgrad._spec", "xpgrad._fast_adapter", "xpgrad._dtypes", "xpgrad._backends",
              "xpgrad._dispatch", "xpgrad._dlpack", "xpgrad._tracing", "xpgrad.tree_util",
              "xpgrad.checkpoint_policies")),
    ("policy", ("xpgrad._policy", "xpgrad._info")),
    ("autograd", ("xpgrad.autograd",)),
    ("rules", ("xpgrad.ops", "xpgrad.special", "xpgrad.fft", "xpgrad.linalg", "xpgrad._lazy",
               "xpgrad._io")),
    ("transforms", ("xpgrad.functional", "xpgrad._custom", "xpgrad._checkpoint", "xpgrad._vmap", "xpgrad._jacobian",
                    "xpgrad._jit", "xpgrad._jit_passes",
                    "xpgrad.random", "xpgrad.testing")),
    ("namespace", ("xpgrad._namespace",)),  # every name of the package below nn: what nn imports as xg
    ("nn", ("xpgrad.nn", "xpgrad.optim", "xpgrad.utils", "xpgrad.viz")),
    ("api", ("xpgrad", "xpgrad._bound", "xpgrad.__main__", "xpgrad._demo")),
)

# (module, imported module) pairs allowed although they break the rules above, each with
# its reason. Keep it short: each entry is a circle or a run-time import left to remove.
ALLOWED: dict[tuple[str, str], str] = {}

SRC = pathlib.Path(__file__).resolve().parent.parent / "src" / "xpgrad"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _layer(module: str) -> int:
    best, best_len = -1, -1
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_len:
                best, best_len = i, len(name)
    assert best >= 0, f"{module} is in no layer of LAYERS: add it"
    return best


@dataclasses.dataclass(frozen=True)
class _Import:
    module: str  # the importing module
    target: str  # the xpgrad module imported
    line: int
    in_function: bool
    type_checking: bool  # under ``if TYPE_CHECKING:`` (never run)


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The xpgrad modules an import statement imports (``from a import b`` of a module b: a.b)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == "xpgrad" or a.name.startswith("xpgrad.")]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    if source != "xpgrad" and not source.startswith("xpgrad."):
        return []
    subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in MODULES]
    return subs if len(subs) == len(node.names) else [source, *subs]


def _imports() -> list[_Import]:
    found = []
    for module, path in MODULES.items():
        is_package = path.name == "__init__.py"

        def walk(node: ast.AST, in_function: bool, type_checking: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in _targets(module, is_package, child):
                        found.append(_Import(module, target, child.lineno, in_function, type_checking))
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    walk(child, True, type_checking)
                elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    walk(child, in_function, True)
                else:
                    walk(child, in_function, type_checking)

        walk(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return found


def _with_packages(target: str) -> list[str]:
    """``target`` and the packages that importing it imports first (the top package, already
    being imported whenever a submodule runs, aside: unless ``target`` is the top package)."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(min(2, len(parts)), len(parts) + 1)]


def _own_package(module: str, target: str) -> bool:
    """Whether ``target`` is ``module`` or a subpackage it is in (already being imported when it
    runs); not the top package, which a submodule importing it sees half made: a circle."""
    return target != "xpgrad" and (target == module or module.startswith(target + "."))


def test_layers_cover_every_module() -> None:
    for module in MODULES:
        _layer(module)  # raises for a module in no layer


def test_no_xpgrad_import_inside_a_function() -> None:
    bad = [f"{i.module}:{i.line} imports {i.target}" for i in _imports()
           if i.in_function and (i.module, i.target) not in ALLOWED]
    assert not bad, "imports inside functions (import at the top; hand down what a lower layer needs):\n" + "\n".join(bad)


def test_imports_go_down_the_layers() -> None:
    bad = []
    for i in _imports():
        if i.in_function or i.type_checking or (i.module, i.target) in ALLOWED:
            continue
        for target in _with_packages(i.target):
            if _own_package(i.module, target):
                continue
            if _layer(target) > _layer(i.module):
                bad.append(f"{i.module}:{i.line} ({LAYERS[_layer(i.module)][0]}) imports {target} "
                           f"({LAYERS[_layer(target)][0]})")
    assert not bad, "imports from a higher layer:\n" + "\n".join(bad)


def test_module_level_imports_form_no_circle() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for i in _imports():
        if i.in_function or i.type_checking or (i.module, i.target) in ALLOWED:
            continue
        for target in _with_packages(i.target):
            if not _own_package(i.module, target):
                graph[i.module].add(target)
    # depth-first search for a back edge, reporting the circle it closes
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                return [*stack[stack.index(t):], t]
            if t not in state:
                circle = visit(t)
                if circle:
                    return circle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            circle = visit(m)
            assert circle is None, "an import circle: " + " -> ".join(circle)
