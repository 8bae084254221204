"""The database URL: the embedded default, how one is shown without its secrets, and the checks
that read a URL's options as its driver will (at start, not at the first connection)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from platformdirs import user_data_dir
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, SAWarning


def data_dir() -> Path:
    """Where the embedded SQLite database lives by default: the user's data directory
    (~/.local/share/outfitter on Linux, XDG_DATA_HOME respected), whatever the current directory."""
    return Path(user_data_dir("outfitter", appauthor=False))


class DataDirectoryUnusable(Exception):
    """The default database's directory cannot be made: the message says which, and what to set."""


def default_database_url() -> str:
    """The SQLite file in the data directory, which is created here: SQLite makes the file but not
    its directory, and this runs only when OUTFITTER_DATABASE_URL is unset."""
    directory = data_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataDirectoryUnusable(
            f"cannot create the data directory {directory} for the default SQLite database "
            f"({error.strerror or error}): set OUTFITTER_DATABASE_URL, or XDG_DATA_HOME to a "
            "directory this user can write"
        ) from None
    return f"sqlite:///{directory / 'outfitter.db'}"


# libpq's parameters that hold a secret: it takes `?password=...` as well as `user:password@`.
_SECRET_QUERY_KEYS = ("password", "sslpassword")


def display_database_url(url: str) -> str:
    """The database as an operator names it in messages: no password (in either place libpq takes
    one), no driver suffix."""
    parsed = make_url(url).difference_update_query(_SECRET_QUERY_KEYS)
    # URL.set() reads None as "unchanged"; _replace (URL is a named tuple) drops the password.
    return parsed._replace(drivername=parsed.get_backend_name(), password=None).render_as_string(
        hide_password=False
    )


def _check_connection_options(query: Mapping[str, str | Sequence[str]]) -> None:
    """The options of a PostgreSQL URL (`?sslmode=require&connect_timeout=5`) as libpq and psycopg
    read them, at start rather than at the first connection (a traceback there): an unknown name,
    a timeout that is no number. What it says names the option, never another part of the URL."""
    import psycopg  # only for a PostgreSQL URL: the CLI on SQLite starts without it
    from psycopg.conninfo import conninfo_to_dict, make_conninfo, timeout_from_conninfo

    options = {name: value if isinstance(value, str) else value[-1] for name, value in query.items()}
    try:
        timeout_from_conninfo(conninfo_to_dict(make_conninfo("", **options)))
    except psycopg.ProgrammingError as exc:
        problem = str(exc).strip().splitlines()[0]
        raise ValueError(f"{problem} (the options after '?' are libpq's connection parameters)") from None


# What Python's sqlite3 driver takes after '?' in a SQLite URL (SQLAlchemy's pysqlite dialect);
# with uri=true, SQLite's own URI parameters too.
_SQLITE_OPTIONS = (
    "timeout",
    "detect_types",
    "check_same_thread",
    "cached_statements",
    "isolation_level",
    "uri",
)


def _check_sqlite_options(url: URL) -> None:
    """The options of a SQLite URL (`?timeout=30`) as the dialect reads them, at start: one it would
    ignore with a warning, or a value it cannot read (a traceback at the first connection)."""
    try:
        with warnings.catch_warnings():  # the dialect warns of what it ignores: refused below
            warnings.simplefilter("ignore", SAWarning)
            _, read = url.get_dialect()().create_connect_args(url)
    except ValueError as exc:
        raise ValueError(f"{exc} (an option after '?')") from None
    unknown = sorted(set(url.query) - set(_SQLITE_OPTIONS))
    if unknown and not read.get("uri"):  # with uri=true they are SQLite's URI parameters
        raise ValueError(
            f"unknown option(s) {', '.join(unknown)} (the options after '?' are those of Python's sqlite3 "
            f"driver: {', '.join(_SQLITE_OPTIONS)})"
        )


def normalise_database_url(value: str) -> str:
    """The URL as the engine takes it, or a ValueError saying what is wrong with it in words an
    operator can act on (never repeating its password)."""
    # Accept the plain URLs operators write; pick the driver this project ships.
    if value.startswith("postgres://"):
        value = "postgresql://" + value[len("postgres://") :]
    if value.startswith("postgresql://"):
        value = "postgresql+psycopg://" + value[len("postgresql://") :]
    if not value.startswith(("sqlite", "postgresql+psycopg://")):
        raise ValueError("expected a sqlite:/// or postgresql:// URL")
    try:
        url = make_url(value)
    except ArgumentError:
        raise ValueError("not a database URL") from None
    if url.get_backend_name() == "sqlite":
        if url.host or not url.database:  # sqlite://x.db names a host, not a file
            raise ValueError(
                "expected sqlite:///relative/path.db or sqlite:////absolute/path.db (three slashes "
                "before the path)"
            )
        _check_sqlite_options(url)
    else:
        if url.host and "@" in url.host:  # the URL's first '@' ends the password
            raise ValueError(
                "its password holds an '@' that is not percent-encoded: write it as %40 (and ':' as "
                "%3A, '/' as %2F), or give the password as ?password=..."
            )
        _check_connection_options(url.query)
    return value
