"""llmchat_app: a chat app for phones and laptops over llmchat's Python API (Toga; packaged with Briefcase).

The logic lives in plain modules (store, downloads, conversations, engine_thread, device_report, platform) so it
is tested without a GUI; app.py is the thin Toga layer over them."""

__version__ = "0.1.0"
