"""Fixtures for the btree tests."""

from __future__ import annotations

import pytest

import btree


@pytest.fixture
def dbpath(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(dbpath):
    d = btree.open(dbpath, page_size=512)
    yield d
    d.close()
