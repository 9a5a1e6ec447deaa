"""Fixtures shared by the whole suite."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmchat.catalogue import resolve
from llmchat.errors import LLMChatError


def _catalogue_model(name: str) -> Path:
    """A real model file, found through the catalogue exactly as users find it.

    `make test` pulls it before pytest starts and sets LLMCHAT_REQUIRE_MODEL=1, so there a missing model is a
    failure; a bare `pytest` without network access skips the tests that need it instead.
    """
    try:
        return Path(resolve(name))
    except LLMChatError as exc:
        if os.environ.get("LLMCHAT_REQUIRE_MODEL") == "1":
            pytest.fail(f"the {name} test model is required but could not be pulled: {exc}")
        pytest.skip(f"{name} test model unavailable ({exc}); `make test` pulls it")


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 file (98 MB)."""
    return _catalogue_model("smollm2")


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    """The real Gemma 3 270M Q4_K_M file (253 MB, from PyPI in four parts)."""
    return _catalogue_model("gemma3-270m")
