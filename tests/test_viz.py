"""xpgrad.viz: the DOT text of a recorded graph, and rendering it through Graphviz."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import xpgrad as xg
from xpgrad import viz

_NODE = re.compile(r'^  (?P<id>\w+) \[label="(?P<label>(?:[^"\\]|\\.)*)", (?P<attrs>.*)\];$', re.MULTILINE)
_EDGE = re.compile(r"^  (?P<src>\w+) -> (?P<dst>\w+)(?: \[label=\"(?P<label>[^\"]*)\"\])?;$", re.MULTILINE)


def _nodes(dot: str) -> dict[str, tuple[list[str], str]]:
    """id -> (label lines, attributes) of each DOT node statement."""
    return {m["id"]: (m["label"].split("\\n"), m["attrs"]) for m in _NODE.finditer(dot)}


def _edges(dot: str) -> list[tuple[str, str]]:
    return [(m["src"], m["dst"]) for m in _EDGE.finditer(dot)]


def _ops(dot: str) -> dict[str, list[str]]:
    return {k: lab for k, (lab, _) in _nodes(dot).items() if k.startswith("op")}


def _count_nodes(t: xg.Tensor) -> int:
    """The number of Nodes recorded for ``t``, counted independently of viz."""
    seen: set[int] = set()
    stack = [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        stack.extend(p for p in n.parents if p is not None and not isinstance(p, xg.Tensor))
    return len(seen)


def _mlp() -> tuple[xg.nn.Module, xg.Tensor]:
    model = xg.nn.Sequential(xg.nn.Linear(4, 8), xg.nn.ReLU(), xg.nn.Linear(8, 3))
    x = xg.asarray(np.ones((5, 4), dtype=np.float32))
    y = xg.asarray([0, 2, 1, 1, 0])
    return model, xg.nn.functional.cross_entropy(model(x), y)


def test_one_node_per_primitive_with_name_shape_dtype() -> None:
    x = xg.asarray([[1.0, 2.0, 3.0]], requires_grad=True)
    w = xg.asarray(np.ones((3, 2)), requires_grad=True)
    y = xg.sum(xg.exp(x @ w), axis=0)
    dot = viz.to_dot(y)
    ops = _ops(dot)
    assert len(ops) == _count_nodes(y) == 3
    assert sorted(lab[0] for lab in ops.values()) == ["exp", "matmul", "sum"]
    by_name = {lab[0]: lab for lab in ops.values()}
    assert by_name["matmul"][1] == "(1, 2) float64"
    assert by_name["exp"][1] == "(1, 2) float64"
    assert by_name["sum"][1] == "(2,) float64"
    assert dot.startswith("digraph xpgrad {") and dot.endswith("}\n")


def test_mlp_node_count_and_edges() -> None:
    model, loss = _mlp()
    dot = viz.to_dot(loss, params=dict(model.named_parameters()))
    ops = _ops(dot)
    assert len(ops) == _count_nodes(loss) >= 8  # 3 per Linear, nn.relu, nn.softmax_cross_entropy
    nodes = _nodes(dot)
    edges = _edges(dot)
    assert all(src in nodes and dst in nodes for src, dst in edges)
    # every op has as many incoming edges as array arguments it records (scalars are not drawn)
    assert {dst for _, dst in edges} == set(ops)
    # the four parameters are leaves, named, with their shapes, each read by one op
    leaves = {lab[0]: lab for k, (lab, _) in nodes.items() if k.startswith("leaf")}
    assert leaves == {
        "0.weight": ["0.weight", "(8, 4) float32", "requires_grad"],
        "0.bias": ["0.bias", "(8,) float32", "requires_grad"],
        "2.weight": ["2.weight", "(3, 8) float32", "requires_grad"],
        "2.bias": ["2.bias", "(3,) float32", "requires_grad"],
    }
    # the input batch is a constant input of the first matmul
    consts = {k: lab for k, (lab, _) in nodes.items() if k.startswith("const")}
    assert ["const", "(5, 4) float32"] in consts.values()


def test_leaves_constants_and_output_are_marked() -> None:
    a = xg.asarray([1.0, 2.0], requires_grad=True)
    c = xg.asarray([3.0, 4.0])  # a constant Tensor
    y = xg.sum(a * c + np.ones(2))  # and a raw NumPy array
    dot = viz.to_dot(y)
    nodes = _nodes(dot)
    leaf_attrs = [attrs for k, (_, attrs) in nodes.items() if k.startswith("leaf")]
    const_attrs = [attrs for k, (_, attrs) in nodes.items() if k.startswith("const")]
    op_attrs = {nodes[k][0][0]: nodes[k][1] for k in nodes if k.startswith("op")}
    assert len(leaf_attrs) == 1 and len(const_attrs) == 2
    # leaves have another shape than ops; requires-grad leaves are filled, constants dashed
    assert "shape=ellipse" in leaf_attrs[0] and "filled" in leaf_attrs[0]
    assert all("shape=ellipse" in s and "dashed" in s and "filled" not in s for s in const_attrs)
    assert all("shape=box" in s for s in op_attrs.values())
    assert nodes["leaf0"][0] == ["leaf", "(2,) float64", "requires_grad"]
    # exactly one node is the output: the sum, double-bordered and labelled
    marked = [k for k, (lab, attrs) in nodes.items() if "peripheries=2" in attrs]
    assert marked == [k for k in nodes if nodes[k][0][0] == "sum"]
    assert nodes[marked[0]][0][-1] == "output"
    assert "peripheries" not in op_attrs["multiply"]


def test_show_constants_false_draws_only_the_tape() -> None:
    a = xg.asarray([1.0, 2.0], requires_grad=True)
    y = xg.sum(a * np.ones(2))
    dot = viz.to_dot(y, show_constants=False)
    assert not any(k.startswith("const") for k in _nodes(dot))
    assert len(_ops(dot)) == 2


def test_output_that_records_nothing() -> None:
    a = xg.asarray([1.0, 2.0])  # no requires_grad: nothing is recorded
    dot = viz.to_dot(xg.sum(a))
    nodes = _nodes(dot)
    assert list(nodes) == ["leaf0"]
    lab, attrs = nodes["leaf0"]
    assert lab == ["leaf", "() float64", "output"] and "dashed" in attrs and "peripheries=2" in attrs


def test_deterministic_ids() -> None:
    texts = set()
    for _ in range(3):
        _, loss = _mlp()
        texts.add(viz.to_dot(loss))
    assert len(texts) == 1
    dot = texts.pop()
    assert "0x" not in dot  # no memory addresses
    ops = list(_ops(dot))
    assert ops == [f"op{k}" for k in range(len(ops))]  # numbered in order, producers first
    pos = {k: i for i, k in enumerate(_nodes(dot))}
    assert all(pos[s] < pos[d] for s, d in _edges(dot) if s.startswith("op"))


def test_shared_subgraph_is_drawn_once() -> None:
    a = xg.asarray([1.0, 2.0], requires_grad=True)
    s = xg.sin(a)
    y = xg.sum(s * s + s)
    dot = viz.to_dot(y)
    ops = _ops(dot)
    assert [lab[0] for lab in ops.values()].count("sin") == 1
    assert len(ops) == _count_nodes(y) == 4
    sin_id = next(k for k, lab in ops.items() if lab[0] == "sin")
    assert sum(src == sin_id for src, _ in _edges(dot)) == 3
    assert sum(k.startswith("leaf") for k in _nodes(dot)) == 1


def test_multi_output_primitive_labels_its_outputs() -> None:
    a = xg.asarray(np.array([[2.0, 1.0], [1.0, 3.0]]), requires_grad=True)
    vals, vecs = xg.linalg.eigh(a)
    y = xg.sum(vals) + xg.sum(vecs * vecs)
    dot = viz.to_dot(y)
    eigh = next(lab for lab in _ops(dot).values() if lab[0] == "eigh")
    assert eigh[1:] == ["out 0: (2,) float64", "out 1: (2, 2) float64"]
    labels = {m["label"] for m in _EDGE.finditer(dot) if m["label"]}
    assert labels == {"out 0", "out 1"}
    # several outputs in one picture
    dot2 = viz.to_dot((vals, vecs))
    assert sum("peripheries=2" in attrs for _, attrs in _nodes(dot2).values()) == 1  # both come from eigh


def test_show_saved_and_after_backward() -> None:
    a = xg.asarray([1.0, 2.0], requires_grad=True)
    y = xg.sum(xg.exp(xg.sin(a)))
    before = viz.to_dot(y, show_saved=True)
    ops = {lab[0]: lab for lab in _ops(before).values()}
    assert "saved: x0 (2,) float64" in ops["sin"]  # sin keeps its input
    assert "saved: output" in ops["exp"]  # exp keeps its output
    y.backward()
    after = viz.to_dot(y, show_saved=True)
    # the structure survives backward; only the saved values are gone
    assert viz.to_dot(y) == viz.to_dot(y, show_saved=False)
    assert [lab[0] for lab in _ops(after).values()] == [lab[0] for lab in _ops(before).values()]
    assert _edges(after) == _edges(before)
    assert all("saved: freed" in lab for lab in _ops(after).values())


def test_names_from_params_and_escaping() -> None:
    a = xg.asarray([1.0], requires_grad=True)
    dot = viz.to_dot(xg.sum(a * 2.0), params={'w"eird\\': a}, graph_name="my graph", rankdir="LR")
    assert dot.startswith('digraph "my graph" {\n  graph [rankdir=LR];')
    assert 'label="w\\"eird\\\\\\n(1,) float64' in dot


def test_rejects_non_tensors() -> None:
    with pytest.raises(xg.XpgradTypeError, match=r"to_dot: expected a Tensor .* got ndarray"):
        viz.to_dot(np.ones(2))  # type: ignore[arg-type]
    with pytest.raises(xg.XpgradValueError, match="empty sequence"):
        viz.to_dot([])


def test_backends_label_their_dtype(backend: Any) -> None:
    a = xg.asarray(backend.asarray(np.array([1.0, 2.0], dtype=np.float32)), requires_grad=True)
    dot = viz.to_dot(xg.sum(xg.exp(a)))
    ops = {lab[0]: lab for lab in _ops(dot).values()}
    assert ops["exp"][1] == "(2,) float32"
    assert ops["sum"][1:] == ["() float32", "output"]


def test_importing_viz_does_not_import_graphviz() -> None:
    import subprocess

    code = "import xpgrad, xpgrad.viz, sys; print('graphviz' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_render_without_graphviz_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz -> ImportError
    a = xg.asarray([1.0], requires_grad=True)
    with pytest.raises(xg.BackendNotInstalledError, match=r'graphviz package is not installed.*pip install "xpgrad\[viz\]"') as e:
        viz.render(xg.sum(a), tmp_path / "g.svg")
    assert isinstance(e.value, ImportError)
    assert not (tmp_path / "g.svg").exists()


def test_render_without_dot_program(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if importlib.util.find_spec("graphviz") is None:
        pytest.skip("the graphviz Python package is not installed (pip install \"xpgrad[viz]\")")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    a = xg.asarray([1.0], requires_grad=True)
    with pytest.raises(xg.BackendNotInstalledError, match=r"Graphviz 'dot' program was not found.*xpgrad\[viz\]"):
        viz.render(xg.sum(a), tmp_path / "g.png")


def test_render_rejects_unknown_format(tmp_path: Path) -> None:
    a = xg.asarray([1.0], requires_grad=True)
    with pytest.raises(xg.XpgradValueError, match=r"render: cannot write format 'jpeg'; use one of svg, png, pdf"):
        viz.render(xg.sum(a), tmp_path / "g.jpeg")
    with pytest.raises(xg.XpgradValueError, match=r"cannot write format 'g'"):
        viz.render(xg.sum(a), tmp_path / "g")


_NO_RENDER = (
    "rendering needs the graphviz Python package and the Graphviz dot program "
    f"(package: {importlib.util.find_spec('graphviz') is not None}, dot: {shutil.which('dot') is not None})"
)


@pytest.mark.skipif(importlib.util.find_spec("graphviz") is None or shutil.which("dot") is None, reason=_NO_RENDER)
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_render_for_real(tmp_path: Path, fmt: str) -> None:
    model, loss = _mlp()
    out = viz.render(loss, tmp_path / f"mlp.{fmt}", params=dict(model.named_parameters()))
    assert out == tmp_path / f"mlp.{fmt}"
    data = out.read_bytes()
    if fmt == "svg":
        text = data.decode()
        # primitives are drawn, not the modules they were called from
        assert "<svg" in text and "0.weight" in text and "matmul" in text and "Linear" not in text
        assert text.count('class="node"') == len(_nodes(viz.to_dot(loss)))
    else:
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
    # format= overrides the suffix
    other = viz.render(loss, tmp_path / "graph.out", format="svg")
    assert other.read_bytes().lstrip().startswith(b"<?xml")


# ---------------------------------------------------------------- jitted programs
def _sgd_step_program() -> tuple[Any, Any]:
    w = xg.nn.Parameter(xg.asarray(np.ones((3, 2))))
    opt = xg.optim.SGD([w], lr=0.1, momentum=0.9)

    def step(w: Any, opt: Any, x: Any) -> Any:
        loss = xg.sum(xg.tanh(xg.matmul(x, w)) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    f = xg.jit(step)
    x = np.ones((4, 3))
    f(w, opt, x)  # the first step makes the momentum buffer; the program of the second is drawn
    return f.trace(w, opt, x), w


def test_draw_program_one_node_per_call() -> None:
    prog = xg.jit(lambda x, w: xg.sum(xg.exp(x @ w), axis=0)).trace(np.ones((1, 3)), np.ones((3, 2)))
    dot = viz.draw_program(prog)
    assert dot.startswith('digraph "<lambda>" {') and dot.endswith("}\n")
    ops = _ops(dot)
    assert len(ops) == len(prog) == len(prog.instructions) == 3
    assert [lab[0] for lab in ops.values()] == [ins.name for ins in prog.instructions]
    labels = [lab[1] for lab in ops.values()]  # each result: its name in the listing, its shape and dtype
    assert labels[0].endswith(": (1, 2) float64") and labels[2].endswith(": (2,) float64")
    assert [lab[1].split(":")[0] for lab in ops.values()] == [f"v{ins.outs[0]}" for ins in prog.instructions]
    for line in labels:
        assert f"{line.split(':')[0]} = " in str(prog)  # the same names as print(program)
    nodes = _nodes(dot)
    assert nodes["in0"][0] == ["a0", "(1, 3) float64", "input 0"] and nodes["in1"][0] == ["a1", "(3, 2) float64", "input 1"]
    # data flow: the inputs into the matmul, each call into the next; the sum is the output
    assert _edges(dot) == [("in0", "op0"), ("in1", "op0"), ("op0", "op1"), ("op1", "op2")]
    marked = [k for k, (_, attrs) in nodes.items() if "peripheries=2" in attrs]
    assert marked == ["op2"] and nodes["op2"][0][-1] == "output 0"
    edge_labels = [m["label"] for m in _EDGE.finditer(dot)]
    assert edge_labels == ["a0", "a1", labels[0].split(":")[0], labels[1].split(":")[0]]
    assert viz.draw_program(prog) == dot  # deterministic


def test_draw_program_marks_in_place_updates_of_a_training_step() -> None:
    prog, _ = _sgd_step_program()
    dot = viz.draw_program(prog, rankdir="LR", graph_name="sgd step")
    assert dot.startswith('digraph "sgd step" {\n  graph [rankdir=LR];')
    nodes = _nodes(dot)
    ops = {k: v for k, v in nodes.items() if k.startswith("op")}
    assert len(ops) == len(prog)
    in_place = {k: lab for k, (lab, attrs) in ops.items() if "dashed" in attrs}
    expected = [i for i, ins in enumerate(prog.instructions) if ins.writes is not None]
    assert len(expected) == 3  # momentum *= 0.9, momentum += grad, w -= lr * momentum
    assert sorted(int(k[2:]) for k in in_place) == expected
    for i in expected:
        name = f"a{prog.input_slots.index(prog.instructions[i].writes)}"
        assert in_place[f"op{i}"][-1] == f"{name}: (3, 2) float64, updated in place"
    # the momentum buffer's second update reads the first update's result, not the input
    first, second = expected[0], expected[1]
    assert (f"op{first}", f"op{second}") in _edges(dot)
    # outputs: the loss and the new gradient; the parameter's old gradient is an unused input
    marked = {k: lab[-1] for k, (lab, attrs) in nodes.items() if "peripheries=2" in attrs}
    assert sorted(marked.values()) == ["output 0", "output 1"]
    unused = [k for k, (lab, _) in nodes.items() if k.startswith("in") and lab[-1] == "unused"]
    assert len(unused) == 1
    assert all(src in nodes and dst in nodes for src, dst in _edges(dot))


def test_draw_program_constants_and_outputs_that_are_inputs() -> None:
    c = np.arange(3.0)  # a constant array baked into the program (a closure)
    prog = xg.jit(lambda x, y: (x * c, y)).trace(np.ones(3), np.ones(2))
    nodes = _nodes(viz.draw_program(prog))
    consts = [lab for k, (lab, _) in nodes.items() if k.startswith("const")]
    assert consts == [["const", "(3,) float64"]]
    assert nodes["in1"][0][-1] == "output 1" and "peripheries=2" in nodes["in1"][1]  # y is returned as it is
    assert not any(k.startswith("const") for k in _nodes(viz.draw_program(prog, show_constants=False)))


def test_draw_program_on_every_backend(backend: Any) -> None:
    x = backend.asarray(np.ones((2, 3), dtype=np.float32))
    prog = xg.jit(lambda x: xg.sum(xg.sin(x))).trace(x)
    dot = viz.draw_program(prog)
    ops = _ops(dot)
    assert len(ops) == len(prog) >= 2
    out = [lab for lab in ops.values() if lab[-1] == "output 0"]
    assert len(out) == 1 and out[0][1].endswith(": () float32")
    assert _nodes(dot)["in0"][0][1] == "(2, 3) float32"


def test_draw_program_rejects_others_and_to_dot_points_to_it() -> None:
    prog = xg.jit(lambda x: x + 1.0).trace(np.ones(2))
    with pytest.raises(xg.XpgradTypeError, match=r"draw_program: expected a Program .* got Tensor"):
        viz.draw_program(xg.asarray([1.0]))  # type: ignore[arg-type]
    with pytest.raises(xg.XpgradTypeError, match=r"to_dot: got a jitted Program; draw it with xg.viz.draw_program"):
        viz.to_dot(prog)  # type: ignore[arg-type]


def test_render_draws_a_program(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """render(program, path) hands draw_program's text to Graphviz (a stand-in here: no dot needed)."""
    prog = xg.jit(lambda x: xg.sum(x * x)).trace(np.ones(2))

    class Source:
        def __init__(self, text: str) -> None:
            self.text = text

        def pipe(self, format: str) -> bytes:  # noqa: A002 - graphviz's name
            return f"{format}:{self.text}".encode()

    fake = type(sys)("graphviz")
    fake.Source = Source  # type: ignore[attr-defined]
    fake.ExecutableNotFound = RuntimeError  # type: ignore[attr-defined]
    monkeypatch.setattr(viz, "_graphviz", lambda: fake)
    out = viz.render(prog, tmp_path / "prog.svg", rankdir="LR")
    assert out.read_text() == "svg:" + viz.draw_program(prog, rankdir="LR")
