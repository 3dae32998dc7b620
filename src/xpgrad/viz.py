"""Pictures of the recorded graph and of jitted programs: Graphviz DOT text, and SVG/PNG files through Graphviz.

[`to_dot`][xpgrad.viz.to_dot] walks the tape backwards from a Tensor, the same way ``backward()``
does (through each node's parents), and writes one DOT node per recorded primitive,
labelled with its name and its output's shape and dtype. It needs nothing beyond
xpgrad. [`render`][xpgrad.viz.render] hands that text to the Graphviz ``dot`` program through the
``graphviz`` Python package (``pip install "xpgrad[viz]"`` plus Graphviz itself);
importing this module does not import ``graphviz``.

[`draw_program`][xpgrad.viz.draw_program] does the same for a [`Program`][xpgrad.Program], the straight-line
program that [`xpgrad.jit`][xpgrad.jit] traces (``f.trace(*args)``): one node per backend call,
edges from the values it reads, in-place updates marked. ``render`` draws either.

The graph keeps its structure after ``backward()`` (only the saved values are
freed, and with them the shapes that only they recorded), so it can be drawn before
or after. Ids (``op0``, ``leaf0``, ``const0``...)
are numbered in the order the walk meets them, so the same computation gives the
same text in every run.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._dtypes import dtype_name
from ._exceptions import BackendNotInstalledError, XpgradTypeError, XpgradValueError
from ._jit import Program
from ._tracing import Tracer
from .autograd import ArgMeta, Tensor

__all__ = ["draw_program", "render", "to_dot"]

_EXTRA_HINT = 'pip install "xpgrad[viz]"'
_FORMATS = ("svg", "png", "pdf")

# the look of each kind of DOT node; tests and docs refer to these attributes
_OP = 'shape=box, style="rounded,filled", fillcolor="#fff7d6"'
_OUTPUT = 'shape=box, style="rounded,filled,bold", fillcolor="#b8e0a8", peripheries=2'
_LEAF_GRAD = 'shape=ellipse, style="filled,bold", fillcolor="#a6cee3"'
_CONST = 'shape=ellipse, style=dashed, color="#808080", fontcolor="#606060"'
_INPUT = 'shape=ellipse, style=filled, fillcolor="#a6cee3"'
_INPLACE = 'shape=box, style="rounded,filled,dashed", fillcolor="#fdd0a2"'


def _fmt(shape: Any, dtype: Any) -> str:
    dims = ", ".join("?" if (d is None or d != d) else str(int(d)) for d in shape)
    return f"({dims}{',' if len(shape) == 1 else ''}) {dtype_name(dtype)}"


def _quote(text: str) -> str:
    """A DOT string; ``\\n`` in ``text`` (a real newline) becomes a centred line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _roots(tensor: Any) -> list[Tensor]:
    if isinstance(tensor, Program):
        msg = "to_dot: got a jitted Program; draw it with xg.viz.draw_program(program) (or xg.viz.render(program, path))"
        raise XpgradTypeError(msg)
    ts = list(tensor) if isinstance(tensor, Sequence) and not isinstance(tensor, Tensor) else [tensor]
    for t in ts:
        if not isinstance(t, Tensor):
            msg = f"to_dot: expected a Tensor or a sequence of Tensors, got {type(t).__name__}"
            raise XpgradTypeError(msg)
    if not ts:
        msg = "to_dot: expected a Tensor or a sequence of Tensors, got an empty sequence"
        raise XpgradValueError(msg)
    return ts


