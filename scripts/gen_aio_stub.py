"""Write src/memlane/aio.pyi: AsyncSessionManager's methods as type checkers and IDEs see them.

The methods themselves are derived from SessionManager's at import time (memlane/aio.py);
this stub declares the same, generated from the same source, so that mypy and IDEs know each
method's parameters, its awaitable result and its docstring. `--check` only compares
(tests/test_aio_stub.py runs it). Run after changing SessionManager's public methods:

    .venv/bin/python scripts/gen_aio_stub.py
"""

from __future__ import annotations

import builtins
import inspect
import re
import subprocess
import sys
import textwrap
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

from memlane.aio import derived_methods
from memlane.manager import SessionManager

TARGET = Path(__file__).resolve().parent.parent / "src" / "memlane" / "aio.pyi"
#: a name, or a dotted one (``os.PathLike``): only its head is imported
NAME = re.compile(r"(?<![.\w])([A-Za-z_][A-Za-z0-9_]*)")


def _function(value: Any) -> Any:
    """The function behind a method or a delegated method (its module resolves its names)."""
    return inspect.unwrap(value)


def _defining_module(name: str, obj: Any, home: ModuleType) -> str:
    """Where ``name`` is defined: a class's or function's own module, else (an alias such as
    ``SearchMode = Literal[...]``) the memlane module whose source assigns it."""
    own = getattr(obj, "__module__", None)
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and own and obj.__name__ == name:
        return str(own)
    for module in [home, *(m for n, m in sorted(sys.modules.items()) if n.startswith("memlane"))]:
        if vars(module).get(name) is obj:
            source = inspect.getsource(module)
            if re.search(rf"^{name}\b\s*(:[^=]*)?=", source, re.MULTILINE):
                return module.__name__
    raise LookupError(f"cannot tell where {name!r} is defined")


def _imports(annotations: list[tuple[str, ModuleType]]) -> list[str]:
    wanted: dict[str, set[str]] = {}
    modules: set[str] = set()
    for text, home in annotations:
        for name in set(NAME.findall(re.sub(r"'[^']*'|\"[^\"]*\"", "", text))):
            if name in ("None", "True", "False") or hasattr(builtins, name):
                continue
            obj = vars(home).get(name)
            if obj is None:
                raise LookupError(f"{name!r} in {text!r} is not a name of {home.__name__}")
            if inspect.ismodule(obj):
                modules.add(obj.__name__)
                continue
            if name in vars(typing) and getattr(typing, name) is obj:
                wanted.setdefault("typing", set()).add(name)
                continue
            wanted.setdefault(_defining_module(name, obj, home), set()).add(name)
    lines = [f"import {m}" for m in sorted(modules)]
    for module in sorted(wanted):
        lines.append(f"from {module} import {', '.join(sorted(wanted[module]))}")
    return lines


def _params(signature: inspect.Signature) -> str:
    parts: list[str] = []
    for p in signature.parameters.values():
        text = p.name if p.annotation is p.empty else f"{p.name}: {p.annotation}"
        if p.kind is p.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + text
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    # keyword-only and positional-only markers, as the signature has them
    out, star_done, kinds = [], False, [p.kind for p in signature.parameters.values()]
    for i, (text, kind) in enumerate(zip(parts, kinds, strict=True)):
        if kind is inspect.Parameter.KEYWORD_ONLY and not star_done:
            if inspect.Parameter.VAR_POSITIONAL not in kinds:
                out.append("*")
            star_done = True
        out.append(text)
        nxt = kinds[i + 1] if i + 1 < len(kinds) else None
        if (
            kind is inspect.Parameter.POSITIONAL_ONLY
            and nxt is not inspect.Parameter.POSITIONAL_ONLY
        ):
            out.append("/")
    return ", ".join(out)


def _doc(doc: str | None, indent: str) -> str:
    if not doc:
        return f"{indent}...\n"
    body = inspect.cleandoc(doc).replace('"""', r"\"\"\"").replace("\\", "\\\\")
    return textwrap.indent(f'"""{body}"""\n', indent)


