"""Benchmark: complete purchases through a running server on PostgreSQL.

N card purchases (initiate, pay at the sandbox checkout, the sandbox's webhook to the service,
verify) and N Credit purchases (initiate, which debits and fulfils, then verify), against uvicorn
on 127.0.0.1 and a scratch PostgreSQL database created and dropped here. Prints purchases per
second and the median and 99th percentile of each step. The webhook step is timed inside the
sandbox gateway (it is sent during Pay, after the payment committed, before the redirect).

    .venv/bin/python bench/checkout_flow.py [--count 50] [--concurrency 1]
        [--postgres postgresql://127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from harness import free_port, scratch_postgres, serving
from sqlalchemy import select
from sqlalchemy.orm import Session

from outfitter.app import create_app
from outfitter.catalog.importer import import_catalog, load_catalog_file
from outfitter.config import Settings
from outfitter.db.session import make_engine
from outfitter.migrations import upgrade
from outfitter.models import Country, Employee
from outfitter.payments.gateways import registry_of
from outfitter.payments.gateways.sandbox import SandboxGateway
from outfitter.payments.wallet import credit_wallet
from outfitter.tenants.tokens import create_company, issue_token

DEMO_CATALOG = Path(__file__).parents[1] / "src" / "outfitter" / "demo" / "catalog.json"
timings: dict[str, list[float]] = defaultdict(list)
lock = threading.Lock()


def record(step: str, seconds: float) -> None:
    with lock:
        timings[step].append(seconds)


def timed(step: str, call: Callable[[], httpx.Response]) -> httpx.Response:
    started = time.perf_counter()
    response = call()
    record(step, time.perf_counter() - started)
    return response


def prepare(database_url: str, count: int) -> tuple[str, str]:
    """Schema, demo catalog, a company with an employee in Nigeria and enough NGN credit."""
    engine = make_engine(Settings(database_url=database_url).database_url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        import_catalog(session, load_catalog_file(DEMO_CATALOG))
        company = create_company(session, "Bench Ltd")
        token = issue_token(session, company.id, None).token
        nigeria = session.scalars(select(Country).where(Country.code == "NG")).one()
        employee = Employee(
            company_id=company.id,
            first_name="Bench",
            last_name="Buyer",
            email="buyer@bench.example.com",
            phone="+2348012345678",
            country_id=nigeria.id,
            address="12 Marina Road, Lagos",
        )
        session.add(employee)
        credit_wallet(session, company.id, "NGN", Decimal(10_000_000) * count, "Bench credit")
        session.flush()
        employee_id = str(employee.id)
    engine.dispose()
    return token, employee_id


@contextmanager
def serve(database_url: str) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    app = create_app(Settings(database_url=database_url, rate_limit="off", public_url=url))
    sandbox = registry_of(app.state).get("sandbox")
    assert isinstance(sandbox, SandboxGateway)
    send = sandbox.sender

    def timed_sender(target: str, body: bytes, headers: dict[str, str]) -> int:
        started = time.perf_counter()
        status = send(target, body, headers)
        record("card: webhook", time.perf_counter() - started)
        return status

    sandbox.sender = timed_sender
    with serving(app, port) as served:
        yield served


def body(employee_id: str, pricing_id: str, method: str) -> dict[str, Any]:
    return {
        "payment_method": method,
        "employee_country_id": "NG",
        "redirect_url": "https://client.example/paid",
        "orders": {employee_id: [{"asset_pricing_id": pricing_id}]},
    }


def card_purchase(client: httpx.Client, employee_id: str, pricing_id: str) -> None:
    started = time.perf_counter()
    response = timed(
        "card: initiate",
        lambda: client.post(
            "/api/v2/client/transactions/initiate", json=body(employee_id, pricing_id, "Card")
        ),
    )
    data = response.json()["data"]
    paid = timed(
        "card: pay (incl. webhook)", lambda: client.post(f"{data['link']}/pay", follow_redirects=False)
    )
    assert paid.status_code == 303, paid.text[:200]
    verified = timed(
        "card: verify", lambda: client.get(f"/api/v2/client/transactions/{data['tx_ref']}/verify")
    )
    assert verified.json()["data"]["status"] == "Fulfilled", verified.text[:300]
    record("card: whole purchase", time.perf_counter() - started)


def credit_purchase(client: httpx.Client, employee_id: str, pricing_id: str) -> None:
    started = time.perf_counter()
    response = timed(
        "credit: initiate (debit + fulfil)",
        lambda: client.post(
            "/api/v2/client/transactions/initiate", json=body(employee_id, pricing_id, "Credit")
        ),
    )
    data = response.json()["data"]
    assert data["status"] == "Fulfilled", response.text[:300]
    timed("credit: verify", lambda: client.get(f"/api/v2/client/transactions/{data['tx_ref']}/verify"))
    record("credit: whole purchase", time.perf_counter() - started)


def run_many(
    purchase: Callable[[httpx.Client, str, str], None],
    url: str,
    token: str,
    employee_id: str,
    pricing_id: str,
    count: int,
    concurrency: int,
) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for future in [pool.submit(purchase, client, employee_id, pricing_id) for _ in range(count)]:
                future.result()
        return count / (time.perf_counter() - started)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--postgres", default="postgresql://127.0.0.1:5432/postgres")
    args = parser.parse_args()

    with scratch_postgres(args.postgres) as database_url:
        token, employee_id = prepare(database_url, args.count)
        with serve(database_url) as url:
            headers = {"Authorization": f"Bearer {token}"}
            listed = httpx.get(
                f"{url}/api/v2/client/assets",
                params={"country_id": "NG", "currency_code": "NGN"},
                headers=headers,
            )
            pricing_id = listed.json()["data"]["data"][0]["asset_pricing"]["id"]
            card_rate = run_many(
                card_purchase, url, token, employee_id, pricing_id, args.count, args.concurrency
            )
            credit_rate = run_many(
                credit_purchase, url, token, employee_id, pricing_id, args.count, args.concurrency
            )

    print(f"PostgreSQL, {args.count} purchases of each kind, {args.concurrency} client thread(s)")
    print(f"card purchases per second:   {card_rate:8.1f}")
    print(f"credit purchases per second: {credit_rate:8.1f}")
    print(f"{'step':<36} {'median ms':>10} {'p99 ms':>10} {'n':>5}")
    for step, values in timings.items():
        median, p99 = statistics.median(values) * 1000, percentile(values, 0.99) * 1000
        print(f"{step:<36} {median:10.1f} {p99:10.1f} {len(values):5d}")


if __name__ == "__main__":
    main()
