"""The service's PostgreSQL connections plan for storage with cheap random reads (db.session)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url

from outfitter.db.session import make_engine

# The statement PostgreSQL's foreign-key check runs for each row that names a country.
FOREIGN_KEY_CHECK = "SELECT 1 FROM ONLY countries x WHERE id = $1 FOR KEY SHARE OF x"


@pytest.fixture
def planner(engine: Engine) -> Engine:
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's planner: PostgreSQL only")
    return engine


def _generic_plan(engine: Engine) -> str:
    with engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE countries")
        connection.exec_driver_sql("SET plan_cache_mode = force_generic_plan")
        connection.exec_driver_sql(f"PREPARE foreign_key_check(uuid) AS {FOREIGN_KEY_CHECK}")
        rows = connection.exec_driver_sql("EXPLAIN EXECUTE foreign_key_check(gen_random_uuid())")
        return "\n".join(row[0] for row in rows)


def test_the_foreign_key_check_of_a_country_looks_its_id_up(planner: Engine) -> None:
    """At PostgreSQL's default random_page_cost (4) the check scans the whole countries table for
    every device written; the service's connections (1.1) look the id up in its primary key."""
    with planner.connect() as connection:
        assert connection.execute(text("SHOW random_page_cost")).scalar() == "1.1"
    assert "Index Scan using pk_countries" in _generic_plan(planner)


def test_options_in_the_database_url_are_the_operators_own(planner: Engine) -> None:
    url = make_url(planner.url).update_query_dict({"options": "-c random_page_cost=4"})
    own = make_engine(url.render_as_string(hide_password=False))
    try:
        with own.connect() as connection:
            assert connection.execute(text("SHOW random_page_cost")).scalar() == "4"
        assert "Seq Scan on countries" in _generic_plan(own)
    finally:
        own.dispose()
