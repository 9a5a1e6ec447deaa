"""The Toga layer: three screens (Models, Chat, Device) over the plain modules. Handlers only read widgets, start
work on the engine or download thread, and render what comes back; nothing here blocks on the GPU or the network.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import toga
from toga.platform import get_backend
from toga.style import Pack

from llmchat.errors import LLMChatError

from .conversations import CUT, DONE, FAILED, STOPPED, WRITING, ConversationStore, chat_messages
from .device_report import adapter_lines, fit, storage_line
from .downloads import download
from .engine_thread import ChatSettings, EngineThread
from .gtk_compat import apply as apply_gtk_compat
from .platform import PHONES, android_native_lib_dir, configure_wgpu_library, device_kind
from .store import ModelStore, human

SAVE_EVERY = 8  # tokens between saves of a growing reply: a kill loses at most this many
STATE_NOTE = {STOPPED: " [stopped]", CUT: " [cut off: the app closed while writing this reply]",
              WRITING: " …", FAILED: " [failed]"}


class LLMChatApp(toga.App):
    def __init__(self, *args, mirror: str | None = None, **kwargs):
        self._mirror = mirror
        super().__init__(*args, **kwargs)

    # -- start-up -----------------------------------------------------------------------------------------------
    def startup(self):
        data = Path(self.paths.data)
        data.mkdir(parents=True, exist_ok=True)
        self.kind = device_kind()
        self.library_error = ""
        try:
            native = android_native_lib_dir(self) if self.kind == "android" else None
            self.wgpu_library = configure_wgpu_library(self.kind, Path(__file__).resolve().parents[1], native)
        except LLMChatError as e:
            self.wgpu_library, self.library_error = None, str(e)
        self.conversations = ConversationStore(data / "conversations.sqlite3")
        mirror = self._mirror or os.environ.get("LLMCHAT_APP_MIRROR") or self.conversations.setting("mirror")
        self.store = ModelStore(data / "models", mirror or None)
        self.engine = EngineThread(self.post, self.kind)
        self.adapter = None
        self.download_cancel: threading.Event | None = None
        self.download_thread: threading.Thread | None = None
        self.stop_reply: threading.Event | None = None
        self.reply = None  # (message id, text, tokens) of the reply being written
        self.conversation = None

        self.tabs = toga.OptionContainer(content=[("Models", self._models_screen()), ("Chat", self._chat_screen()),
                                                  ("Device", self._device_screen())], style=Pack(flex=1))
        self.main_window = toga.MainWindow(title=self.formal_name)
        self.main_window.content = self.tabs
        self.main_window.show()
        self.refresh_models()
        self.refresh_conversations()
        if self.conversations.cut_on_start:
            self.chat_status.text = (f"{self.conversations.cut_on_start} reply was cut off when the app closed; it "
                                     "is kept and marked as cut")
        self.refresh_device()

    def post(self, fn, *args) -> None:
        """Run fn(*args) on the UI thread (called from worker threads)."""
        self.loop.call_soon_threadsafe(fn, *args)

    def on_exit(self):
        self.stop_work()
        return True

    def stop_work(self) -> None:
        """Pause the download and stop the reply: both are kept for the next start."""
        if self.download_cancel is not None:
            self.download_cancel.set()
        if self.stop_reply is not None:
            self.stop_reply.set()

    # -- Models screen ------------------------------------------------------------------------------------------
    def _models_screen(self) -> toga.Box:
        self.free_label = toga.Label("")
        self.model_table = toga.Table(columns=["Model", "Size", "On this device", "Fits"], style=Pack(flex=1),
                                      on_select=self._model_selected)
        self.download_button = toga.Button("Download", on_press=self.start_download)
        self.pause_button = toga.Button("Pause", on_press=self.pause_download)
        self.delete_button = toga.Button("Delete", on_press=self.delete_model)
        self.use_button = toga.Button("Chat with it", on_press=self.use_model)
        self.progress = toga.ProgressBar(max=1.0, style=Pack(flex=1))
        self.model_status = toga.Label("")
        self.mirror_input = toga.TextInput(placeholder="model mirror URL (optional)", style=Pack(flex=1))
        self.mirror_input.value = self.store.mirror or ""
        buttons = toga.Box(children=[self.download_button, self.pause_button, self.delete_button, self.use_button])
        mirror = toga.Box(children=[self.mirror_input, toga.Button("Set", on_press=self.set_mirror)])
        return toga.Box(children=[self.free_label, self.model_table, buttons, self.progress, self.model_status, mirror],
                        style=Pack(direction="column", margin=8))

    def refresh_models(self) -> None:
        fits = getattr(self, "fits", {})
        rows = []
        for entry in self.store.entries():
            state = self.store.state(entry)
            verdict = fits.get(entry.name)
            rows.append((entry.name, human(entry.size), state.label,
                         "?" if verdict is None or verdict.fits is None else "yes" if verdict.fits else "no"))
        if len(self.model_table.data) != len(rows):
            self.model_table.data = rows
        else:  # rows are updated in place, so the user's selection stays
            for shown, (_, _, on_device, fits_here) in zip(self.model_table.data, rows):
                shown.on_this_device, shown.fits = on_device, fits_here
        self.free_label.text = storage_line(self.store)

    def selected_entry(self):
        row = self.model_table.selection
        return None if row is None else next(e for e in self.store.entries() if e.name == row.model)

    def _model_selected(self, widget, **kwargs) -> None:
        entry = self.selected_entry()
        if entry is not None:
            verdict = getattr(self, "fits", {}).get(entry.name)
            self.model_status.text = f"{entry.description}" + (f" — {verdict.detail}" if verdict else "")

    def set_mirror(self, widget, **kwargs) -> None:
        value = self.mirror_input.value.strip()
        self.conversations.set_setting("mirror", value)
        self.store.mirror = value.rstrip("/") or None
        self.model_status.text = f"models come from {value}" if value else "models come from their catalogue source"

    def start_download(self, widget, **kwargs) -> None:
        entry = self.selected_entry()
        if entry is None:
            self.model_status.text = "pick a model first"
            return
        if self.download_thread is not None and self.download_thread.is_alive():
            self.model_status.text = "a download is already running"
            return
        state = self.store.state(entry)
        need, free = entry.size - state.have, self.store.free_bytes()
        if need > free:
            self.model_status.text = (f"not enough storage: {entry.name} needs {human(need)} more, "
                                      f"{human(free)} is free")
            return
        self.download_cancel = threading.Event()
        info = self.adapter
        fitting = [name for name, f in getattr(self, "fits", {}).items() if f.fits]
        self.model_status.text = f"checking that {entry.name} fits this device…" if info else f"downloading {entry.name}"

        def work():
            try:
                if info is not None:  # read the header first: no gigabytes for a model that cannot run here
                    verdict = fit(self.store, entry, info)
                    self.post(self._remember_fit, verdict)
                    if verdict.fits is False:
                        raise LLMChatError(verdict.detail + (f". Models that fit here: {', '.join(fitting)}" if fitting
                                                             else ". The Device screen shows what fits"))
                path = download(self.store, entry, cancel=self.download_cancel,
                                progress=lambda have, total: self.post(self._download_progress, entry, have, total))
            except Exception as e:
                self.post(self._download_failed, entry, e)
            else:
                self.post(self._download_done, entry, path)

        self.download_thread = threading.Thread(target=work, name="llmchat-download", daemon=True)
        self.download_thread.start()

    def _download_progress(self, entry, have: int, total: int) -> None:
        self.progress.value = have / total
        self.model_status.text = f"{entry.name}: {human(have)} of {human(total)}"

    def _download_done(self, entry, path) -> None:
        self.model_status.text = f"{entry.name} downloaded and verified (sha256)"
        self.progress.value = 1.0
        self.refresh_models()

    def _download_failed(self, entry, error: BaseException) -> None:
        self.model_status.text = str(error) if isinstance(error, LLMChatError) else f"{entry.name}: {error!r}"
        self.refresh_models()

    def _remember_fit(self, verdict) -> None:
        self.fits = {**getattr(self, "fits", {}), verdict.entry.name: verdict}

    def pause_download(self, widget, **kwargs) -> None:
        if self.download_cancel is not None:
            self.download_cancel.set()

    def delete_model(self, widget, **kwargs) -> None:
        entry = self.selected_entry()
        if entry is None:
            return
        if self.download_thread is not None and self.download_thread.is_alive():
            self.model_status.text = "pause the download before deleting"
            return
        if self.engine.model_path == str(self.store.path(entry)):
            self.engine.submit(self.engine.unload)
        freed = self.store.state(entry).have
        removed = self.store.delete(entry)
        self.model_status.text = (f"deleted {entry.name} ({human(freed)} freed)" if removed
                                  else f"{entry.name} is not on this device")
        self.refresh_models()

    def use_model(self, widget, **kwargs) -> None:
        entry = self.selected_entry()
        if entry is None or not self.store.state(entry).complete:
            self.model_status.text = "download the model first"
            return
        self.conversations.set_setting("model", entry.name)
        self.new_conversation(None)
        self.tabs.current_tab = 1

    # -- Chat screen --------------------------------------------------------------------------------------------
    def _chat_screen(self) -> toga.Box:
        self.conversation_list = toga.Selection(on_change=self._conversation_picked, style=Pack(flex=1),
                                                accessor="title")
        self.system_input = toga.TextInput(placeholder="system prompt", style=Pack(flex=1))
        self.temperature_input = toga.NumberInput(min=0, max=2, step=0.05, value=0)
        self.max_tokens_input = toga.NumberInput(min=1, max=8192, step=1, value=256)
        self.seed_input = toga.NumberInput(min=0, step=1, value=None)
        self.transcript = toga.MultilineTextInput(readonly=True, style=Pack(flex=1))
        self.message_input = toga.TextInput(placeholder="message", style=Pack(flex=1), on_confirm=self.send)
        self.send_button = toga.Button("Send", on_press=self.send)
        self.stop_button = toga.Button("Stop", on_press=self.stop, enabled=False)
        self.chat_status = toga.Label("")
        settings = toga.Box(children=[toga.Label("Temperature"), self.temperature_input, toga.Label("Max tokens"),
                                      self.max_tokens_input, toga.Label("Seed"), self.seed_input])
        top = toga.Box(children=[self.conversation_list, toga.Button("New", on_press=self.new_conversation)])
        bottom = toga.Box(children=[self.message_input, self.send_button, self.stop_button])
        return toga.Box(children=[top, self.system_input, settings, self.transcript, bottom, self.chat_status],
                        style=Pack(direction="column", margin=8))

    def refresh_conversations(self) -> None:
        items = [{"title": f"{c.title} ({c.model})", "id": c.id} for c in self.conversations.conversations()]
        self._refreshing = True
        self.conversation_list.items = items
        if self.conversation is not None:
            for item in self.conversation_list.items:
                if item.id == self.conversation.id:
                    self.conversation_list.value = item
        self._refreshing = False
        if self.conversation is None and items:
            self.open_conversation(items[0]["id"])

    def _conversation_picked(self, widget, **kwargs) -> None:
        item = self.conversation_list.value
        if not getattr(self, "_refreshing", False) and item is not None:
            self.open_conversation(item.id)

    def open_conversation(self, conversation_id: int) -> None:
        if self.stop_reply is not None and self.reply is not None:
            self.chat_status.text = "stop the reply before switching conversations"
            return
        self.conversation = self.conversations.conversation(conversation_id)
        self.system_input.value = self.conversation.system_prompt
        self.engine.reset_chat()
        self.render_transcript()

    def new_conversation(self, widget, **kwargs) -> None:
        model = self.conversations.setting("model")
        if not model:
            self.chat_status.text = "pick a downloaded model on the Models screen first"
            return
        self.conversation = self.conversations.new_conversation(model, self.system_input.value or "")
        self.engine.reset_chat()
        self.refresh_conversations()
        self.render_transcript()

    def render_transcript(self, live: str | None = None) -> None:
        lines = []
        if self.conversation is not None:
            if self.conversation.system_prompt:
                lines.append(f"System: {self.conversation.system_prompt}")
            for m in self.conversations.messages(self.conversation.id):
                text = live if live is not None and self.reply and m.id == self.reply[0] else m.content
                who = "You" if m.role == "user" else "Assistant"
                lines.append(f"{who}: {text}{STATE_NOTE.get(m.state, '') if m.state != WRITING or live is None else ' …'}")
        self.transcript.value = "\n\n".join(lines)

    def send(self, widget, **kwargs) -> None:
        text = (self.message_input.value or "").strip()
        if not text or self.reply is not None:
            return
        if self.conversation is None:
            self.new_conversation(None)
            if self.conversation is None:
                return
        entry = next((e for e in self.store.entries() if e.name == self.conversation.model), None)
        if entry is None or not self.store.state(entry).complete:
            self.chat_status.text = f"{self.conversation.model} is not downloaded: download it on the Models screen"
            return
        system = self.system_input.value or ""
        if system != self.conversation.system_prompt:
            self.conversations.set_system_prompt(self.conversation.id, system)
            self.conversation = self.conversations.conversation(self.conversation.id)
        self.conversations.add_user(self.conversation.id, text)
        reply = self.conversations.begin_reply(self.conversation.id)
        history = chat_messages(self.conversation, self.conversations.messages(self.conversation.id)[:-1])
        self.reply = (reply.id, "", [])
        self.message_input.value = ""
        self.send_button.enabled, self.stop_button.enabled = False, True
        self.chat_status.text = "loading the model…" if self.engine.model_path != str(self.store.path(entry)) else ""
        self.render_transcript(live="")
        settings = ChatSettings(temperature=float(self.temperature_input.value or 0),
                                max_tokens=int(self.max_tokens_input.value or 256),
                                seed=None if self.seed_input.value is None else int(self.seed_input.value))
        path = str(self.store.path(entry))
        self.stop_reply = self.engine.chat(history, settings, model_path=path, on_token=self._token,
                                           on_finish=self._finished, on_error=self._failed)

    def _token(self, text: str, token: int | None) -> None:
        if self.reply is None:
            return
        message_id, content, tokens = self.reply
        content += text
        if token is not None:
            tokens.append(token)
        self.reply = (message_id, content, tokens)
        self.chat_status.text = "writing…"
        if token is not None and len(tokens) % SAVE_EVERY == 0:
            self.conversations.update_reply(message_id, content, tokens)
        self.render_transcript(live=content)

    def _finished(self, reason: str, stats: dict) -> None:
        message_id, content, tokens = self.reply
        self.conversations.finish_reply(message_id, content, tokens, STOPPED if reason == "stopped" else DONE)
        self._end_reply()
        speed = stats.get("decode_tok_s")
        self.chat_status.text = ("stopped" if reason == "stopped" else
                                 f"done ({reason}{f', {speed:.1f} tokens/s' if speed else ''})")

    def _failed(self, error: BaseException) -> None:
        message_id, content, tokens = self.reply
        self.conversations.finish_reply(message_id, content, tokens, CUT if content else FAILED)
        self._end_reply()
        self.chat_status.text = str(error) if isinstance(error, LLMChatError) else f"error: {error!r}"

    def _end_reply(self) -> None:
        self.reply, self.stop_reply = None, None
        self.send_button.enabled, self.stop_button.enabled = True, False
        self.refresh_conversations()
        self.render_transcript()

    def stop(self, widget, **kwargs) -> None:
        if self.stop_reply is not None:
            self.stop_reply.set()
            self.chat_status.text = "stopping…"

    # -- Device screen ------------------------------------------------------------------------------------------
    def _device_screen(self) -> toga.Box:
        self.device_text = toga.MultilineTextInput(readonly=True, style=Pack(flex=1))
        return toga.Box(children=[self.device_text, toga.Button("Refresh", on_press=self.refresh_device)],
                        style=Pack(direction="column", margin=8))

    def refresh_device(self, widget=None, **kwargs) -> None:
        self.device_text.value = "asking the GPU…"
        store = self.store

        def job():
            info = self.engine.device().info
            return info, [fit(store, entry, info, remote=False) for entry in store.entries()]

        self.engine.submit(job, on_done=self._device_ready, on_error=self._device_failed)

    def _device_ready(self, result) -> None:
        self.adapter, fits = result
        self.fits = {f.entry.name: f for f in fits}
        lines = adapter_lines(self.adapter)
        if self.wgpu_library is not None:
            lines.append(f"wgpu-native: {self.wgpu_library}")
        if self.kind in PHONES:
            lines.append("Models load under the phone profile (capped limits, a GPU memory budget)")
        lines += ["", storage_line(self.store), "", "What fits (downloaded models are planned exactly; others are "
                  "checked from their header before they download):"]
        lines += [f"  {f.entry.name}: {'fits' if f.fits else 'does not fit' if f.fits is False else '?'} — {f.detail}"
                  for f in fits]
        self.device_text.value = "\n".join(lines)
        self.refresh_models()

    def _device_failed(self, error: BaseException) -> None:
        self.device_text.value = "\n".join(filter(None, [f"No GPU adapter: {error}", self.library_error]))


def main(**kwargs) -> LLMChatApp:
    apply_gtk_compat(get_backend())
    return LLMChatApp("LLMChat", "org.llmchat.llmchat_app", **kwargs)
