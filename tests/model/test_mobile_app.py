"""The app driven through its real Toga widgets (the toga-dummy backend) as a user would: pick a model, download it
from a local server whose connection drops mid-file, pause, restart the app and resume, chat with streaming and
Stop, find the conversations after a restart (a reply cut by a kill marked as cut), and delete the model. The
replies' tokens are the Python API's for the same prompt and seed."""
from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from mobile_support import mirror_url, model_mirror

from llmchat.hub.catalogue import CATALOGUE

pytestmark = [pytest.mark.gpu, pytest.mark.model]
ENTRY = CATALOGUE["smollm2"]


@pytest.fixture
def make_app(tmp_path, monkeypatch):
    monkeypatch.setenv("TOGA_BACKEND", "toga_dummy")
    monkeypatch.setenv("TOGA_DUMMY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LLMCHAT_APP_MIRROR", raising=False)
    from llmchat_app.app import main
    apps = []

    def make(**kwargs):
        apps.append(main(**kwargs))
        return apps[-1]

    yield make
    for app in apps:
        app.stop_work()
        app.engine.close()


def pump(app, until, timeout=300.0, what="the app"):
    """Run the app's event loop (the dummy backend has no main loop of its own) until `until()` holds."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; status: {app.model_status.text!r} / "
                                 f"{app.chat_status.text!r}")
        app.loop.run_until_complete(asyncio.sleep(0.02))


def press(button):
    assert button.enabled, f"{button.text} is disabled"
    button._impl.simulate_press()


def select_model(app, name):
    index = next(i for i, row in enumerate(app.model_table.data) if row.model == name)
    app.model_table._impl.simulate_selection(index)
    assert app.selected_entry().name == name


def row(app, name):
    return next(r for r in app.model_table.data if r.model == name)


def reply_rows(app):
    return [m for m in app.conversations.messages(app.conversation.id) if m.role == "assistant"]


def chat(app, text, **settings):
    app.message_input.value = text
    for field, value in settings.items():
        getattr(app, f"{field}_input").value = value
    press(app.send_button)
    pump(app, lambda: app.reply is None, what="the reply")
    return reply_rows(app)[-1]


def api_reply(llm, messages, **sampling):
    llm.reset_chat()
    events = list(llm.chat(messages, **sampling))
    return [e.token for e in events if e.token is not None], "".join(e.text for e in events)


def test_the_app_as_a_user_drives_it(make_app, smollm2_path):
    import llmchat

    with model_mirror(smollm2_path, cut_at=ENTRY.size // 4) as server:
        app = make_app(mirror=mirror_url(server))
        pump(app, lambda: app.adapter is not None, what="the adapter")
        assert "Adapter: " in app.device_text.value and "Max storage binding" in app.device_text.value
        assert "smollm2: ?" in app.device_text.value  # not downloaded: checked from its header before download
        assert app.free_label.text.startswith("Free storage: ")

        # On an adapter with a phone-sized binding limit the model is refused from its header, with the numbers.
        select_model(app, "smollm2")
        real = app.adapter
        app.adapter = dataclasses.replace(real, max_binding_size=4 << 20)
        press(app.download_button)
        pump(app, lambda: not app.download_thread.is_alive() and "cannot run" in app.model_status.text,
             what="the refusal")
        assert "4 MiB binding limit" in app.model_status.text and "The Device screen shows what fits" in app.model_status.text
        assert row(app, "smollm2").fits == "no" and row(app, "smollm2").on_this_device == "not downloaded"
        app.adapter = real

        # Download: the header is checked against the adapter, the connection drops at 25% (the reader resumes it),
        # the user pauses at about half, and the app is closed.
        press(app.download_button)
        pump(app, lambda: app.progress.value > 0.5, what="half the download")
        press(app.pause_button)
        pump(app, lambda: "resumes from there" in app.model_status.text, what="the pause")
        assert not app.download_thread.is_alive()
        assert server.faults.drop_model_at is None, "the connection was never cut"
        assert row(app, "smollm2").on_this_device.startswith("partial: ")
        assert row(app, "smollm2").fits == "yes"

        # A new app on the same data folder resumes and verifies.
        app = make_app(mirror=mirror_url(server))
        select_model(app, "smollm2")
        press(app.download_button)
        pump(app, lambda: "verified" in app.model_status.text or not app.download_thread.is_alive(),
             what="the download")
        pump(app, lambda: not app.download_thread.is_alive())
        assert "downloaded and verified (sha256)" in app.model_status.text, app.model_status.text
        assert row(app, "smollm2").on_this_device == "downloaded"
        assert server.log.model_bytes < ENTRY.size * 1.2  # resumed, not downloaded twice

    # Chat: greedy with a system prompt, then a seeded sample; tokens equal the Python API's.
    press(app.use_button)
    assert app.tabs.current_tab.text == "Chat"
    app.system_input.value = "You are a terse assistant."
    press(app.conversation_list.parent.children[1])  # "New": picks up the system prompt
    streamed = []
    original = app._token
    app._token = lambda text, token: (streamed.append(app.transcript.value), original(text, token))
    greedy = chat(app, "What is the capital of France?", temperature=0, max_tokens=12)
    assert greedy.state == "done" and greedy.tokens
    assert len(streamed) >= len(greedy.tokens) and streamed[0] != streamed[-1]  # the transcript grew token by token
    assert "done (" in app.chat_status.text

    llm = llmchat.load(str(app.store.path(ENTRY)))
    system = {"role": "system", "content": "You are a terse assistant."}
    question = {"role": "user", "content": "What is the capital of France?"}
    tokens, text = api_reply(llm, [system, question], max_tokens=12)
    assert list(greedy.tokens) == tokens and greedy.content == text

    press(app.conversation_list.parent.children[1])
    sampled = chat(app, "Name a colour.", temperature=0.9, max_tokens=10, seed=1234)
    tokens, text = api_reply(llm, [system, {"role": "user", "content": "Name a colour."}], max_tokens=10,
                             temperature=0.9, seed=1234)
    assert list(sampled.tokens) == tokens and sampled.content == text
    seeded_conversation = app.conversation.id

    # Stop: the reply ends early and is kept as stopped.
    app.message_input.value = "Write a long story about a dragon."
    app.max_tokens_input.value = 400
    press(app.send_button)
    assert app.stop_button.enabled and not app.send_button.enabled
    pump(app, lambda: app.reply is not None and len(app.reply[2]) >= 3, what="three tokens")
    press(app.stop_button)
    pump(app, lambda: app.reply is None, what="the stop")
    stopped = reply_rows(app)[-1]
    assert stopped.state == "stopped" and 3 <= len(stopped.tokens) < 400
    assert app.chat_status.text == "stopped" and "[stopped]" in app.transcript.value

    # A kill mid-reply: the app is gone after the reply's row was saved with its first tokens.
    app.message_input.value = "And then what happened?"
    press(app.send_button)
    pump(app, lambda: app.reply is not None and len(app.reply[2]) >= 9, what="nine tokens")
    killed, partial = app.conversation.id, reply_rows(app)[-1]
    # Saved every 8 tokens: what the UI has seen, rounded down (several tokens can arrive in one turn of the loop).
    assert partial.state == "writing" and len(partial.tokens) == len(app.reply[2]) // 8 * 8 >= 8
    app.stop_reply.set()  # the old engine stops computing; its UI loop never runs again, so nothing is finalized

    # Restart: every conversation is there, the killed reply is marked as cut, with what was saved.
    app = make_app()
    assert app.conversations.cut_on_start == 1
    assert "cut off" in app.chat_status.text
    titles = [item.title for item in app.conversation_list.items]
    assert titles == ["Name a colour. (smollm2)", "What is the capital of France? (smollm2)",
                      "New conversation (smollm2)"]
    assert app.conversation.id == killed == seeded_conversation
    cut = reply_rows(app)[-1]
    assert cut.state == "cut" and cut.tokens == partial.tokens and "[cut off" in app.transcript.value
    first = next(item for item in app.conversation_list.items if item.title.startswith("What is the capital"))
    app.conversation_list._impl.simulate_selection(first)
    assert greedy.content in app.transcript.value and app.system_input.value == system["content"]

    # Delete the model.
    app.tabs.current_tab = 0
    select_model(app, "smollm2")
    press(app.delete_button)
    assert "deleted smollm2 (98.4 MB freed)" == app.model_status.text
    assert row(app, "smollm2").on_this_device == "not downloaded"
    assert not app.store.path(ENTRY).exists()
    app.message_input.value = "Hello?"
    app.tabs.current_tab = 1
    press(app.send_button)
    assert "not downloaded" in app.chat_status.text
