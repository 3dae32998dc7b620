"""Containers: ``Sequential``, ``ModuleList`` and ``ModuleDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from .._exceptions import XpgradTypeError
from .module import Module

__all__ = ["ModuleDict", "ModuleList", "Sequential"]


def _index(i: Any, n: int, who: str) -> int:
    if not isinstance(i, int) or isinstance(i, bool):
        msg = f"{who}: indices must be integers or slices, got {type(i).__name__}"
        raise XpgradTypeError(msg)
    if not -n <= i < n:
        msg = f"{who}: index {i} is out of range for {n} modules"
        raise IndexError(msg)
    return i % n


class Sequential(Module):
    """Modules called in order, each on the previous one's output.

    Built from modules (named ``"0"``, ``"1"``, ...) or from one ordered mapping of names.

    Examples:
        >>> import xpgrad as xg
        >>> net = xg.nn.Sequential(xg.nn.Linear(4, 8), xg.nn.ReLU(), xg.nn.Linear(8, 1))
        >>> net
        Sequential(
          (0): Linear(in_features=4, out_features=8, bias=True)
          (1): ReLU()
          (2): Linear(in_features=8, out_features=1, bias=True)
        )
        >>> net(xg.zeros((2, 4), dtype=xg.float32)).shape
        (2, 1)
    """

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], Mapping):
            for name, mod in args[0].items():
                self.add_module(name, mod)
        else:
            for i, mod in enumerate(args):
                self.add_module(str(i), mod)

    def forward(self, x: Any) -> Any:
        for mod in self._modules.values():
            x = mod(x)
        return x

    @overload
    def __getitem__(self, i: int) -> Module: ...
    @overload
    def __getitem__(self, i: slice) -> Sequential: ...

    def __getitem__(self, i: Any) -> Any:
        items = list(self._modules.items())
        if isinstance(i, slice):
            return Sequential(OrderedDict(items[i]))
        return items[_index(i, len(items), "Sequential")][1]

    def __setitem__(self, i: int, mod: Module) -> None:
        keys = list(self._modules)
        self.add_module(keys[_index(i, len(keys), "Sequential")], mod)

    def __delitem__(self, i: int | slice) -> None:
        keys = list(self._modules)
        doomed = keys[i] if isinstance(i, slice) else [keys[_index(i, len(keys), "Sequential")]]
        for k in doomed:
            del self._modules[k]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, mod: Module) -> Sequential:
        """Add a module at the end; returns self."""
        self.add_module(str(len(self)), mod)
        return self


class ModuleList(Module):
    """A list of modules, registered so that their parameters are found.

    Examples:
        >>> import xpgrad as xg
        >>> layers = xg.nn.ModuleList([xg.nn.Linear(2, 2) for _ in range(3)])
        >>> len(layers), len(list(layers.parameters()))
        (3, 6)
    """

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _renumber(self, mods: list[Module]) -> None:
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __getitem__(self, i: Any) -> Any:
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(mods[i])
        return mods[_index(i, len(mods), "ModuleList")]

    def __setitem__(self, i: int, mod: Module) -> None:
        self.add_module(str(_index(i, len(self), "ModuleList")), mod)

    def __delitem__(self, i: int | slice) -> None:
        mods = list(self._modules.values())
        if isinstance(i, slice):
            del mods[i]
        else:
            del mods[_index(i, len(mods), "ModuleList")]
        self._renumber(mods)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, mod: Module) -> ModuleList:
        self.add_module(str(len(self)), mod)
        return self

    def extend(self, mods: Iterable[Module]) -> ModuleList:
        for m in mods:
            self.append(m)
        return self

    def insert(self, index: int, mod: Module) -> None:
        mods = list(self._modules.values())
        mods.insert(index, mod)
        self._renumber(mods)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        msg = "ModuleList: a ModuleList has no forward(); iterate over it in the parent's forward"
        raise XpgradTypeError(msg)


class ModuleDict(Module):
    """A dict of modules (insertion ordered), registered under their keys.

    Examples:
        >>> import xpgrad as xg
        >>> heads = xg.nn.ModuleDict({"a": xg.nn.Linear(2, 1), "b": xg.nn.Tanh()})
        >>> list(heads.keys()), "a" in heads
        (['a', 'b'], True)
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]  # type: ignore[return-value]

    def __setitem__(self, key: str, mod: Module) -> None:
        self.add_module(key, mod)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Any:
        return self._modules.keys()

    def values(self) -> Any:
        return self._modules.values()

    def items(self) -> Any:
        return self._modules.items()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)  # type: ignore[return-value]

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for k, m in pairs:
            self.add_module(k, m)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        msg = "ModuleDict: a ModuleDict has no forward(); index it in the parent's forward"
        raise XpgradTypeError(msg)
