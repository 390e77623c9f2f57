"""Fixtures of the Python package's tests: the repository root and the CLI
binary they compare against (SCHEDLAB_BIN, else target/debug/schedlab,
built when missing)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def cli() -> str:
    exe = os.environ.get("SCHEDLAB_BIN") or str(ROOT / "target" / "debug" / "schedlab")
    if not Path(exe).exists():
        subprocess.run(["cargo", "build", "-p", "schedlab-cli", "--locked"], cwd=ROOT, check=True)
    return exe


@pytest.fixture(autouse=True)
def in_root(monkeypatch):
    """Scenario paths are given as the CLI's users give them: from the root."""
    monkeypatch.chdir(ROOT)
