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
# The suite tests llmchat's kernels on the adapter at hand, which on these machines is a CPU emulation, where `auto`
# would run the cpu engine: tests of that engine and of the choice ask for them (tests/model/test_cpu_engine.py).
os.environ.setdefault("LLMCHAT_ENGINE", "webgpu")
from adapter_marks import missing_features, profile_allows  # noqa: E402 (after LLMCHAT_TUNE is set)

from llmchat.errors import LLMChatError, NoAdapterError  # noqa: E402
from llmchat.gpu.native import NativeDevice  # noqa: E402

# `make test` sets both: the adapter must have every feature the suite tests (LLMCHAT_REQUIRE_GPU), and a skip that
# is not one of EXPECTED_SKIPS fails its test (LLMCHAT_FAIL_SKIPS), so that nothing lost turns into a green skip. A
# bare `pytest` on another machine keeps skipping what that machine cannot run.
REQUIRE_GPU = "LLMCHAT_REQUIRE_GPU"
FAIL_SKIPS = "LLMCHAT_FAIL_SKIPS"
EXPECTED_SKIPS = {
    # Its branch of resolve exists only inside Pyodide, where tests/model/test_pyodide.py runs this file again.
    "tests/unit/test_hub_refs.py::test_inside_pyodide_references_resolve_to_hub_urls",
}


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


def pytest_sessionstart(session):
    """Under LLMCHAT_REQUIRE_GPU=1 the run stops at once, before any test, on an adapter without every feature the
    suite tests (checked once, in the process that starts the xdist workers)."""
    if os.environ.get(REQUIRE_GPU) != "1" or hasattr(session.config, "workerinput"):
        return
    try:
        device = NativeDevice()
    except NoAdapterError as exc:
        pytest.exit(f"{REQUIRE_GPU}=1: no WebGPU adapter: {exc}", returncode=pytest.ExitCode.TESTS_FAILED)
    try:
        missing = missing_features(device)
        name = device.info.name
    finally:
        device.close()
    if missing:
        pytest.exit(f"{REQUIRE_GPU}=1: the adapter {name} lacks {', '.join(missing)}, which the suite tests",
                    returncode=pytest.ExitCode.TESTS_FAILED)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Under LLMCHAT_FAIL_SKIPS=1 a skip that is not in EXPECTED_SKIPS is a failure (xfails stay what they are)."""
    report = yield
    if not hasattr(report, "wasxfail") and item.nodeid.split("[")[0] not in EXPECTED_SKIPS:
        _fail_skip(report, "skipped, which {}=1 does not allow (tests/conftest.py EXPECTED_SKIPS): {}")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Under LLMCHAT_FAIL_SKIPS=1 a module skipped whole (importorskip, a module-level skip) is an error."""
    report = yield
    _fail_skip(report, "skipped whole, which {}=1 does not allow: {}")
    return report


def _fail_skip(report, message: str) -> None:
    """Under LLMCHAT_FAIL_SKIPS=1 a skipped report becomes a failure saying `message` (the variable, the reason)."""
    if report.skipped and os.environ.get(FAIL_SKIPS) == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = message.format(FAIL_SKIPS, reason)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    """Cases a profile cannot run are not kept (gpu_util.needs), and the browser tests run last. pytest-playwright
    starts one Playwright for the rest of the session at the first of them, and its sync API keeps an asyncio event
    loop marked as running in the main thread from then on; the tests that run a loop of their own there
    (asyncio.run, Toga's app loop) would fail after it."""
    items[:] = [item for item in items if profile_allows(item)]
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
