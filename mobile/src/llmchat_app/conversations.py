"""Conversations in SQLite, in the app's data folder.

A reply is written as a row in state "writing" before its first token and updated as it grows, then finalized
("done", or "stopped" when the user pressed Stop). A reply whose app was killed mid-way is found in state
"writing" at the next start and becomes "cut": shown as cut, never silently dropped, never passed off as whole.
"""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

WRITING, DONE, STOPPED, CUT, FAILED = "writing", "done", "stopped", "cut", "failed"

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, model TEXT NOT NULL, system_prompt TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, conversation INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL, content TEXT NOT NULL, state TEXT NOT NULL, tokens TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True)
class Message:
    id: int
    role: str
    content: str
    state: str
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    model: str
    system_prompt: str


class ConversationStore:
    """One connection, used from the UI thread only (the engine thread hands its tokens over to the UI)."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(str(path))
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.execute("PRAGMA journal_mode = WAL")  # a kill mid-write leaves the last committed state
        self.db.executescript(SCHEMA)
        with self.db:
            self.cut_on_start = self.db.execute("UPDATE messages SET state = ? WHERE state = ?",
                                                (CUT, WRITING)).rowcount

    def close(self) -> None:
        self.db.close()

    def new_conversation(self, model: str, system_prompt: str = "", title: str = "New conversation") -> Conversation:
        with self.db:
            cur = self.db.execute("INSERT INTO conversations (title, model, system_prompt, created) VALUES (?, ?, ?, ?)",
                                  (title, model, system_prompt, time.time()))
        return Conversation(cur.lastrowid, title, model, system_prompt)

    def conversations(self) -> list[Conversation]:
        rows = self.db.execute("SELECT id, title, model, system_prompt FROM conversations ORDER BY id DESC")
        return [Conversation(*r) for r in rows]

    def conversation(self, conversation_id: int) -> Conversation:
        row = self.db.execute("SELECT id, title, model, system_prompt FROM conversations WHERE id = ?",
                              (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return Conversation(*row)

    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        with self.db:
            self.db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", (system_prompt, conversation_id))

    def add_user(self, conversation_id: int, text: str) -> Message:
        with self.db:
            if not self.messages(conversation_id):
                self.db.execute("UPDATE conversations SET title = ? WHERE id = ?", (text[:40], conversation_id))
            return self._insert(conversation_id, "user", text, DONE)

    def begin_reply(self, conversation_id: int) -> Message:
        with self.db:
            return self._insert(conversation_id, "assistant", "", WRITING)

    def update_reply(self, message_id: int, content: str, tokens: list[int]) -> None:
        with self.db:
            self.db.execute("UPDATE messages SET content = ?, tokens = ? WHERE id = ? AND state = ?",
                            (content, _ids(tokens), message_id, WRITING))

    def finish_reply(self, message_id: int, content: str, tokens: list[int], state: str = DONE) -> None:
        with self.db:
            self.db.execute("UPDATE messages SET content = ?, tokens = ?, state = ? WHERE id = ?",
                            (content, _ids(tokens), state, message_id))

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self.db.execute("SELECT id, role, content, state, tokens FROM messages WHERE conversation = ? "
                               "ORDER BY id", (conversation_id,))
        return [Message(i, role, content, state, tuple(int(t) for t in tokens.split(",") if t))
                for i, role, content, state, tokens in rows]

    def delete_conversation(self, conversation_id: int) -> None:
        with self.db:
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def setting(self, key: str, default: str = "") -> str:
        row = self.db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def set_setting(self, key: str, value: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", (key, value))

    def _insert(self, conversation_id: int, role: str, content: str, state: str) -> Message:
        cur = self.db.execute("INSERT INTO messages (conversation, role, content, state, created) VALUES (?, ?, ?, ?, ?)",
                              (conversation_id, role, content, state, time.time()))
        return Message(cur.lastrowid, role, content, state, ())


def chat_messages(conversation: Conversation, messages: list[Message]) -> list[dict]:
    """The history the model sees: the system prompt, then every message as the user saw it (a cut or stopped reply
    is part of the conversation as far as it went; a failed one never produced text)."""
    out = [{"role": "system", "content": conversation.system_prompt}] if conversation.system_prompt else []
    return out + [{"role": m.role, "content": m.content} for m in messages if m.state != FAILED]


def _ids(tokens: list[int]) -> str:
    return ",".join(map(str, tokens))
