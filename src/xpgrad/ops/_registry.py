"""The operation registry: one entry per operation, everything else derived from it.

An entry is one declaration in its chapter's module: the public function's signature
and docstring (with its example), written as a ``def`` whose body is the docstring,
under a decorator that holds the rest::

    op = Chapter("elementwise", module=__name__)

    @op.pointwise(d=lambda xp, x: xp.cos(x), fuzz="{N}.sin({a})")
    def sin(x: Array, /) -> Array:
        '''Elementwise sine. ... Examples: ...'''

From it the registry makes

- the primitive, with its forward (``xp.sin``, or ``fwd=``; binary functions cast both
  sides to the standard's result dtype first, see `promoting`);
- for a function declared by its derivative ``d``: the VJP ``g * conj(d)``, computed in
  place into ``g`` when the backward engine donates the buffer
  (`scale`), and the JVP ``t * d``, complex inputs included
  (PyTorch's convention, `conj`). Hand-written ``vjp=``/``jvp=``
  rules stay possible where a derived one would be slower or less accurate;
- its batching rule, kept on the primitive (``Primitive.batch``, which vmap reads): a
  pointwise function's is derived (they broadcast, so they batch for free); any other
  entry gives its own, ``batch=``, written beside the declaration;
- the public function, generated with the declared signature (the one line a hand-written
  wrapper has: ``return apply2(prim, x, _NOARG, NOKW)``), in the declaring module, so
  that its doctest runs and ``inspect`` and type checkers see the declaration;
- an `Op` in `REGISTRY`, with its facts (chapter, `Op.standard_name`: the standard's
  name or None beyond it, view, data-dependent shape), against which the chapter's
  ``__all__`` is checked (`Chapter.check_all`), and from which the coverage page
  (docs/gen_coverage.py), the rule tests' cases (``test=``, an `Inputs`, read by
  tests/_cases.py), the fuzz ops (``fuzz=`` templates, read by tests/_fuzz.py), the
  conformance calls (conformance/_calls.py) and the completeness tests are derived.

A declaration may also have a body (JAX's ``def sin(x): return sin_p.bind(x)``): one
that checks or normalizes its arguments, or builds a named tuple, and then binds the
primitive, declared with its rules beside it (`Chapter.primitive`)::

    fft_p = op.primitive("fft", fwd=..., vjp=(...,), jvp=..., batch=...)

    @op.entry(fft_p)
    def fft(x: Array, /, *, n: int | None = None, norm: str = "backward") -> Array:
        '''... Examples: ...'''
        return fft_p.bind(x, n=n, norm=_check_norm("fft", norm))

The body is the public function as written; a body-less ``@op.entry(p)`` is generated as
above. Pure queries (``finfo``, ``result_type``) are declared as such (`Chapter.query`: an
`Op` of kind ``"query"``, no primitive), functions that make an array from Python numbers
likewise (`Chapter.creation`), and a second name of an entry as an alias (`Chapter.alias`).

Adding an operation is one entry in its chapter's module: a pointwise one its
derivative, any other its rules and its batching rule, written beside it, and
``test=Inputs(params=...)`` for how tests draw its parameters. Only a parameter whose
valid values no `Inputs.params` kind says (``reshape``'s ``shape``) needs a hand-written
case in ``tests/cases/`` and conformance call (docs/adding-an-operation.md).
tests/test_registry.py adds throwaway entries, pointwise and not, and finds them everywhere.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .._dispatch import SCALAR_PRIMITIVES
from .._exceptions import XpgradRuntimeError, XpgradTypeError, XpgradValueError
from .._spec import CHAPTERS, FFT, LINALG
from ..autograd._batching_util import pointwise as _pointwise_rule
from ..autograd._core import _NOARG, COMPOSITES, DECLARED, PRIMITIVES, Primitive, apply, apply2, composite, declare, primitive
from ._common import conj, joint_linear_jvp, jvp_from_vjp, linear_jvp, promoting, scale, unscale

__all__ = ["REGISTRY", "Chapter", "Inputs", "Op", "over", "prim_of"]

F = TypeVar("F", bound=Callable[..., Any])
Domain = tuple[float, float] | Sequence[tuple[float, float]]


class over:  # noqa: N801 - reads as math in a declaration: d=over(lambda xp, x: x)
    """A derivative given by its reciprocal: ``d = 1 / f``. The rules divide by ``f``
    (``g / conj(f)``, ``t / f``) instead of multiplying by a reciprocal: one operation, and
    exact where ``f`` is (``log``: ``d = over(x)``).

    Examples:
        >>> from xpgrad.ops._registry import over
        >>> over(lambda xp, x: x).f.__code__.co_varnames
        ('xp', 'x')
    """

    __slots__ = ("f",)

    def __init__(self, f: Callable[..., Any]) -> None:
        self.f = f


@dataclass(frozen=True)
class Inputs:
    """How property tests draw valid inputs for an operation (read by tests/cases, which
    makes the rule tests' case from it: forward against the backend, gradients against
    float64 central differences and ``torch.func``, first and second order).

    Attributes:
        domain: (low, high) of the values, or one pair per argument; keep away from
            singular points.
        complex: also draw complex inputs.
        shapes: "broadcast" (shapes that broadcast together) or "same".
        away: points the real parts of the values keep at least 0.1 from (kinks:
            ``abs`` at 0).
        apart: keep the two arguments of a binary function at least 0.1 apart (ties:
            ``maximum``).
        torch: PyTorch's name where it differs (``torch.special.`` names included);
            "" when PyTorch has no counterpart; or a function ``(torch, *tensors)`` that
            computes it by a formula (``special.rel_entr``).
        order2: also check second order.
        rtol: tolerance of the finite-difference check.
        params: for a function with parameters (a `Chapter.function` entry), each
            keyword parameter's kind, drawn for argument 0's shape: ``"axis"`` (an axis,
            possibly negative), ``"axis?"`` (None or an axis), ``"axes?"`` (None, an axis
            or a tuple of distinct axes, as a reduction takes), ``"bool"``.
        min_dims: the fewest dimensions of the arguments.

    Examples:
        >>> from xpgrad.ops._registry import Inputs
        >>> Inputs(domain=(0.1, 3.0)).complex
        True
        >>> Inputs(params={"axis": "axes?", "keepdims": "bool"}).params["axis"]
        'axes?'
    """

    domain: Domain = (-2.0, 2.0)
    complex: bool = True
    shapes: str = "broadcast"
    away: tuple[float, ...] = ()
    apart: bool = False
    torch: str | Callable[..., Any] | None = None
    order2: bool = True
    rtol: float = 1e-5
    params: dict[str, str] | None = None
    min_dims: int = 0

    def __post_init__(self) -> None:
        bad = {k: v for k, v in (self.params or {}).items() if v not in _PARAM_KINDS}
        if bad:
            msg = f"Inputs: params kinds are {sorted(_PARAM_KINDS)}; got {bad}"
            raise XpgradValueError(msg)


#: the kinds of parameter `Inputs.params` can draw
_PARAM_KINDS = frozenset({"axis", "axis?", "axes?", "bool"})


@dataclass(frozen=True, eq=False)
class Op:
    """One registered operation.

    Attributes:
        name: the registry key and the path in the namespace (``sin``, ``special.erf``).
        chapter: the standard's chapter (``elementwise``), or the extension's
            (``special``).
        fn: the public function.
        prim: its primitive; None for a query or a creation from Python numbers.
        nargs: how many positional arguments may be arrays.
        batch: how its batching rule is made: ``"pointwise"`` (derived), or None (written
            beside the declaration, ``batch=``). The rule itself is ``prim.batch``.
        test: how property tests draw its inputs; None where its tests are written by hand
            (tests/cases) or it has no gradient to test.
        fuzz: the differential fuzzer's template, ``{N}`` the namespace and ``{a}``,
            ``{b}`` the operands (a pair: xpgrad's and PyTorch's spelling); None: not fuzzed.
        module: the module whose namespace holds ``fn``.
        d: the declared derivatives, one per argument (see `Chapter.pointwise`);
            None where the rules are written by hand.
        kind: ``"pointwise"``, ``"function"`` (generated from its declaration, or its
            declared body binding its primitive), ``"query"`` (no primitive: about dtypes
            or shapes, returns no array), ``"creation"`` (no primitive: an array from
            Python numbers), ``"composite"`` (no primitive: composed of other entries,
            differentiable through them) or ``"alias"`` (a second name of ``alias_of``).
        alias_of: for an alias, the registry name of the entry it names.
    """

    name: str
    chapter: str
    fn: Callable[..., Any]
    prim: Primitive | None
    nargs: int
    batch: str | None
    test: Inputs | None
    fuzz: str | tuple[str, str] | None
    module: str
    d: tuple[Any, ...] | None = None
    kind: str = "function"
    alias_of: str | None = None

    @property
    def public_name(self) -> str:
        """The attribute name in its module (``erf`` for ``special.erf``)."""
        return self.name.rsplit(".", 1)[-1]

    @property
    def standard_name(self) -> str | None:
        """Its name in the array API standard (``sin``, ``linalg.inv``, ``fft.fftshift``), or
        None for a function beyond it (``special.erf``, a plugin's): the standard-or-extension
        fact, read from src/xpgrad/_spec.py by the entry's chapter.

        Examples:
            >>> from xpgrad.ops._registry import REGISTRY
            >>> REGISTRY["sin"].standard_name, REGISTRY["special.erf"].standard_name
            ('sin', None)
        """
        n = self.public_name
        if self.chapter in ("linalg", "fft"):
            return f"{self.chapter}.{n}" if n in (LINALG if self.chapter == "linalg" else FFT) else None
        return n if n in CHAPTERS.get(self.chapter, ()) else None


#: name -> Op, in declaration order
REGISTRY: dict[str, Op] = {}
#: an entry's public function -> its primitive (`prim_of`)
_PRIMS: dict[Callable[..., Any], Primitive] = {}


def prim_of(fn: Callable[..., Any]) -> Primitive:
    """The primitive of an entry's public function: how rules reference a primitive as an
    object (JAX's ``sin_p``), not by name.

    Examples:
        >>> import xpgrad as xg
        >>> from xpgrad.ops._registry import prim_of
        >>> prim_of(xg.reshape)
        <primitive reshape>
    """
    p = _PRIMS.get(fn)
    if p is None:
        msg = f"prim_of: {fn!r} is not the public function of a registry entry"
        raise XpgradValueError(msg)
    return p


# ---------------------------------------------------------------- derived rules
def _params(f: Callable[..., Any], what: str) -> tuple[str, ...]:
    """The names a derivative reads, after ``xp``: ``ans`` and argument names."""
    names = tuple(inspect.signature(f).parameters)
    if not names or names[0] != "xp":
        msg = f"{what}: a derivative takes xp first, then the names it reads (ans, argument names); got {names}"
        raise XpgradTypeError(msg)
    return names[1:]


def _picker(f: Callable[..., Any], names: tuple[str, ...], args: tuple[str, ...], what: str) -> Callable[[Any, Any, tuple[Any, ...]], Any]:
    """``dval(xp, ans, args)``: ``f`` called with the values it names."""
    idx = []
    for n in names:
        if n == "ans":
            idx.append(-1)
        elif n in args:
            idx.append(args.index(n))
        else:
            msg = f"{what}: a derivative reads {n!r}, which is neither 'ans' nor an argument of {args}"
            raise XpgradTypeError(msg)
    if len(idx) == 1:
        i = idx[0]
        return (lambda xp, ans, a: f(xp, ans)) if i < 0 else (lambda xp, ans, a: f(xp, a[i]))
    if len(idx) == 2:
        i, j = idx
        return lambda xp, ans, a: f(xp, ans if i < 0 else a[i], ans if j < 0 else a[j])
    return lambda xp, ans, a: f(xp, *[ans if i < 0 else a[i] for i in idx])


def _derived(spec: Any, args: tuple[str, ...], what: str) -> tuple[Any, Any, set[str]]:
    """(VJP rule, JVP rule, names read) of one argument's derivative ``spec``."""
    if spec is None:
        return None, None, set()
    if isinstance(spec, bool) or (not isinstance(spec, (int, float, complex, over)) and not callable(spec)):
        msg = f"{what}: a derivative is a number, a function of (xp, names...) or over(function); got {spec!r}"
        raise XpgradTypeError(msg)
    if isinstance(spec, (int, float, complex)):
        c = spec
        if c == 1:
            return (lambda xp, g, ans, *a: g), (lambda xp, t, ans, *a: t), set()
        if c == -1:
            return (lambda xp, g, ans, *a: -g), (lambda xp, t, ans, *a: -t), set()
        cc = c.conjugate()
        return (lambda xp, g, ans, *a: g * cc), (lambda xp, t, ans, *a: t * c), set()
    f = spec.f if isinstance(spec, over) else spec
    names = _params(f, what)
    dval = _picker(f, names, args, what)
    vjp: Callable[..., Any]
    jvp: Callable[..., Any]
    if isinstance(spec, over):
        vjp = lambda xp, g, ans, *a: unscale(xp, g, conj(xp, dval(xp, ans, a)))
        jvp = lambda xp, t, ans, *a: t / dval(xp, ans, a)
    elif names == args[:1]:  # (the common cases without the general picker: d of x, d of ans)
        vjp = lambda xp, g, ans, x, *a: scale(xp, g, conj(xp, f(xp, x)))
        jvp = lambda xp, t, ans, x, *a: t * f(xp, x)
    elif names == ("ans",):
        vjp = lambda xp, g, ans, *a: scale(xp, g, conj(xp, f(xp, ans)))
        jvp = lambda xp, t, ans, *a: t * f(xp, ans)
    elif len(args) == 2 and names == args[1:]:  # (a binary function's d of its second argument)
        vjp = lambda xp, g, ans, x1, x2: scale(xp, g, conj(xp, f(xp, x2)))
        jvp = lambda xp, t, ans, x1, x2: t * f(xp, x2)
    else:
        vjp = lambda xp, g, ans, *a: scale(xp, g, conj(xp, dval(xp, ans, a)))
        jvp = lambda xp, t, ans, *a: t * dval(xp, ans, a)
    return vjp, jvp, set(names)


# ---------------------------------------------------------------- generated functions
def _empty() -> None:
    """A docstring and nothing else."""


def _body_is_docstring(fn: Callable[..., Any]) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_code == _empty.__code__.co_code


def _signature_parts(decl: Callable[..., Any], name: str, arrays: int | str | None,
                     norms: dict[str, Callable[[Any], Any]]) -> tuple[list[str], list[str], list[str]]:
    """``decl``'s parameters as source: the generated signature's parts, the primitive's array
    arguments and its keyword entries (``'axis': axis``, through ``_n_<name>`` where normalised)."""
    sig = inspect.signature(decl)
    parts: list[str] = []
    call: list[str] = []
    kw: list[str] = []
    posonly = star = False
    for i, p in enumerate(sig.parameters.values()):
        if not p.name.isidentifier() or keyword.iskeyword(p.name) or p.name.startswith("_"):
            msg = f"registry: {name}: bad parameter name {p.name!r}"
            raise XpgradValueError(msg)
        if p.kind is p.VAR_KEYWORD:
            msg = f"registry: {name}: declarations take no **{p.name}"
            raise XpgradTypeError(msg)
        if posonly and p.kind is not p.POSITIONAL_ONLY:
            parts.append("/")
            posonly = False
        if p.kind is p.POSITIONAL_ONLY:
            posonly = True
        if p.kind is p.VAR_POSITIONAL:
            if arrays != "*":
                msg = f"registry: {name}: *{p.name} needs arrays='*'"
                raise XpgradTypeError(msg)
            parts.append(f"*{p.name}")
            call.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name)
        is_array = (arrays is None or (isinstance(arrays, int) and i < arrays)) and p.kind is not p.KEYWORD_ONLY
        if arrays == "seq" and i == 0:
            call.append(f"*{p.name}")
        elif is_array:
            call.append(p.name)
        else:
            kw.append(f"{p.name!r}: " + (f"_n_{p.name}({p.name})" if p.name in norms else p.name))
    if posonly:
        parts.append("/")
    unknown = set(norms) - set(sig.parameters)
    if unknown:
        msg = f"registry: {name}: params= names {sorted(unknown)}, which are not parameters"
        raise XpgradTypeError(msg)
    return parts, call, kw


def _call_body(prim: Primitive, call: list[str], kw: list[str]) -> str:
    """The generated function's one line: the cheapest ``apply`` that takes ``prim``'s arguments."""
    kwd = "{" + ", ".join(kw) + "}" if kw else "_NOKW"
    if not prim.fast:  # (a view or multi-output primitive: apply1 and apply2 would only pass it on to apply)
        return f"_apply(_prim, ({', '.join(call)},), {kwd})"
    if len(call) == 1 and not call[0].startswith("*"):  # (apply2 itself: apply1 would be one more frame)
        return f"_apply2(_prim, {call[0]}, _NOARG, {kwd})"
    if len(call) == 2 and not any(c.startswith("*") for c in call):
        return f"_apply2(_prim, {call[0]}, {call[1]}, {kwd})"
    return f"_apply(_prim, ({', '.join(call)},), {kwd})"


def _generate(decl: Callable[..., Any], name: str, prim: Primitive, arrays: int | str | None = None,
              params: dict[str, Callable[[Any], Any]] | None = None) -> Callable[..., Any]:
    """The public function: ``decl``'s signature, docstring and module, calling ``prim``.

    ``arrays``: how many leading positional parameters are the primitive's arguments
    (None: all of them; ``"seq"``: the first parameter is a sequence of arrays, as in
    ``concat``; ``"*"``: the ``*arrays`` parameter). The other parameters are passed to
    the primitive as keywords, each through ``params[name]`` where given (``tuple``).

    Built as source and executed with the declaring module's globals (as ``dataclasses``
    builds ``__init__``): a plain function, as fast as a hand-written one, whose doctest
    ``--doctest-modules`` finds in that module.
    """
    norms = dict(params or {})
    parts, call, kw = _signature_parts(decl, name, arrays, norms)
    body = _call_body(prim, call, kw)
    bind = "".join(f"    _n_{n} = _norm[{n!r}]\n" for n in norms)  # (closure cells: no dict lookup per call)
    src = (f"def _make(_prim, _apply, _apply2, _NOARG, _NOKW, _norm):\n{bind}"
           f"    def {decl.__name__}({', '.join(parts)}):\n"
           f"        return {body}\n"
           f"    return {decl.__name__}\n")
    scope: dict[str, Any] = {}
    exec(compile(src, f"<xpgrad registry: {name}>", "exec"), decl.__globals__, scope)
    fn: Any = scope["_make"](prim, apply, apply2, _NOARG, {}, norms)
    fn.__defaults__ = decl.__defaults__
    fn.__kwdefaults__ = decl.__kwdefaults__
    return functools.update_wrapper(fn, decl)  # (doc, module, names; __wrapped__: inspect reads the declaration)


# ---------------------------------------------------------------- declarations
_DEFAULT: Any = object()


class Chapter:
    """The declarations of one module: ``op = Chapter("elementwise", module=__name__)``.

    Args:
        chapter: the standard's chapter (or the extension's name: ``special``).
        module: the module whose namespace holds the public functions (``__name__``).
        prefix: prepended to a function's name for its registry and primitive name
            (``"special."``: ``special.erf``).
        extra: the module's public names that are not entries (checked by
            `check_all`).

    Examples:
        >>> from xpgrad.ops._registry import REGISTRY
        >>> REGISTRY["sin"].chapter, REGISTRY["sin"].batch
        ('elementwise', 'pointwise')
    """

    def __init__(self, chapter: str, *, module: str, prefix: str = "", extra: Sequence[str] = ()) -> None:
        self.chapter = chapter
        self.module = module
        self.prefix = prefix
        #: public names of the module that are not registry entries (yet)
        self.extra = tuple(extra)

    def check_all(self, names: Sequence[str]) -> None:
        """Check the module's literal ``__all__`` (which type checkers read) against its
        entries (those of every ``Chapter`` of the module: ``xpgrad.linalg``'s functions and
        its aliases): an entry missing from it, or a name there that no entry declares and
        ``extra`` does not name, fails the import naming it.

        Examples:
            >>> from xpgrad.ops import elementwise
            >>> elementwise.op.check_all(elementwise.__all__ + ["sine"])
            Traceback (most recent call last):
            ...
            xpgrad._exceptions.XpgradRuntimeError: elementwise: __all__ lists ['sine'], which no entry declares
        """
        declared = {op.public_name for op in REGISTRY.values() if op.module == self.module}
        listed = set(names)
        if declared - listed:
            msg = f"{self.module.rsplit('.', 1)[-1]}: add {sorted(declared - listed)} to __all__ (declared, not listed)"
            raise XpgradRuntimeError(msg)
        if listed - declared - set(self.extra):
            msg = f"{self.module.rsplit('.', 1)[-1]}: __all__ lists {sorted(listed - declared - set(self.extra))}, which no entry declares"
            raise XpgradRuntimeError(msg)

    def pointwise(
        self,
        *,
        d: Any = None,
        vjp: Sequence[Any] | None = None,
        jvp: Sequence[Any] | None = None,
        fwd: Callable[..., Any] | None = None,
        save: tuple[int, ...] | None = None,
        save_ans: bool | None = None,
        nondiff: bool = False,
        zero_grad: bool = False,
        view: bool = False,
        chapter: str | None = None,
        test: Inputs | None = _DEFAULT,
        fuzz: str | tuple[str, str] | None = None,
    ) -> Callable[[F], F]:
        """Declare a pointwise (elementwise, broadcasting) function.

        Args:
            d: its derivative: for one argument a function ``d(xp, *names)`` of ``ans``
                and the arguments it names (``lambda xp, x: xp.cos(x)``,
                ``lambda xp, ans: ans``), a number (``1``, ``-1``), or ``over(f)`` for
                ``1 / f``; for several, a tuple with one per argument (None: not
                differentiable there). The VJP is ``g * conj(d)``, the JVP ``t * d``, and
                what the rules read is saved (nothing else).
            vjp: hand-written VJP rules instead, one per argument (``rule(xp, g, ans,
                *args)``); then ``save``/``save_ans`` say what they read.
            jvp: hand-written JVP rules; by default those of ``vjp`` conjugated
                (`jvp_from_vjp`).
            fwd: the forward ``fwd(xp, *args)``; default ``xp.<name>``, binary
                functions cast to the standard's result dtype first.
            nondiff: boolean or integer output: no gradient.
            zero_grad: floating output with a zero derivative almost everywhere.
            view: the output may be a view of the argument on some library.
            chapter: the standard's chapter where it differs from the module's (``where``).
            test: how property tests draw its inputs (default `Inputs`\\ () for a
                differentiable function, None otherwise); None: tests written by hand.
            fuzz: the differential fuzzer's template (see `Op`).
        """

        def register(decl: F) -> F:
            name, what = self._check(decl)
            args = tuple(inspect.signature(decl).parameters)
            n = len(args)
            vjps, jvps, saves, ans_read = _rules(what, args, d, vjp, jvp, nondiff or zero_grad)
            forward = fwd if fwd is not None else _forward(name, n)
            if n == 2:  # binary: both sides cast to the standard's result dtype first
                forward = promoting(forward)
            prim = primitive(
                name, forward,
                save=save if (save is not None or vjp is not None) else tuple(i for i, a in enumerate(args) if a in saves),
                save_ans=bool(save_ans) if save_ans is not None else ans_read,
                nondiff=nondiff, zero_grad=zero_grad, view=view, chapter=chapter or self.chapter,
                batch=_pointwise_rule,
            )
            if n >= 2:  # (its arguments may be Python scalars: NumPy scalars become ones)
                SCALAR_PRIMITIVES.add(prim)
            if vjps:
                prim.defvjp(*vjps)
                prim.defjvp(*jvps)
            public = _generate(decl, name, prim)
            diff = not (nondiff or zero_grad)
            entry = Op(name=name, chapter=chapter or self.chapter, fn=public, prim=prim, nargs=n, batch="pointwise",
                       test=(Inputs() if diff else None) if test is _DEFAULT else test, fuzz=fuzz, module=self.module,
                       d=None if d is None else (d if isinstance(d, tuple) else (d,)), kind="pointwise")
            self._enter(entry, decl)
            return public  # type: ignore[return-value]

        return register

    def function(
        self,
        *,
        fwd: Callable[..., Any],
        batch: Callable[..., Any] | None = None,
        vjp: Sequence[Any] | None = None,
        jvp: Sequence[Any] | str | None = None,
        vjp_rest: Any = None,
        jvp_rest: Any = None,
        arrays: int | str = 1,
        params: dict[str, Callable[[Any], Any]] | None = None,
        chapter: str | None = None,
        test: Inputs | None = None,
        fuzz: str | tuple[str, str] | None = None,
        **opts: Any,
    ) -> Callable[[F], F]:
        """Declare any other operation: its forward and rules given as they are.

        Args:
            fwd: the forward ``fwd(xp, *arrays, **params)``.
            batch: its batching rule ``batch(prim, xs, bs, kw, K)`` (see
                `xpgrad.autograd._batched`; shared ones in ``xpgrad.autograd._batching_util``),
                written beside the declaration. None: vmap refuses it (give
                ``unbatchable=`` the reason where its output's shape depends on the data).
            vjp: one VJP rule per array argument (``rule(xp, g, ans, *arrays, **params)``,
                None: not differentiable there); ``vjp_rest`` for variadic ones beyond.
            jvp: the JVP rules (see [`xpgrad.autograd._core.Primitive.defjvp`][xpgrad.autograd.Primitive.defjvp]);
                ``jvp_rest`` likewise. ``"linear"``: linear in argument 0, the JVP is the
                function of the tangent; ``"joint_linear"``: linear in all its arrays
                together (`linear_jvp`, ``joint_linear_jvp``).
            arrays: how many leading positional parameters are array arguments;
                ``"seq"``: the first is a sequence of them (``concat``); ``"*"``: the
                ``*arrays`` parameter. The others reach ``fwd`` and the rules as keywords.
            params: per parameter, what it goes through first (``{"shape": tuple}``).
            chapter: the standard's chapter where it differs from the module's.
            test: how property tests draw its inputs, its parameters included
                (`Inputs.params`); None: its rule tests are written in
                ``tests/cases/<chapter>.py``, where its parameters need strategies of their own.
            fuzz: the differential fuzzer's template (see `Op`).
            opts: the primitive's options (``save``, ``save_ans``, ``nondiff``,
                ``zero_grad``, ``view``, ``multi``, ``check_dtype``,
                ``data_dependent_shape``, ``unbatchable``: see
                [`Primitive`][xpgrad.autograd.Primitive]).

        Examples:
            >>> from xpgrad.ops._registry import REGISTRY
            >>> REGISTRY["flip"].prim.view, REGISTRY["flip"].batch, REGISTRY["flip"].prim.batch.__name__
            (True, None, 'along_axes')
        """

        def register(decl: F) -> F:
            name, _ = self._check(decl)
            prim = self._primitive(name, fwd, batch, vjp, jvp, vjp_rest, jvp_rest, chapter, opts)
            public = _generate(decl, name, prim, arrays, params)
            n = -1 if isinstance(arrays, str) else arrays
            self._enter(Op(name=name, chapter=chapter or self.chapter, fn=public, prim=prim, nargs=n, batch=None,
                           test=test, fuzz=fuzz, module=self.module), decl)
            return public  # type: ignore[return-value]

        return register

    def primitive(
        self,
        name: str,
        *,
        fwd: Callable[..., Any],
        batch: Callable[..., Any] | None = None,
        vjp: Sequence[Any] | None = None,
        jvp: Sequence[Any] | str | None = None,
        vjp_rest: Any = None,
        jvp_rest: Any = None,
        chapter: str | None = None,
        **opts: Any,
    ) -> Primitive:
        """Declare a primitive with its rules beside it (JAX's ``sin_p`` and its
        ``defjvp``/batching rule), for an `entry` whose body binds it.

        Args:
            name: its name after the chapter's prefix (``"logsumexp"``: ``special.logsumexp``).
            fwd, batch, vjp, jvp, vjp_rest, jvp_rest, chapter, opts: as for `function`.

        Returns:
            The primitive, registered (``PRIMITIVES``) and its rules defined (see `entry`
            for an example).
        """
        full = self.prefix + name
        if full in REGISTRY or full in PRIMITIVES:
            msg = f"registry: {full}: an operation named {full!r} is already registered"
            raise XpgradValueError(msg)
        return self._primitive(full, fwd, batch, vjp, jvp, vjp_rest, jvp_rest, chapter, opts)

    def _primitive(self, name: str, fwd: Callable[..., Any], batch: Callable[..., Any] | None, vjp: Sequence[Any] | None,
                   jvp: Sequence[Any] | str | None, vjp_rest: Any, jvp_rest: Any, chapter: str | None,
                   opts: dict[str, Any]) -> Primitive:
        prim = primitive(name, fwd, chapter=chapter or self.chapter, batch=batch, **opts)
        if vjp is not None or vjp_rest is not None:
            prim.defvjp(*(vjp or ()), rest=vjp_rest)
        if jvp == "linear":
            prim.defjvp(linear_jvp(prim))
        elif jvp == "joint_linear":
            prim.defjvp(rest=joint_linear_jvp(prim))
        elif isinstance(jvp, str):
            PRIMITIVES.pop(name, None)
            msg = f"registry: {name}: jvp= is rules, 'linear' or 'joint_linear'; got {jvp!r}"
            raise XpgradValueError(msg)
        elif jvp is not None or jvp_rest is not None:
            prim.defjvp(*(jvp or ()), rest=jvp_rest)
        return prim

    def entry(
        self,
        prim: Primitive,
        *,
        arrays: int | str = 1,
        params: dict[str, Callable[[Any], Any]] | None = None,
        nargs: int | None = None,
        chapter: str | None = None,
        test: Inputs | None = None,
        fuzz: str | tuple[str, str] | None = None,
    ) -> Callable[[F], F]:
        """Declare the public function of a primitive (see `primitive`).

        With a body, the declaration is the public function as written: it checks or
        normalizes its arguments and returns ``prim.bind(...)`` (or builds its result from
        it). Without one (its docstring only), it is generated as by `function`
        (``arrays``, ``params``).

        Args:
            prim: the primitive it binds.
            arrays: for a generated function, as for `function`.
            params: for a generated function, as for `function`.
            nargs: how many positional arguments may be arrays (default: ``arrays``).
            chapter: the standard's chapter where it differs from the module's.
            test: how property tests draw its inputs (`Inputs`); None: written by hand.
            fuzz: the differential fuzzer's template (see `Op`).

        Examples:
            >>> import xpgrad as xg
            >>> from xpgrad.ops._registry import REGISTRY, Chapter, remove
            >>> op = Chapter("manipulation", module="xpgrad_example")
            >>> scale_p = op.primitive("scale_example", fwd=lambda xp, x, *, k: k * x, jvp="linear",
            ...                        vjp=(lambda xp, g, ans, x, *, k: k * g,), save=())
            >>> @op.entry(scale_p)
            ... def scale_example(x, /, *, k=2):
            ...     '''k * x, k made a float first. Examples: (a doctest's throwaway)'''
            ...     return scale_p.bind(x, k=float(k))
            >>> scale_example(xg.asarray([1.0, 2.0]), k=3), REGISTRY["scale_example"].prim
            (Tensor([3., 6.], dtype=float64, device=cpu), <primitive scale_example>)
            >>> remove("scale_example")
        """
        if not isinstance(prim, Primitive):
            msg = f"registry: entry takes the primitive it binds (op.primitive(...)), got {prim!r}"
            raise XpgradTypeError(msg)

        def register(decl: F) -> F:
            name, _ = self._check(decl, body=True, prim=prim)
            if PRIMITIVES.get(prim.name) is not prim:
                msg = f"registry: {name}: its primitive {prim.name!r} is not registered (declare it with op.primitive)"
                raise XpgradValueError(msg)
            if _body_is_docstring(decl):
                public: Any = _generate(decl, name, prim, arrays, params)
            elif arrays != 1 or params is not None:
                msg = f"registry: {name}: arrays= and params= shape a generated function; a body passes its arguments itself"
                raise XpgradTypeError(msg)
            else:
                public = decl
            n = nargs if nargs is not None else -1 if isinstance(arrays, str) else arrays
            self._enter(Op(name=name, chapter=chapter or self.chapter, fn=public, prim=prim, nargs=n, batch=None,
                           test=test, fuzz=fuzz, module=self.module), decl)
            return public  # type: ignore[no-any-return]

        return register

    def query(self, *, reason: str = "a query about dtypes or shapes: returns no array") -> Callable[[F], F]:
        """Declare a pure query (``finfo``, ``result_type``): its body computes the answer
        (a dtype, a shape, a bool), no primitive, no gradient (``reason`` says why, on the
        coverage page). An `Op` of kind ``"query"``.

        Examples:
            >>> from xpgrad.ops._registry import REGISTRY, Chapter, remove
            >>> op = Chapter("data_type", module="xpgrad_example")
            >>> @op.query()
            ... def bits_example(dtype):
            ...     '''The bits of a dtype. Examples: (a doctest's throwaway)'''
            ...     return int(dtype.itemsize) * 8
            >>> REGISTRY["bits_example"].kind, REGISTRY["bits_example"].prim
            ('query', None)
            >>> remove("bits_example")
        """
        return self._unprimitive("query", reason)

    def creation(self, *, reason: str = "creates an array from Python numbers: no array input") -> Callable[[F], F]:
        """Declare a function that makes an array from Python numbers (``fftfreq``): its body
        creates it on the policy's namespace and device, no primitive (no array input: nothing
        to differentiate or batch), no gradient (``reason``). An `Op` of kind ``"creation"``.

        Examples:
            >>> import xpgrad as xg
            >>> from xpgrad.ops._registry import REGISTRY, Chapter, remove
            >>> op = Chapter("creation", module="xpgrad_example")
            >>> @op.creation()
            ... def halves_example(n, /):
            ...     '''0, 1/2, 1, ... (n of them). Examples: (a doctest's throwaway)'''
            ...     return xg.arange(n) / 2
            >>> halves_example(3), REGISTRY["halves_example"].kind, REGISTRY["halves_example"].prim
            (Tensor([0. , 0.5, 1. ], dtype=float64, device=cpu), 'creation', None)
            >>> remove("halves_example")
        """
        return self._unprimitive("creation", reason)

    def composite(self, *, of: str) -> Callable[[F], F]:
        """Declare a function composed of other entries (``linalg.matrix_norm``): its body is the
        public function, differentiable, batched and traced through the entries it calls (``of``
        names them, on the coverage page), no primitive of its own. An `Op` of kind ``"composite"``.

        Examples:
            >>> import xpgrad as xg
            >>> from xpgrad.ops._registry import REGISTRY, Chapter, remove
            >>> op = Chapter("statistical", module="xpgrad_example")
            >>> @op.composite(of="sum, multiply")
            ... def sum_of_squares_example(x, /):
            ...     '''The sum of the squares. Examples: (a doctest's throwaway)'''
            ...     return xg.sum(x * x)
            >>> xg.grad(sum_of_squares_example)(xg.asarray([1.0, 2.0])), REGISTRY["sum_of_squares_example"].kind
            (Tensor([2., 4.], dtype=float64, device=cpu), 'composite')
            >>> remove("sum_of_squares_example")
        """
        return self._unprimitive("composite", of)

    def _unprimitive(self, kind: str, reason: str) -> Callable[[F], F]:
        """A query, creation or composite entry: its body is the function; ``reason`` is why it
        has no gradient (a query, a creation) or what it is composed of (a composite)."""
        def register(decl: F) -> F:
            name, _ = self._check(decl, body=True)
            if _body_is_docstring(decl):
                msg = f"registry: {name}: a {kind}'s body computes its answer"
                raise XpgradTypeError(msg)
            ps = inspect.signature(decl).parameters.values()
            n = -1 if any(p.kind is p.VAR_POSITIONAL for p in ps) else sum(p.kind is not p.KEYWORD_ONLY for p in ps)
            if kind == "composite":
                composite(name, of=reason)
            else:
                declare(name, reason)
            self._enter(Op(name=name, chapter=self.chapter, fn=decl, prim=None, nargs=n, batch=None, test=None,
                           fuzz=None, module=self.module, kind=kind), decl)
            return decl

        return register

    def alias(self, name: str, fn: F) -> F:
        """Declare ``name`` as a second name of the entry whose public function is ``fn``
        (``psi = op.alias("psi", digamma)``): an `Op` of kind ``"alias"``, the same
        function and primitive; rule tests, fuzz and the coverage page count the entry once.
        Its chapter is the declaring one's: ``linalg.matmul`` is the standard's
        ``linalg.matmul`` (`Op.standard_name`), an alias of ``matmul``.

        Examples:
            >>> import xpgrad as xg
            >>> from xpgrad.ops._registry import REGISTRY, Chapter, remove
            >>> sine = Chapter("elementwise", module="xpgrad_example").alias("sine_example", xg.sin)
            >>> REGISTRY["sine_example"].alias_of, sine is xg.sin
            ('sin', True)
            >>> remove("sine_example")
        """
        full = self.prefix + name
        target = next((op for op in REGISTRY.values() if op.fn is fn and op.kind != "alias"), None)
        if target is None:
            msg = f"registry: alias {full}: {fn!r} is not the public function of a registry entry"
            raise XpgradValueError(msg)
        if full in REGISTRY or full in PRIMITIVES:
            msg = f"registry: alias {full}: an operation named {full!r} is already registered"
            raise XpgradValueError(msg)
        entry = Op(name=full, chapter=self.chapter, fn=fn, prim=target.prim, nargs=target.nargs, batch=None,
                   test=None, fuzz=None, module=self.module, kind="alias", alias_of=target.name)
        REGISTRY[full] = entry
        _install(entry, declared_in=sys._getframe(1).f_globals.get("__name__", ""))
        return fn

    def _check(self, decl: Callable[..., Any], *, body: bool = False, prim: Primitive | None = None) -> tuple[str, str]:
        name = self.prefix + decl.__name__
        what = f"registry: {name}"
        if not body and not _body_is_docstring(decl):
            msg = (f"{what}: the body of a declaration is its docstring (the registry writes the function); "
                   "to give it a body, declare op.primitive(...) and the function with @op.entry(prim)")
            raise XpgradTypeError(msg)
        if "Examples:" not in (decl.__doc__ or ""):
            msg = f"{what}: the docstring needs an Examples: section with a doctest"
            raise XpgradValueError(msg)
        if name in REGISTRY or (name in PRIMITIVES and PRIMITIVES[name] is not prim):
            msg = f"{what}: an operation named {name!r} is already registered"
            raise XpgradValueError(msg)
        return name, what

    def _enter(self, entry: Op, decl: Callable[..., Any]) -> None:
        REGISTRY[entry.name] = entry
        if entry.prim is not None:
            _PRIMS[entry.fn] = entry.prim
        _install(entry, declared_in=decl.__module__)


def _rules(what: str, args: tuple[str, ...], d: Any, vjp: Sequence[Any] | None, jvp: Sequence[Any] | None,
           const: bool) -> tuple[tuple[Any, ...], tuple[Any, ...], set[str], bool]:
    """(VJP rules, JVP rules, argument names read, whether ``ans`` is read)."""
    if const:
        if d is not None or vjp is not None:
            msg = f"{what}: a function without a gradient takes no derivative"
            raise XpgradTypeError(msg)
        return (), (), set(), False
    if (d is None) == (vjp is None):
        msg = f"{what}: give the derivative d= or the rules vjp=, one of them"
        raise XpgradTypeError(msg)
    if vjp is not None:
        jv = tuple(jvp) if jvp is not None else tuple(None if r is None else jvp_from_vjp(r) for r in vjp)
        return tuple(vjp), jv, set(), False
    specs = d if isinstance(d, tuple) else (d,)
    if len(specs) != len(args):
        msg = f"{what}: {len(args)} arguments, {len(specs)} derivatives"
        raise XpgradTypeError(msg)
    vjps, jvps, read = [], [], set()
    for s in specs:
        v, j, names = _derived(s, args, what)
        vjps.append(v)
        jvps.append(j)
        read |= names
    if jvp is not None:
        jvps = list(jvp)
    return tuple(vjps), tuple(jvps), read - {"ans"}, "ans" in read


def _forward(name: str, n: int) -> Callable[..., Any]:
    """``xp.<name>(...)`` (a dotted name: ``xp.special.erf``)."""
    path = name.split(".")
    if not all(p.isidentifier() and not keyword.iskeyword(p) for p in path):
        msg = f"registry: bad name {name!r}"
        raise XpgradValueError(msg)
    params = ", ".join(f"x{i}" for i in range(n))
    scope: dict[str, Any] = {}
    exec(f"def forward(xp, {params}):\n    return xp.{name}({params})\n", {}, scope)
    f = scope["forward"]
    f.__qualname__ = f"forward of {name}"
    f.__module__ = __name__
    return f  # type: ignore[no-any-return]


def _install(op: Op, *, declared_in: str) -> None:
    """Put the public function of an entry declared outside its module (a plugin, a test)
    into that module's namespace and ``__all__``, and into ``xpgrad``'s for the standard's
    chapters: the entry is then everywhere a declared one is."""
    if declared_in == op.module:
        return  # (the def statement binds it; ``__all__`` lists it, checked by check_all)
    for mod_name in _homes(op):
        mod = sys.modules.get(mod_name)
        if mod is None:
            continue
        setattr(mod, op.public_name, op.fn)
        names = getattr(mod, "__all__", None)
        if isinstance(names, list) and op.public_name not in names:
            names.append(op.public_name)


def _homes(op: Op) -> tuple[str, ...]:
    """The modules whose namespace holds an entry's public function: its module, and for the
    standard's chapters (``xpgrad.ops.*``) the array namespace and the package too."""
    return (op.module, "xpgrad._namespace", "xpgrad") if op.module.startswith("xpgrad.ops.") else (op.module,)


def remove(name: str) -> None:
    """Remove an entry and what was derived from it (for a test's throwaway entry).

    Examples:
        >>> from xpgrad.ops._registry import REGISTRY, remove
        >>> remove("no_such_op")
        Traceback (most recent call last):
        ...
        xpgrad._exceptions.XpgradValueError: registry.remove: no operation named 'no_such_op'
    """
    op = REGISTRY.get(name)
    if op is None:
        msg = f"registry.remove: no operation named {name!r}"
        raise XpgradValueError(msg)
    del REGISTRY[name]
    if op.kind != "alias":  # (an alias's function and primitive stay its entry's)
        _PRIMS.pop(op.fn, None)
        if op.prim is not None:
            PRIMITIVES.pop(op.prim.name, None)
    if op.prim is None:
        DECLARED.pop(name, None)
        COMPOSITES.pop(name, None)
    for mod_name in _homes(op):
        mod = sys.modules.get(mod_name)
        if mod is not None and getattr(mod, op.public_name, None) is op.fn:
            delattr(mod, op.public_name)
            names = getattr(mod, "__all__", None)
            if isinstance(names, list) and op.public_name in names:
                names.remove(op.public_name)
