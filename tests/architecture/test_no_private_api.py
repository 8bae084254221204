"""No module of src/ reaches into a library's private parts (SQLAlchemy, FastAPI, Starlette,
psycopg...): a minor upgrade may change them without notice, and tenancy must not break silently.

Every module is parsed with `ast`. Refused: an attribute `x._name` (one underscore, not a dunder)
unless `x` is our own object (`self`, `cls`, a name the module itself defines, a module of ours);
an import of a private name or from a private module of another package (`from sqlalchemy.x
import _y`, `starlette._utils`); and the library classes listed in NOT_PUBLIC, which carry no
underscore but are not public API."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
OURS = "outfitter"

# Names with one underscore that their library documents as public: the named-tuple protocol
# (collections.namedtuple, urllib's SplitResult) and SQLAlchemy's Row, whose documented API is
# underscored so that it cannot clash with a column's name.
PUBLIC_BY_DOCUMENTATION = frozenset({"_asdict", "_replace", "_make", "_fields", "_mapping", "_t", "_tuple"})

# Library classes that are not public API although their name has no underscore: module, name.
NOT_PUBLIC = frozenset(
    {
        ("sqlalchemy.sql.selectable", "SelectState"),
        ("sqlalchemy.sql.compiler", "_CompileLabel"),
        ("sqlalchemy.engine.base", "ExceptionContextImpl"),
    }
)

# Exceptions, by module and `object._name` as written: none (company rows are written through
# db.company_writes, which builds its statements itself instead of reading an INSERT's parts).
ALLOWED: frozenset[tuple[str, str]] = frozenset()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _modules() -> list[Path]:
    return sorted((SRC / OURS).rglob("*.py"))


def _own_names(tree: ast.Module) -> set[str]:
    """The names a module defines itself or imports from our own package."""
    names = {"self", "cls"}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == OURS:
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] == OURS
            }
    return names


def _written(node: ast.expr) -> str:
    return ast.unparse(node)


def private_uses(source: str) -> list[str]:
    """Each use of another package's private API in `source`, as written."""
    tree = ast.parse(source)
    own = _own_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if node.attr in PUBLIC_BY_DOCUMENTATION:
                continue
            if isinstance(owner, ast.Name) and owner.id in own:
                continue
            found.append(f"line {node.lineno}: {_written(node)}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == OURS:
                continue
            if any(_private(part) for part in node.module.split(".")):
                found.append(f"line {node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if _private(alias.name) or (node.module, alias.name) in NOT_PUBLIC:
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != OURS and any(_private(p) for p in alias.name.split(".")):
                    found.append(f"line {node.lineno}: import {alias.name}")
    return found


@pytest.mark.parametrize(
    "module", _modules(), ids=lambda path: str(path.relative_to(SRC / OURS)).removesuffix(".py")
)
def test_no_module_uses_a_librarys_private_api(module: Path) -> None:
    name = str(module.relative_to(SRC))
    uses = [use for use in private_uses(module.read_text()) if (name, use.split(": ", 1)[1]) not in ALLOWED]
    assert uses == [], f"{name} uses private API: {uses}"


@pytest.mark.parametrize(
    "source",
    [
        "def f(statement):\n    return statement._values",
        "def f(compiled):\n    return compiled._bind_processors",
        "def f(connection, error):\n    connection._handle_dbapi_exception(error, '', {}, None, None)",
        "def f(insert):\n    return insert.select._returning",
        "from sqlalchemy.sql.selectable import SelectState",
        "from sqlalchemy.engine.base import _distill_params",
        "from starlette._utils import is_async_callable",
        "import fastapi._compat",
    ],
)
def test_the_check_catches_what_it_is_for(source: str) -> None:
    assert private_uses(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "class A:\n    def f(self):\n        return self._x",
        "_CACHE = {}\ndef f():\n    return _CACHE._x",
        "from outfitter.core import idempotency\nidempotency._ttl",
        "def f(row):\n    return row._mapping, row._asdict(), row._fields",
        "def f(parts):\n    return parts._replace(query='')",
        "x = object.__class__",
    ],
)
def test_the_check_lets_our_own_objects_and_documented_names_be(source: str) -> None:
    assert private_uses(source) == []
