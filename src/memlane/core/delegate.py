"""A façade's method that one of its parts carries, written once.

``remember = Delegated("_users", UserMemory.remember)`` in a class body makes
``manager.remember(...)`` call ``manager._users.remember(...)``: the same signature and
docstring (``help()``, ``inspect.signature``, IDEs and mypy see the part's), and no body to
keep in step. The async twin derives its methods from the same descriptors (``aio.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["Delegated"]

P = ParamSpec("P")
R = TypeVar("R")


class Delegated(Generic[P, R]):
    """``holder``'s ``method``, read through the façade (see the module docstring)."""

    def __init__(self, holder: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.holder = holder
        self.__wrapped__ = method
        self.__name__ = method.__name__
        self.__qualname__ = method.__qualname__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Delegated[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        bound: Callable[P, R] = getattr(getattr(obj, self.holder), self.__name__)
        return bound

    def __call__(self, obj: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        """``SessionManager.remember(manager, ...)``: called on the class, as a function."""
        bound: Callable[P, R] = self.__get__(obj)
        return bound(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.holder}.{self.__name__} of the façade>"
