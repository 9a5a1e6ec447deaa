"""Tests that run inside the app wherever it is installed (`briefcase dev --test` here; `briefcase run iOS --test`
or `briefcase run android --test` on a phone): the platform's choices, the wgpu-native library and a real adapter,
conversations that survive a kill, and the app's screens under the toga-dummy backend (or the platform's own)."""
import asyncio
import os
import time

import pytest

from llmchat_app.conversations import CUT, ConversationStore
from llmchat_app.platform import PHONES, device_kind, load_options


def test_the_platform_decides_the_profile():
    kind = device_kind()
    assert load_options(kind) == ({"profile": "phone"} if kind in PHONES else {})


def test_a_reply_cut_by_a_kill_is_marked_cut(tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    c = store.new_conversation("smollm2")
    store.add_user(c.id, "Hi")
    reply = store.begin_reply(c.id)
    store.update_reply(reply.id, "Hel", [1])
    store.close()
    assert [m.state for m in ConversationStore(tmp_path / "c.sqlite3").messages(c.id)] == ["done", CUT]


@pytest.mark.skipif(os.environ.get("TOGA_BACKEND") != "toga_dummy",
                    reason="a platform backend starts the app inside its main loop, which a test cannot run")
def test_the_app_starts_and_finds_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TOGA_DUMMY_HOME", str(tmp_path))
    from llmchat_app.app import main

    app = main()
    try:
        deadline = time.monotonic() + 120
        while app.adapter is None and "No GPU adapter" not in app.device_text.value:
            assert time.monotonic() < deadline, app.device_text.value
            app.loop.run_until_complete(asyncio.sleep(0.05))
        assert app.adapter is not None, app.device_text.value
        assert "Max storage binding" in app.device_text.value
        assert [row.model for row in app.model_table.data][0] == "smollm2"
    finally:
        app.engine.close()


def test_the_gpu_adapter_opens_through_the_bundled_wgpu():
    """wgpu as this build ships it (with WGPU_LIB_PATH as the app sets it on phones) finds an adapter."""
    from pathlib import Path

    import llmchat_app
    from llmchat.gpu import open_device
    from llmchat_app.platform import configure_wgpu_library

    configure_wgpu_library(device_kind(), Path(llmchat_app.__file__).resolve().parents[1])
    info = open_device().info
    assert info.name and info.max_binding_size > 0
