"""Toga's GTK backend on Debian 12. Its GLib (2.74) has no libgirepository-2.0, so PyGObject 3.50 is the newest
that builds there, and toga-gtk 0.5.4 the newest that runs on it (pyproject.toml's bookworm section). From 0.5.3 on,
toga-gtk's MultilineTextInput waits after each change for GTK's pending events (`while Gtk.events_pending():
Gtk.main_iteration_do(False)`). Under PyGObject 3.50's asyncio loop each such iteration, outside an asyncio
callback (the app's start-up, a button's handler), detaches and re-attaches the loop's own source, which is then
pending again: the wait never ends and the app hangs in start-up. On that PyGObject the wait is bounded here; later
PyGObjects and other backends are left as they are."""
from __future__ import annotations

from collections.abc import Callable

FLUSH_LIMIT = 1000  # GTK iterations one text change waits for at most (a change needs a few dozen)


def needs_bounded_flush(backend: str, pygobject: tuple[int, ...]) -> bool:
    return backend.split(".")[0] == "toga_gtk" and tuple(pygobject) < (3, 51)


def bounded_flush(gtk, limit: int = FLUSH_LIMIT) -> Callable[[object], None]:
    """A replacement for toga-gtk's `Widget.flush_gtk_events` (GTK 3) that stops after `limit` iterations."""
    def flush_gtk_events(self) -> None:
        for _ in range(limit):
            if not gtk.events_pending():
                return
            gtk.main_iteration_do(False)

    return flush_gtk_events


def apply(backend: str) -> bool:
    """Bound the wait when `backend` (Toga's, `toga.platform.get_backend()`) is toga-gtk on GTK 3 over PyGObject
    < 3.51; True if it did."""
    if backend.split(".")[0] != "toga_gtk":
        return False  # before importing gi, which the other backends do not have
    import gi

    if not needs_bounded_flush(backend, gi.version_info):
        return False
    from toga_gtk.widgets import base

    if not hasattr(base.Widget, "flush_gtk_events") or getattr(base, "GTK_VERSION", (3,)) >= (4, 0, 0):
        return False
    from gi.repository import Gtk

    base.Widget.flush_gtk_events = bounded_flush(Gtk)
    return True
