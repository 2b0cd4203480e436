import os
import time
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
FIXTURES = DATA / "fixtures"
SCENARIOS = sorted(p.name for p in FIXTURES.iterdir() if (p / "slots.ads").is_file())


@pytest.fixture
def utc(monkeypatch):
    """Dates print in local time, as HTCondor's tools do; the recordings were made in UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
