"""Toga's GTK backend and a wait that never ends. From 0.5.3 on, toga-gtk's MultilineTextInput waits after each
change for GTK's pending events (`while Gtk.events_pending(): Gtk.main_iteration_do(False)`). Outside an asyncio
callback (the app's start-up, a button's handler) each such iteration detaches and re-attaches the asyncio loop's
own GLib source, which can be pending again at once: under PyGObject 3.50 with toga-gtk 0.5.4 (the newest pair
that builds and runs on Debian 12, pyproject.toml's bookworm section) the wait never ended and the app hung in its
start-up, before the engine thread's first result could come back. Toga's issue #3943 reports the same hang on
newer GTK systems, so the wait is bounded wherever toga-gtk runs on GTK 3; a change needs a few dozen iterations."""
from __future__ import annotations

from collections.abc import Callable

FLUSH_LIMIT = 1000  # GTK iterations one text change waits for at most


def bounded_flush(gtk, limit: int = FLUSH_LIMIT) -> Callable[[object], None]:
    """A replacement for toga-gtk's `Widget.flush_gtk_events` (GTK 3) that stops after `limit` iterations."""
    def flush_gtk_events(self) -> None:
        for _ in range(limit):
            if not gtk.events_pending():
                return
            gtk.main_iteration_do(False)

    return flush_gtk_events


def apply(backend: str) -> bool:
    """Bound the wait when `backend` (Toga's, `toga.platform.get_backend()`) is toga-gtk on GTK 3 (toga-gtk's
    experimental GTK 4 is left alone); True if it did."""
    if backend.split(".")[0] != "toga_gtk":
        return False  # before importing toga_gtk and gi, which the other backends do not have
    from toga_gtk.widgets import base

    if not hasattr(base.Widget, "flush_gtk_events") or getattr(base, "GTK_VERSION", (3,)) >= (4, 0, 0):
        return False
    from gi.repository import Gtk

    base.Widget.flush_gtk_events = bounded_flush(Gtk)
    return True
