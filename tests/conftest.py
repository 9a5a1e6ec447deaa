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


GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    """The real Gemma 3 270M Q4_K_M file (SentencePiece vocabulary of 262,144 tokens, no chat template).

    Found through the catalogue name `gemma3-270m` once the catalogue has it; until then, in the model cache
    under its catalogue file name. Skipped when absent: LLMCHAT_REQUIRE_MODEL covers it only once the catalogue
    can pull it.
    """
    from llmchat.catalogue import models_dir
    from llmchat.errors import ModelNotFoundError

    try:
        return Path(resolve("gemma3-270m"))
    except ModelNotFoundError:
        path = models_dir() / GEMMA3_FILE
        if path.is_file():
            return path
        pytest.skip(f"Gemma 3 270M test model not in {models_dir()} (no catalogue entry gemma3-270m yet)")
    except LLMChatError as exc:
        if os.environ.get("LLMCHAT_REQUIRE_MODEL") == "1":
            pytest.fail(f"the Gemma 3 270M test model is required but could not be pulled: {exc}")
        pytest.skip(f"Gemma 3 270M test model unavailable ({exc})")
