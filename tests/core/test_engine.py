"""The database layer: what the service's PostgreSQL connections set for their session
(db.session), and SQL of its own that each database must run alike (db.base)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import DateTime, Engine, cast, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from outfitter.core.timestamps import format_timestamp
from outfitter.db.base import utc_text, uuid_text
from outfitter.db.session import make_engine
from outfitter.models import Company
from tests.factories import CompanyFactory

# The statement PostgreSQL's foreign-key check runs for each row that names a country.
FOREIGN_KEY_CHECK = "SELECT 1 FROM ONLY countries x WHERE id = $1 FOR KEY SHARE OF x"


@pytest.fixture
def postgresql(engine: Engine) -> Engine:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's session settings: PostgreSQL only")
    return engine


def _generic_plan(engine: Engine) -> str:
    with engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE countries")
        connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        connection.exec_driver_sql(f"PREPARE foreign_key_check(uuid) AS {FOREIGN_KEY_CHECK}")
        rows = connection.exec_driver_sql("EXPLAIN EXECUTE foreign_key_check(gen_random_uuid())")
        return "\n".join(row[0] for row in rows)


def test_the_foreign_key_check_of_a_country_looks_its_id_up(postgresql: Engine) -> None:
    """At PostgreSQL's default random_page_cost (4) the check scans the whole countries table for
    every device written; the service's connections (1.1) look the id up in its primary key."""
    with postgresql.connect() as connection:
        assert connection.execute(text("SHOW random_page_cost")).scalar() == "1.1"
    assert "Index Scan using pk_countries" in _generic_plan(postgresql)


def test_options_in_the_database_url_are_the_operators_own(postgresql: Engine) -> None:
    url = make_url(postgresql.url).update_query_dict({"options": "-c random_page_cost=4"})
    own = make_engine(url.render_as_string(hide_password=False))
    try:
        with own.connect() as connection:
            assert connection.execute(text("SHOW random_page_cost")).scalar() == "4"
        assert "Seq Scan on countries" in _generic_plan(own)
    finally:
        own.dispose()


def test_timestamps_come_back_in_utc_itself(postgresql: Engine) -> None:
    """The session's time zone is UTC, so psycopg answers `datetime.UTC` and no value is converted."""
    with postgresql.connect() as connection:
        assert connection.execute(text("SHOW timezone")).scalar() == "UTC"
        assert connection.execute(text("SELECT now()")).scalar().tzinfo is UTC


def test_uuid_text_is_the_hyphenated_id_on_each_database(engine: Engine, companies: CompanyFactory) -> None:
    company_id = companies.create().company_id
    with engine.connect() as connection:
        written = connection.execute(select(uuid_text(Company.id)).where(Company.id == company_id)).scalar()
    assert written == str(company_id) and uuid.UUID(written) == company_id


@pytest.mark.parametrize(
    "written",
    [
        datetime(2026, 11, 27, 21, 12, 39, 123456, tzinfo=UTC),
        datetime(2026, 11, 27, 21, 12, 39, tzinfo=UTC),  # a whole second: six zeros all the same
        datetime(2024, 2, 29, 23, 30, 0, 5, tzinfo=timezone(timedelta(hours=-2))),  # held in UTC
        datetime(1, 1, 1, tzinfo=UTC),
    ],
)
def test_utc_text_is_the_time_as_the_answers_write_it_on_each_database(
    engine: Engine, companies: CompanyFactory, written: datetime
) -> None:
    company_id = companies.create().company_id
    created = select(utc_text(Company.created_at)).where(Company.id == company_id)
    with engine.begin() as connection:
        connection.execute(update(Company).where(Company.id == company_id).values(created_at=written))
        assert connection.execute(created).scalar() == format_timestamp(written)
        assert connection.execute(select(utc_text(cast(None, DateTime(timezone=True))))).scalar() is None


def test_a_failed_statement_never_carries_its_values_into_an_error(engine: Engine) -> None:
    """What a statement was given (a search, an email, a token's digest) stays out of its error,
    and so out of the stack trace a 500 logs; the statement itself is named."""
    with pytest.raises(DBAPIError) as caught, engine.connect() as connection:
        connection.execute(text("INSERT INTO no_such_table VALUES (:email)"), {"email": "ada@example.com"})
    assert "no_such_table" in str(caught.value)
    assert "ada@example.com" not in str(caught.value)
