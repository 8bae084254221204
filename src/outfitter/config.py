"""One typed settings class, read from OUTFITTER_* environment variables."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OUTFITTER_", extra="ignore")

    # "embedded" allows the documented development defaults; "production" refuses to start without
    # real secrets, so no deployment runs on a value that is published in this repository.
    environment: Literal["embedded", "production"] = "embedded"

    database_url: str = "sqlite:///./outfitter.db"
    public_url: str = "http://127.0.0.1:8000"
    redis_url: str | None = None
    rate_limit: str = "120/minute"
    max_body_bytes: int = 1024 * 1024
    # Connections each server process may hold, and so the requests it runs at once (the worker
    # threads are as many). PostgreSQL's default max_connections is 100: keep
    # server processes x (pool_size + pool_max_overflow), plus CLI commands, below it.
    db_pool_size: int = Field(default=10, ge=1, le=100)
    db_pool_max_overflow: int = Field(default=0, ge=0, le=100)
    # PostgreSQL only: asyncpg connections for the read-only hot paths (core.reads), per process.
    db_read_pool_size: int = Field(default=5, ge=1, le=100)
    # Seconds a request waits for a free connection before it is answered 503.
    db_pool_timeout: float = Field(default=5.0, gt=0, le=60)

    gateway: Literal["sandbox", "flutterwave"] = "sandbox"
    sandbox_webhooks: Literal["on", "off"] = "on"
    # Secret shared with the sandbox gateway for Standard Webhooks signatures ("whsec_" + base64).
    sandbox_webhook_secret: str | None = None
    flutterwave_base_url: str = "https://api.flutterwave.com/v3"
    flutterwave_secret_key: str | None = None
    flutterwave_webhook_hash: str | None = None

    transaction_ttl_hours: int = 24
    idempotency_ttl_hours: int = 24

    # Outgoing webhooks (docs/webhooks.md). None means "the environment's default": http:// is
    # allowed in the embedded environment (a developer's laptop), refused in production.
    webhook_allow_http: bool | None = None
    # Receivers on loopback, private, link-local or reserved addresses: local development and tests.
    webhook_allow_private: bool = False
    # Seconds after the first attempt at which each attempt is due (the first is normally 0).
    webhook_retry_schedule: Annotated[list[float], NoDecode] = [0, 5, 300, 1800, 7200, 18000, 36000, 36000]
    # The whole of one delivery attempt (resolving, connecting, sending, the answer's head).
    webhook_timeout_seconds: float = Field(default=15.0, gt=0, le=120)
    # How long a worker holds a claimed delivery or job: longer than a send can take, so a live
    # worker never loses its claim, and short enough that a dead worker's work resumes soon. A
    # delivery's lease is never shorter than two webhook timeouts (webhooks.dispatch.lease_seconds).
    worker_lease_seconds: float = Field(default=60.0, gt=0, le=3600)
    # Sends at once per worker (on one event loop: cheap); a company gets half, an endpoint a quarter.
    worker_concurrency: int = Field(default=32, ge=1, le=64)
    worker_poll_seconds: float = Field(default=1.0, gt=0, le=60)
    # How often the worker expires Pending transactions past their time to live, and asks the
    # gateway about Pending card payments.
    worker_expire_interval_seconds: float = Field(default=60.0, gt=0)
    worker_reconcile_interval_seconds: float = Field(default=600.0, gt=0)
    # `outfitter serve` runs one worker in-process unless this is false.
    embedded_worker: bool = True

    @field_validator("database_url")
    @classmethod
    def _normalise_database_url(cls, value: str) -> str:
        # Accept the plain URLs operators write; pick the driver this project ships.
        if value.startswith("postgres://"):
            value = "postgresql://" + value[len("postgres://") :]
        if value.startswith("postgresql://"):
            value = "postgresql+psycopg://" + value[len("postgresql://") :]
        if not value.startswith(("sqlite", "postgresql+psycopg://")):
            raise ValueError("expected a sqlite:/// or postgresql:// URL")
        try:
            make_url(value)
        except ArgumentError:
            raise ValueError("not a database URL") from None
        return value

    @field_validator("webhook_retry_schedule", mode="before")
    @classmethod
    def _parse_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                value = [float(part) for part in value.split(",") if part.strip()]
            except ValueError:
                raise ValueError("expected seconds separated by commas, e.g. 0,5,300") from None
        if isinstance(value, list) and (
            not value or any(not isinstance(s, int | float) or s < 0 for s in value) or value != sorted(value)
        ):
            raise ValueError("expected one or more non-negative seconds, in increasing order")
        return value

    @model_validator(mode="after")
    def _production_needs_secrets(self) -> Settings:
        if self.environment != "production":
            if self.sandbox_webhook_secret is None:
                # Development-only secret, documented in docs/operations.md; refused in production.
                self.sandbox_webhook_secret = "whsec_b3V0Zml0dGVyLWVtYmVkZGVkLWRldmVsb3BtZW50LW9ubHk="
            return self
        missing = []
        if self.database_url.startswith("sqlite"):
            missing.append("OUTFITTER_DATABASE_URL (a postgresql:// URL)")
        if self.gateway == "sandbox" and not self.sandbox_webhook_secret:
            missing.append("OUTFITTER_SANDBOX_WEBHOOK_SECRET")
        if self.gateway == "flutterwave" and not (
            self.flutterwave_secret_key and self.flutterwave_webhook_hash
        ):
            missing.append("OUTFITTER_FLUTTERWAVE_SECRET_KEY and OUTFITTER_FLUTTERWAVE_WEBHOOK_HASH")
        if missing:
            raise ValueError("production configuration is missing: " + ", ".join(missing))
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def webhooks_allow_http(self) -> bool:
        if self.webhook_allow_http is not None:
            return self.webhook_allow_http
        return self.environment == "embedded"


@lru_cache
def get_settings() -> Settings:
    return Settings()
