"""Fixtures shared by the whole suite."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from browser_util import BROWSER_TIMEOUT_MS, CHROMIUM, CHROMIUM_FLAGS, VIEWPORT, browser_missing, open_profile
from llmchat.hub.catalogue import resolve

# Kernel variants come from the fixed per-adapter table in every test, so results and golden data never depend on
# a tuner run; tests about tuning turn it on themselves (tests/model/test_tune.py).
os.environ["LLMCHAT_TUNE"] = "0"
from llmchat.errors import LLMChatError


def _catalogue_model(name: str) -> Path:
    """A catalogue model found exactly as users find it. `make test` pulls the test models before pytest starts
    and sets LLMCHAT_REQUIRE_MODEL=1, so there a missing model is a failure; a bare `pytest` without network access
    skips the tests that need it instead."""
    try:
        return Path(resolve(name))
    except LLMChatError as exc:
        if os.environ.get("LLMCHAT_REQUIRE_MODEL") == "1":
            pytest.fail(f"the test model {name} is required but could not be pulled: {exc}")
        pytest.skip(f"test model {name} unavailable ({exc}); `make test` pulls it")


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The real SmolLM2-135M-Instruct Q4_1 file (llama architecture, byte-level BPE vocabulary)."""
    return _catalogue_model("smollm2")


@pytest.fixture(scope="session")
def gemma3_path() -> Path:
    """The real Gemma 3 270M Q4_K_M file (gemma3 architecture, SentencePiece-style vocabulary of 262,144 tokens)."""
    return _catalogue_model("gemma3-270m")


# -- the browser tests run on pytest-playwright's fixtures (`page`, `context`, `browser`, `browser_type`), pointed
# at Debian's Chromium by the launch arguments below (see browser_util.py).


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """The browser tests run last. pytest-playwright starts one Playwright for the rest of the session at the first
    of them, and its sync API keeps an asyncio event loop marked as running in the main thread from then on; the
    tests that run a loop of their own there (asyncio.run, Toga's app loop) would fail after it."""
    uses_browser = [("browser_type" in getattr(item, "fixturenames", ())) for item in items]
    for item, b in zip(items, uses_browser):
        if b:
            item.add_marker(pytest.mark.browser)
    items[:] = [i for i, b in zip(items, uses_browser) if not b] + [i for i, b in zip(items, uses_browser) if b]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """`make test` sets LLMCHAT_REQUIRE_WEB=1: there a missing browser or web build fails instead of skipping."""
    problem = browser_missing()
    if problem:
        if os.environ.get("LLMCHAT_REQUIRE_WEB") == "1":
            pytest.fail(problem)
        pytest.skip(problem)
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_FLAGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": VIEWPORT}


@pytest.fixture
def context(context):
    context.set_default_timeout(BROWSER_TIMEOUT_MS)
    return context


@pytest.fixture
def launch_profile(browser_type, browser_type_launch_args, browser_context_args):
    """open_profile for one test: every browser it opens is closed after the test."""
    opened = []

    def launch(profile: Path, **options):
        opened.append(open_profile(browser_type, browser_type_launch_args, browser_context_args, profile, **options))
        return opened[-1]

    yield launch
    for context in opened:
        try:
            context.close()
        except Exception:  # noqa: BLE001 - a test may have closed it already
            pass
