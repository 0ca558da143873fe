from __future__ import annotations

import pytest

import lsmkv


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(db_path):
    d = lsmkv.open(db_path, write_buffer_size=32 * 1024)
    yield d
    d.close()
