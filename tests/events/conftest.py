"""The payments fixtures the payment events' tests share: the demo catalog and the sandbox."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from tests.factories import load_demo_catalog
from tests.payments.conftest import sandbox

__all__ = ["sandbox"]


@pytest.fixture
def catalog(engine: Engine) -> None:
    load_demo_catalog(engine)