def to_dot(
    tensor: Tensor | Sequence[Tensor],
    *,
    show_saved: bool = False,
    show_constants: bool = True,
    params: Mapping[str, Tensor] | None = None,
    graph_name: str = "xpgrad",
    rankdir: str = "TB",
) -> str:
    """The graph recorded for ``tensor`` as Graphviz DOT text.

    Data flows from the inputs (top) to ``tensor`` (bottom). Each recorded primitive
    is a rounded box with its name and its output's shape and dtype; the box that
    produced ``tensor`` is green, double-bordered and says ``output``. Leaves that
    require grad are blue ellipses (every box's output requires grad too: that is why
    it was recorded); constant array inputs are dashed grey ellipses; Python scalars
    are not drawn.

    Args:
        tensor: the output, or a sequence of outputs drawn in one picture.
        show_saved: add a line per box naming what it keeps for backward
            (``saved: x0 (3,) float64, output``), or ``saved: freed`` once a
            ``backward()`` without ``retain_graph`` has released it.
        show_constants: draw constant array inputs (a batch of data, targets).
        params: names for leaves, e.g. ``dict(model.named_parameters())``;
            unnamed leaves are labelled ``leaf``.
        graph_name: the DOT graph's name.
        rankdir: Graphviz's ``rankdir`` (``"TB"``, ``"LR"``, ...).

    Returns:
        The DOT source, ready for ``dot -Tsvg`` or [`render`][xpgrad.viz.render].

    Raises:
        XpgradTypeError: ``tensor`` is not a Tensor (nor a sequence of them).

    Examples:
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
        >>> y = xg.sum(xg.sin(x) * 3.0)
        >>> print(xg.viz.to_dot(y, params={"x": x}), end="")
        digraph xpgrad {
          graph [rankdir=TB];
          node [fontname="Helvetica", fontsize=10];
          leaf0 [label="x\\n(2,) float64\\nrequires_grad", shape=ellipse, style="filled,bold", fillcolor="#a6cee3"];
          op0 [label="sin\\n(2,) float64", shape=box, style="rounded,filled", fillcolor="#fff7d6"];
          op1 [label="multiply\\n(2,) float64", shape=box, style="rounded,filled", fillcolor="#fff7d6"];
          op2 [label="sum\\n() float64\\noutput", shape=box, style="rounded,filled,bold", fillcolor="#b8e0a8", peripheries=2];
          leaf0 -> op0;
          op0 -> op1;
          op1 -> op2;
        }
    """
    roots = _roots(tensor)
    names = {id(t): name for name, t in (params or {}).items()}
    order = _producers_first([t.grad_fn for t in roots if t.grad_fn is not None])
    node_id = {id(n): f"op{k}" for k, n in enumerate(order)}
    outs: dict[int, dict[int, tuple[Any, Any]]] = {id(n): {} for n in order}  # output index -> (shape, dtype)
    leaf_id: dict[int, str] = {}
    leaves: list[Tensor] = []
    consts: list[tuple[str, tuple[Any, Any] | None]] = []
    edges: list[tuple[str, str, str]] = []

    def leaf(t: Tensor) -> str:
        if id(t) not in leaf_id:
            leaf_id[id(t)] = f"leaf{len(leaves)}"
            leaves.append(t)
        return leaf_id[id(t)]

    for n in order:
        me = node_id[id(n)]
        saved = n.saved
        for i, p in enumerate(n.parents):
            # the argument's shape and dtype, from what the node keeps of it (the data or its
            # ArgMeta); unknown once backward has freed the data
            m: Any = saved[i] if saved is not None else None
            meta = (m.shape, m.dtype) if hasattr(m, "shape") and hasattr(m, "dtype") else None
            if p is None:  # a constant: a Tensor without requires_grad, a raw array or a scalar
                if show_constants and getattr(n, "arrays", 0) >> i & 1:  # (scalars are not drawn)
                    cid = f"const{len(consts)}"
                    consts.append((cid, meta))
                    edges.append((cid, me, ""))
            elif isinstance(p, Tensor):
                edges.append((leaf(p), me, ""))
            else:  # the Node that produced argument i, output pidx[i]: its shape is this argument's
                j = n.pidx[i]
                if meta is not None:
                    outs[id(p)].setdefault(j, meta)
                edges.append((node_id[id(p)], me, f"out {j}" if p.n_out > 1 else ""))
    out_ids: set[str] = set()
    for t in roots:
        n = t.grad_fn
        if n is None:
            out_ids.add(leaf(t))
        else:
            out_ids.add(node_id[id(n)])
            outs[id(n)].setdefault(getattr(t, "_oidx", 0), (t.data.shape, t.data.dtype))

    lines: list[str] = []
    lines.append(f"digraph {_quote(graph_name) if not graph_name.isidentifier() else graph_name} {{")
    lines.append(f"  graph [rankdir={rankdir}];")
    lines.append('  node [fontname="Helvetica", fontsize=10];')
    for lid, t in zip(leaf_id.values(), leaves):
        label = [names.get(id(t), "leaf"), _fmt(t.data.shape, t.data.dtype)]
        if t.requires_grad:
            label.append("requires_grad")
        style = _LEAF_GRAD if t.requires_grad else _CONST
        if lid in out_ids:
            label.append("output")
            style += ", peripheries=2"
        lines.append(f"  {lid} [label={_quote(chr(10).join(label))}, {style}];")
    for cid, cmeta in consts:  # (a constant's shape is unknown once backward freed what kept it)
        clabel = "const" if cmeta is None else "const" + chr(10) + _fmt(*cmeta)
        lines.append(f"  {cid} [label={_quote(clabel)}, {_CONST}];")
    for n in order:
        nid = node_id[id(n)]
        label = [n.prim.name]
        known = outs[id(n)]
        if n.n_out == 1:
            label.extend(_fmt(*known[j]) for j in sorted(known))
        else:
            label.extend(f"out {j}: {_fmt(*known[j])}" for j in sorted(known))
        if show_saved:
            label.append(_saved_line(n))
        if nid in out_ids:
            label.append("output")
        lines.append(f"  {nid} [label={_quote(chr(10).join(label))}, {_OUTPUT if nid in out_ids else _OP}];")
    for src, dst, lab in edges:
        lines.append(f"  {src} -> {dst}{f' [label={_quote(lab)}]' if lab else ''};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def draw_program(program: Program, *, show_constants: bool = True, graph_name: str | None = None,
                 rankdir: str = "TB") -> str:
    """A jitted [`Program`][xpgrad.Program] as Graphviz DOT text.

    Data flows from the program's inputs (top) to its outputs (bottom), as in
    [`to_dot`][xpgrad.viz.to_dot]. Each backend call is a rounded box with its name (``numpy.matmul``)
    and, for each result, the value's name in the listing (``print(program)``) with its
    shape and dtype; a result written into a dead buffer says so (``into v10``). A call
    that updates a value in place (``p -= q`` of an optimizer step) is an orange dashed
    box saying ``a1: (3, 2) float64, updated in place``; calls that read the value after
    it are drawn from that box. Inputs are blue ellipses (``a0``... with their shapes; one that no call
    reads says ``unused``), constant arrays baked into the program are dashed grey
    ellipses, Python scalars are not drawn. The boxes (or inputs) that give the program's
    results are green and double-bordered, labelled ``output 0``, ``output 1``... Each
    edge is labelled with the value it carries.

    Args:
        program: what ``xg.jit(f).trace(*args)`` returns.
        show_constants: draw constant array inputs.
        graph_name: the DOT graph's name (default: the program's name).
        rankdir: Graphviz's ``rankdir`` (``"TB"``, ``"LR"``, ...).

    Returns:
        The DOT source, ready for ``dot -Tsvg`` or [`render`][xpgrad.viz.render].

    Raises:
        XpgradTypeError: ``program`` is not a Program.

    Examples:
        >>> import numpy as np, xpgrad as xg
        >>> f = xg.jit(lambda x, y: xg.sum(xg.sin(x) * y))
        >>> prog = f.trace(np.ones(3), np.ones(3))
        >>> print(xg.viz.draw_program(prog), end="")
        digraph "<lambda>" {
          graph [rankdir=TB];
          node [fontname="Helvetica", fontsize=10];
          in0 [label="a0\\n(3,) float64\\ninput 0", shape=ellipse, style=filled, fillcolor="#a6cee3"];
          in1 [label="a1\\n(3,) float64\\ninput 1", shape=ellipse, style=filled, fillcolor="#a6cee3"];
          op0 [label="numpy.sin\\nv2: (3,) float64", shape=box, style="rounded,filled", fillcolor="#fff7d6"];
          op1 [label="multiply\\nv3: (3,) float64 (into v2)", shape=box, style="rounded,filled", fillcolor="#fff7d6"];
          op2 [label="numpy.sum\\nv4: () float64\\noutput 0", shape=box, style="rounded,filled,bold", fillcolor="#b8e0a8", peripheries=2];
          in0 -> op0 [label="a0"];
          op0 -> op1 [label="v2"];
          in1 -> op1 [label="a1"];
          op1 -> op2 [label="v3"];
        }
    """
    if not isinstance(program, Program):
        msg = f"draw_program: expected a Program (what xg.jit(f).trace(*args) returns), got {type(program).__name__}"
        raise XpgradTypeError(msg)
    meta = program._meta
    name = program._name
    outs: dict[int, list[int]] = {}  # slot -> the output positions that return it
    const_outs: list[tuple[int, Any]] = []
    for k, o in enumerate(program.output_slots):
        if isinstance(o, int):
            outs.setdefault(o, []).append(k)
        else:
            const_outs.append((k, o[1]))
    writer: dict[int, str] = {s: f"in{k}" for k, s in enumerate(program.input_slots)}  # slot -> the node that gave its value
    read: set[int] = set()
    nodes: list[tuple[str, list[str], str]] = []
    edges: list[tuple[str, str, str]] = []
    for i, ins in enumerate(program.instructions):
        me = f"op{i}"
        seen: set[int] = set()
        for a in _program_args((ins.args, ins.kwargs)):
            if type(a) is Tracer:
                if a._i not in seen:
                    seen.add(a._i)
                    read.add(a._i)
                    edges.append((writer[a._i], me, name(a._i)))
            elif show_constants:
                cid = f"const{sum(n[0].startswith('const') for n in nodes)}"
                nodes.append((cid, ["const", _fmt(a.shape, a.dtype)], _CONST))
                edges.append((cid, me, ""))
        label = [ins.name]
        into = program._out_into.get(i)
        for s in ins.outs:
            label.append(f"{name(s)}: {_fmt(*meta[s])}" + (f" (into {name(into)})" if into is not None else ""))
            writer[s] = me
        style = _OP
        if ins.writes is not None:
            label.append(f"{name(ins.writes)}: {_fmt(*meta[ins.writes])}, updated in place")
            writer[ins.writes] = me
            style = _INPLACE
        nodes.append((me, label, style))
    # the outputs: what the last writer of each returned value gave
    marks: dict[str, list[int]] = {}
    for s, ks in outs.items():
        marks.setdefault(writer[s], []).extend(ks)
    lines = [f"digraph {_graph_id(graph_name if graph_name is not None else program.name)} {{"]
    lines.append(f"  graph [rankdir={rankdir}];")
    lines.append('  node [fontname="Helvetica", fontsize=10];')
    for k, s in enumerate(program.input_slots):
        nid = f"in{k}"
        label = [name(s), _fmt(*meta[s]), f"input {k}"]
        if s not in read:
            label.append("unused")
        lines.append(_node(nid, label, _INPUT, marks.get(nid)))
    for k, v in const_outs:
        text = ["const", _fmt(v.shape, v.dtype)] if hasattr(v, "shape") and hasattr(v, "dtype") else ["constant " + repr(v)[:40]]
        lines.append(_node(f"out{k}", text, _CONST, [k]))
    for nid, label, style in nodes:
        lines.append(_node(nid, label, style, marks.get(nid)))
    for src, dst, lab in edges:
        lines.append(f"  {src} -> {dst}{f' [label={_quote(lab)}]' if lab else ''};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _graph_id(name: str) -> str:
    return name if name.isidentifier() else _quote(name)


def _node(nid: str, label: list[str], style: str, outputs: list[int] | None) -> str:
    if outputs:
        label = [*label, *(f"output {k}" for k in sorted(outputs))]
        style = _OUTPUT if style in (_OP, _INPLACE) else style + ", peripheries=2"
    return f"  {nid} [label={_quote(chr(10).join(label))}, {style}];"


def _program_args(obj: Any) -> list[Any]:
    """The traced values and constant arrays among a call's arguments, in order (nested ones too)."""
    found: list[Any] = []
    stack = [obj]
    while stack:
        o = stack.pop()
        t = type(o)
        if t is Tracer:
            found.append(o)
        elif t is tuple or t is list:
            stack.extend(reversed(o))
        elif t is dict:
            stack.extend(reversed(list(o.values())))
        elif t is slice:
            stack.extend((o.step, o.stop, o.start))
        elif not isinstance(o, (str, bytes, int, float, complex, type)) and hasattr(o, "shape") and hasattr(o, "dtype"):
            found.append(o)
    return found


def _producers_first(roots: list[Any]) -> list[Any]:
    """The Nodes reachable from ``roots``, each after the Nodes it reads (parents in argument order)."""
    order: list[Any] = []
    seen: set[int] = set()
    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Any, int]] = [(root, 0)]
        while stack:  # iterative post-order: graphs of any depth
            node, i = stack[-1]
            parents = node.parents
            while i < len(parents):
                p = parents[i]
                i += 1
                if p is not None and not isinstance(p, Tensor) and id(p) not in seen:
                    seen.add(id(p))
                    stack[-1] = (node, i)
                    stack.append((p, 0))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _saved_line(n: Any) -> str:
    """What a node keeps for its rules: its saved arguments (``x0``...) and ``output``."""
    if getattr(n, "freed", False):
        return "saved: freed"
    kept = []
    for i, d in enumerate(n.saved or ()):
        if d is not None and hasattr(d, "shape") and type(d) is not ArgMeta:  # (ArgMeta: not data)
            kept.append(f"x{i} {_fmt(d.shape, d.dtype)}")
    if getattr(n, "ans", None) is not None:
        kept.append("output")
    return "saved: " + (", ".join(kept) if kept else "nothing")


