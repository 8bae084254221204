"""The commonest statements of the writes, run on psycopg's cursor from a form compiled once.

A single create runs two statements: the token's lookup (every request in a unit of work makes it)
and the create itself (one INSERT with its history, events and deliveries as CTEs). SQLAlchemy's
execution of such a statement (its cache key, parameter construction, execution context and result
wrapping) took more of the request's CPU than psycopg's own execution of it (docs/architecture.md
has the profile). `driver_rows` runs a
statement on the session's connection, in its transaction, through the driver's cursor, from a
`_Form` made once per statement object and dialect: the SQL, where each parameter's value comes
from with its type's bind processing, and the processing of each result column. What SQLAlchemy's
execution does around a statement is kept:

- tenancy: `db.tenancy.check_driver_statement` checks an INSERT and the values it is about to
  be sent with, as its hooks on the engine check every other statement; any other statement may
  not touch a company's table at all (none of them is scoped: the ORM's statements are), on either
  database;
- the engine's `before_cursor_execute` listeners hear of it (statement counts);
- a driver error is handled as SQLAlchemy's execution handles it (`DBAPIError`, the engine's
  `handle_error` listeners; a connection found lost is invalidated, with the pool's older ones).

For statements of a fixed shape (no expanding `IN` list), on PostgreSQL; on another database the
statement runs through SQLAlchemy as usual.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from sqlalchemy import BindParameter, Connection, Dialect, Executable, Insert
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.sql.compiler import SQLCompiler

from outfitter.db.tenancy import TenantScopeError, check_driver_statement, touches_company_data


class _Form:
    """A statement compiled once for a dialect, with what turns values into its parameters and its
    rows into named tuples."""

    def __init__(self, statement: Executable, dialect: Dialect) -> None:
        compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
        assert isinstance(compiled, SQLCompiler)
        if compiled.literal_execute_params or compiled.post_compile_params:
            raise ValueError("a statement run on the driver must have a fixed shape (no expanding IN)")
        # Columns left to a Python-side default, which SQLAlchemy's execution computes per row and
        # this one does not: such a statement is refused (after tenancy's own refusals).
        self.computed = [column.name for column in (*compiled.insert_prefetch, *compiled.update_prefetch)]
        self.compiled = compiled
        self.sql = compiled.string
        processors: Mapping[str, Any] = compiled._bind_processors
        if not all(callable(process) for process in processors.values()):
            raise ValueError("a statement run on the driver must have no tuple-typed parameters")
        # Each parameter: its name in the SQL, the key its value is given by, and its type's
        # processing; the parameter itself gives the value it carries when none is given.
        self.parameters: tuple[tuple[str, str, Callable[[Any], Any] | None, BindParameter[Any]], ...] = tuple(
            (compiled.escaped_bind_names.get(name, name), bind.key, processors.get(name), bind)
            for bind, name in compiled.bind_names.items()
        )
        columns = compiled._result_columns
        self.returns_rows = bool(columns)
        self.row: Any = collections.namedtuple("Row", [column.keyname for column in columns])  # type: ignore[misc]
        self.result_processors = tuple(
            column.type._cached_result_processor(dialect, None) for column in columns
        )

    def bound(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The parameters the SQL is sent with, from `values` by key (as `Connection.execute` takes them)."""
        bound: dict[str, Any] = {}
        for name, key, process, bind in self.parameters:
            if key in values:
                value = values[key]
            elif bind.required:
                raise InvalidRequestError(f"A value is required for bind parameter {key!r}")
            else:
                value = bind.effective_value
            bound[name] = value if process is None else process(value)
        return bound

    def rows(self, fetched: list[tuple[Any, ...]]) -> list[Any]:
        processors = self.result_processors
        make = self.row._make
        if not any(processors):
            return [make(row) for row in fetched]
        return [
            make(
                value if process is None else process(value)
                for process, value in zip(processors, row, strict=True)
            )
            for row in fetched
        ]


_forms: weakref.WeakKeyDictionary[Dialect, weakref.WeakKeyDictionary[Executable, _Form]] = (
    weakref.WeakKeyDictionary()
)


def _form(statement: Executable, dialect: Dialect) -> _Form:
    forms = _forms.get(dialect)
    if forms is None:
        forms = _forms[dialect] = weakref.WeakKeyDictionary()
    form = forms.get(statement)
    if form is None:
        form = forms[statement] = _Form(statement, dialect)
    return form


def driver_rows(connection: Connection, statement: Executable, values: dict[str, Any]) -> list[Any]:
    """Every row `statement` returns, run with `values` (see the module); rows read by attribute."""
    if not isinstance(statement, Insert) and touches_company_data(statement):
        raise TenantScopeError("a statement run on the driver reads a company's table only as an INSERT")
    dialect = connection.dialect
    if dialect.driver != "psycopg":
        result = connection.execute(statement, values)
        return list(result) if result.returns_rows else []
    form = _form(statement, dialect)
    if isinstance(statement, Insert):
        values = check_driver_statement(connection, statement, form.compiled, values)
    if form.computed:
        raise ValueError(f"a statement run on the driver must give its columns' values: {form.computed}")
    parameters = form.bound(values)
    with driver_cursor(connection, form.sql, parameters) as cursor:
        cursor.execute(form.sql, parameters)
        fetched = cursor.fetchall() if form.returns_rows else []
    return form.rows(fetched)


@contextmanager
def driver_cursor(connection: Connection, statement: str, parameters: Any) -> Iterator[Any]:
    """psycopg's own cursor on `connection`, in its transaction, for `statement` (run here, or a
    COPY: db.bulk_rows): announced to the engine's `before_cursor_execute` listeners like any
    statement, and a driver's error handled as SQLAlchemy's own execution handles it: wrapped
    (parameters hidden when the engine hides them), the engine's `handle_error` listeners told, and
    on a lost connection this one invalidated with the pool's older ones."""
    driver = connection.connection.driver_connection
    assert driver is not None
    try:
        with driver.cursor() as cursor:
            connection.dispatch.before_cursor_execute(connection, cursor, statement, parameters, None, False)
            yield cursor
    except connection.dialect.loaded_dbapi.Error as error:
        # SQLAlchemy's private method, the very one its execution calls (2.0 and 2.1 alike).
        connection._handle_dbapi_exception(error, statement, parameters, None, None)
