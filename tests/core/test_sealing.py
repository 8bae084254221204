"""Secrets kept at rest are sealed (core.sealing): the TOTP key a console user enrols (or an
operator's invite makes) is stored sealed and still signs them in; a key rotation with `outfitter
secrets reseal` leaves every key sealed by the new one, after which the old key may go."""

from __future__ import annotations

import time

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from outfitter.config import get_settings
from outfitter.core.sealing import SEALED, UnsealFailed, is_sealed_with_first, seal, unseal
from outfitter.models import ConsoleUser, OperatorUser
from tests.cli import cli_database, run  # noqa: F401
from tests.console.conftest import form_token, operator_sign_up, sign_up
from tests.console.test_profile import enrol, password_step
from tests.factories import Api

OLD, NEW = "o" * 32, "n" * 40


@pytest.mark.one_database
def test_a_sealed_secret_opens_with_any_listed_key_and_never_shows() -> None:
    sealed = seal("JBSWY3DPEHPK3PXP", (OLD,))
    assert sealed.startswith(SEALED) and "JBSWY3DPEHPK3PXP" not in sealed
    assert seal("JBSWY3DPEHPK3PXP", (OLD,)) != sealed  # a fresh nonce each time
    assert unseal(sealed, (NEW, OLD)) == "JBSWY3DPEHPK3PXP"
    assert is_sealed_with_first(sealed, (OLD, NEW)) and not is_sealed_with_first(sealed, (NEW, OLD))
    assert unseal("JBSWY3DPEHPK3PXP", (NEW,)) == "JBSWY3DPEHPK3PXP"  # kept from before sealing
    with pytest.raises(UnsealFailed, match="OUTFITTER_SECRET_KEYS"):
        unseal(sealed, (NEW,))
    tampered = sealed[:-6] + ("A" if sealed[-6] != "A" else "B") + sealed[-5:]
    with pytest.raises(UnsealFailed):
        unseal(tampered, (OLD,))


def test_an_enrolled_key_is_stored_sealed_and_a_rotation_reseals_it(
    app: FastAPI,
    engine: Engine,
    api: Api,
    cli_database: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OUTFITTER_SECRET_KEYS", OLD)
    get_settings.cache_clear()
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    totp = enrol(ada)
    with Session(engine) as session:
        stored = session.scalar(select(ConsoleUser.totp_secret))
    assert stored is not None and stored.startswith(SEALED) and totp.secret not in stored

    # A new key first, the old one still listed: sign-in works; reseal moves every key to the new.
    monkeypatch.setenv("OUTFITTER_SECRET_KEYS", f"{NEW},{OLD}")
    get_settings.cache_clear()
    code, out, _ = run("secrets", "reseal", "--json")
    assert code == 0 and out.strip() == '{"resealed": 1}'
    assert run("secrets", "reseal", "--json")[1].strip() == '{"resealed": 0}'
    monkeypatch.setenv("OUTFITTER_SECRET_KEYS", NEW)
    get_settings.cache_clear()
    with Session(engine) as session:
        resealed = session.scalar(select(ConsoleUser.totp_secret))
    assert resealed is not None and unseal(resealed, (NEW,)) == totp.secret
    browser = TestClient(app, base_url="http://testserver", follow_redirects=False)
    asked = password_step(browser, "ada@example.com")
    assert asked.status_code == 303 and asked.headers["location"].startswith("/console/sign-in/code")
    token = form_token(browser.get(asked.headers["location"]))
    next_code = totp.at(time.time() + 30)  # the enrolment spent this step's code
    signed = browser.post("/console/sign-in/code", data={"code": next_code, "csrf_token": token})
    assert signed.status_code == 303, signed.text


def test_a_key_kept_in_clear_from_before_still_signs_in_and_reseal_seals_it(
    app: FastAPI,
    engine: Engine,
    api: Api,
    cli_database: None,  # noqa: F811
) -> None:
    ada = sign_up(app, engine, api.company_id, "ada@example.com")
    totp = enrol(ada)
    with engine.begin() as connection:
        connection.execute(update(ConsoleUser).values(totp_secret=totp.secret))
    code, out, _ = run("secrets", "reseal", "--json")
    assert code == 0 and out.strip() == '{"resealed": 1}'
    with Session(engine) as session:
        stored = session.scalar(select(ConsoleUser.totp_secret))
    assert stored is not None and unseal(stored, tuple(get_settings().secret_keys)) == totp.secret


def test_an_operators_key_is_sealed_and_resealed_too(
    app: FastAPI,
    engine: Engine,
    cli_database: None,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    operator = operator_sign_up(app)  # the invite shows the key; a code of it signs up
    with Session(engine) as session:
        stored = session.scalar(select(OperatorUser.totp_secret))
    assert stored is not None and stored.startswith(SEALED) and operator.secret not in stored
    assert run("secrets", "reseal", "--json")[1].strip() == '{"resealed": 0}'
    monkeypatch.setenv("OUTFITTER_SECRET_KEYS", f"{NEW},{get_settings().secret_keys[0]}")
    get_settings.cache_clear()
    assert run("secrets", "reseal", "--json")[1].strip() == '{"resealed": 1}'
    with Session(engine) as session:
        resealed = session.scalar(select(OperatorUser.totp_secret))
    assert resealed is not None and unseal(resealed, (NEW,)) == operator.secret
