"""Errors the app shows to its user; each says what to do. They join llmchat's family so one handler catches all."""
from llmchat.errors import LLMChatError, SourceError


class StorageFullError(LLMChatError):
    """The disk filled up during a download. What was written is kept, so the download resumes once space is freed;
    `needed` is how many more bytes the model needs."""

    def __init__(self, message: str, needed: int):
        super().__init__(message)
        self.needed = needed


class DownloadInterruptedError(SourceError):
    """The connection failed (after the reader's own retries) or the user cancelled: the bytes so far are kept and
    the next download goes on from them."""


class ChecksumMismatchError(SourceError):
    """The downloaded file's sha256 is not the catalogue's: the file was discarded."""


class NoSourceError(SourceError):
    """The catalogue names no URL this app can download the model from (it lives in a PyPI wheel) and no mirror is
    configured."""
