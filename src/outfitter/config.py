"""One typed settings class, read from OUTFITTER_* environment variables."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
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


@lru_cache
def get_settings() -> Settings:
    return Settings()
