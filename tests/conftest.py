"""Fixtures shared by the whole suite."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from llmchat.catalogue import resolve
from llmchat.errors import LLMChatError


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 file, found through the catalogue exactly as users find it.

    `make test` pulls it before pytest starts and sets LLMCHAT_REQUIRE_MODEL=1, so there a missing model is a
    failure; a bare `pytest` without network access skips the tests that need it instead.
    """
    try:
        return Path(resolve("smollm2"))
    except LLMChatError as exc:
        if os.environ.get("LLMCHAT_REQUIRE_MODEL") == "1":
            pytest.fail(f"the SmolLM2 test model is required but could not be pulled: {exc}")
        pytest.skip(f"SmolLM2 test model unavailable ({exc}); `make test` pulls it")
