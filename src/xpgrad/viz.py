"""Pictures of the recorded graph: Graphviz DOT text, and SVG/PNG files through Graphviz.

:func:`to_dot` walks the tape backwards from a Tensor, the same way ``backward()``
does (through each node's parents), and writes one DOT node per recorded primitive,
labelled with its name and its output's shape and dtype. It needs nothing beyond
xpgrad. :func:`render` hands that text to the Graphviz ``dot`` program through the
``graphviz`` Python package (``pip install "xpgrad[viz]"`` plus Graphviz itself);
importing this module does not import ``graphviz``.

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
from .autograd import ArgMeta, Tensor

__all__ = ["render", "to_dot"]

_EXTRA_HINT = 'pip install "xpgrad[viz]"'
_FORMATS = ("svg", "png", "pdf")

# the look of each kind of DOT node; tests and docs refer to these attributes
_OP = 'shape=box, style="rounded,filled", fillcolor="#fff7d6"'
_OUTPUT = 'shape=box, style="rounded,filled,bold", fillcolor="#b8e0a8", peripheries=2'
_LEAF_GRAD = 'shape=ellipse, style="filled,bold", fillcolor="#a6cee3"'
_CONST = 'shape=ellipse, style=dashed, color="#808080", fontcolor="#606060"'


def _fmt(shape: Any, dtype: Any) -> str:
    dims = ", ".join("?" if (d is None or d != d) else str(int(d)) for d in shape)
    return f"({dims}{',' if len(shape) == 1 else ''}) {dtype_name(dtype)}"


def _quote(text: str) -> str:
    """A DOT string; ``\\n`` in ``text`` (a real newline) becomes a centred line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _roots(tensor: Any) -> list[Tensor]:
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
        The DOT source, ready for ``dot -Tsvg`` or :func:`render`.

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


def render(tensor: Tensor | Sequence[Tensor], path: str | Path, *, format: str | None = None,  # noqa: A002 - Graphviz's own name
           **options: Any) -> Path:
    """Draw the graph recorded for ``tensor`` into an SVG, PNG or PDF file.

    Needs the ``graphviz`` Python package (the ``xpgrad[viz]`` extra) and the
    Graphviz ``dot`` program on ``PATH``.

    Args:
        tensor: the output (or a sequence of outputs), as for :func:`to_dot`.
        path: the file to write.
        format: ``"svg"``, ``"png"`` or ``"pdf"``; None takes it from ``path``'s suffix.
        **options: passed to :func:`to_dot` (``show_saved``, ``params``, ...).

    Returns:
        ``path``, as a :class:`~pathlib.Path`.

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
    source = to_dot(tensor, **options)
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