def render() -> str:
    annotations: list[tuple[str, ModuleType]] = []
    methods: list[str] = []
    init = _function(SessionManager.__init__)
    init_sig = inspect.signature(init)
    home = sys.modules[init.__module__]
    annotations += [
        (str(p.annotation), home)
        for p in init_sig.parameters.values()
        if p.annotation is not p.empty
    ]
    for name, value in derived_methods().items():
        function = _function(value)
        signature = inspect.signature(function)
        home = sys.modules[function.__module__]
        annotations += [
            (str(p.annotation), home)
            for p in signature.parameters.values()
            if p.annotation is not p.empty
        ]
        annotations.append((str(signature.return_annotation), home))
        methods.append(
            f"    async def {name}({_params(signature)}) -> {signature.return_annotation}:\n"
            + _doc(function.__doc__, "        ")
        )
    properties: list[str] = []
    for name, value in vars(SessionManager).items():
        if isinstance(value, property) and not name.startswith("_"):
            getter = value.fget
            assert getter is not None
            returns = inspect.signature(getter).return_annotation
            annotations.append((str(returns), sys.modules[getter.__module__]))
            properties.append(
                f"    @property\n    def {name}(self) -> {returns}:\n"
                + _doc(getter.__doc__, "        ")
            )
    attributes = [
        f"    {name}: {annotation}" for name, annotation in _instance_attributes().items()
    ]
    annotations += [
        (a.split(": ", 1)[1], sys.modules[SessionManager.__module__]) for a in attributes
    ]
    init_params = _params(init_sig).replace(") -> None", "")
    header = [
        '"""Generated by scripts/gen_aio_stub.py from SessionManager: do not edit by hand."""',
        "",
        "from __future__ import annotations",
        "",
        *_imports(annotations),
        "from memlane.manager import SessionManager",
        "",
        "__all__ = ['AsyncSessionManager', 'derived_methods']",
        "",
        "def derived_methods(cls: type = ...) -> dict[str, Any]: ...",
        "",
        "class AsyncSessionManager:",
        *attributes,
        f"    def __init__({init_params}, max_threads: int = 4) -> None: ...",
        "    async def close(self) -> None: ...",
        "    async def __aenter__(self) -> AsyncSessionManager: ...",
        "    async def __aexit__(self, *exc: object) -> None: ...",
        "    @property",
        "    def sync(self) -> SessionManager: ...",
    ]
    text = "\n".join(header) + "\n" + "".join(properties) + "".join(methods)
    if "from typing import" not in text:
        text = text.replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom typing import Any\n",
            1,
        )
    elif " Any" not in text.split("class AsyncSessionManager")[0]:
        text = text.replace("from typing import ", "from typing import Any, ", 1)
    return text


def _instance_attributes() -> dict[str, str]:
    """SessionManager's public instance attributes and their types, read from ``__init__``'s
    assignments (``self.agent_id = ...``) and the class's annotations."""
    source = inspect.getsource(SessionManager.__init__)
    names = sorted(set(re.findall(r"self\.([a-z][a-z_]*)(?:, self\.[a-z_]+)* =", source)))
    names = sorted(set(names) | set(re.findall(r"self\.[a-z_]+, self\.([a-z][a-z_]*) =", source)))
    hints = SessionManager.__annotations__
    missing = [n for n in names if n not in hints]
    if missing:
        raise LookupError(f"annotate SessionManager's attributes in its class body: {missing}")
    return {name: str(hints[name]) for name in names}


def formatted(text: str) -> str:
    """The stub as the project's ruff formats it (imports sorted), so `--check` compares
    like with like."""
    for command in (["check", "--fix", "--select", "I", "--quiet"], ["format", "--quiet"]):
        run = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(TARGET), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        )
        text = run.stdout
    return text


def main() -> int:
    text = formatted(render())
    if "--check" in sys.argv[1:]:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run scripts/gen_aio_stub.py.", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