def _graphviz() -> Any:
    try:
        return importlib.import_module("graphviz")
    except ImportError as e:
        msg = f"render: the graphviz package is not installed ({e}); install the viz extra with: {_EXTRA_HINT}"
        raise BackendNotInstalledError(msg) from e


def render(tensor: Tensor | Sequence[Tensor] | Program, path: str | Path, *, format: str | None = None,  # noqa: A002 - Graphviz's own name
           **options: Any) -> Path:
    """Draw the graph recorded for ``tensor``, or a jitted Program, into an SVG, PNG or PDF file.

    Needs the ``graphviz`` Python package (the ``xpgrad[viz]`` extra) and the
    Graphviz ``dot`` program on ``PATH``.

    Args:
        tensor: the output (or a sequence of outputs), as for [`to_dot`][xpgrad.viz.to_dot]; or a
            [`Program`][xpgrad.Program] (``xg.jit(f).trace(*args)``), as for [`draw_program`][xpgrad.viz.draw_program].
        path: the file to write.
        format: ``"svg"``, ``"png"`` or ``"pdf"``; None takes it from ``path``'s suffix.
        **options: passed to [`to_dot`][xpgrad.viz.to_dot] (``show_saved``, ``params``, ...) or [`draw_program`][xpgrad.viz.draw_program].

    Returns:
        ``path``, as a `Path`.

    Raises:
        BackendNotInstalledError: the ``graphviz`` package or the ``dot`` program is
            missing (an ``ImportError``; the message names ``xpgrad[viz]``).
        XpgradValueError: the format is not one of svg, png, pdf.

    Examples:
        >>> import tempfile, pathlib
        >>> import xpgrad as xg
        >>> x = xg.asarray([1.0, 2.0], requires_grad=True)
        >>> y = xg.sum(x * x)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     try:
        ...         out = xg.viz.render(y, pathlib.Path(d) / "graph.svg")
        ...         ok = "<svg" in out.read_text()
        ...     except xg.BackendNotInstalledError as e:  # no graphviz here
        ...         ok = "xpgrad[viz]" in str(e)
        >>> ok
        True
    """
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in _FORMATS:
        msg = f"render: cannot write format {fmt or path.name!r}; use one of {', '.join(_FORMATS)} (format= or the file suffix)"
        raise XpgradValueError(msg)
    source = draw_program(tensor, **options) if isinstance(tensor, Program) else to_dot(tensor, **options)
    graphviz = _graphviz()
    try:
        data = graphviz.Source(source).pipe(format=fmt)
    except graphviz.ExecutableNotFound as e:
        msg = (
            f"render: the Graphviz 'dot' program was not found on PATH ({e}); install Graphviz "
            f"(https://graphviz.org/download/) as well as the viz extra ({_EXTRA_HINT})"
        )
        raise BackendNotInstalledError(msg) from e
    path.write_bytes(data)
    return path
