"""The payments fixtures the payment events' tests share: the demo catalog and the sandbox."""

from __future__ import annotations

import pytest

from tests.payments.conftest import sandbox

__all__ = ["sandbox"]


@pytest.fixture
def catalog(demo_catalog: None) -> None:
    """The demo catalog, kept between the tests that use it (tests/conftest.py)."""
