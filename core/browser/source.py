"""A byte source inside Pyodide: the model as the browser worker's model store holds it (web/model-store.js).

The store answers `read(offset, length)` from persistent storage (OPFS) for bytes it has, and with an HTTP Range
request for bytes it has not downloaded yet, which is how the header is parsed (and the model judged) before any
weights are fetched. Reads are JS promises, awaited with `pyodide.ffi.run_sync`.

The source also exposes the store itself as `js_store`: the browser device's `write_from` gives it to JS, which
then copies weights into GPU buffers without the bytes ever becoming Python objects.
"""
from __future__ import annotations

from ..errors import SourceError
from ..gguf.sources import Source


class BrowserSource(Source):
    def __init__(self, store) -> None:
        from pyodide.ffi import JsException, run_sync
        self._run_sync, self._JsException = run_sync, JsException
        self.js_store = store
        self.name = str(store.url)
        self.size = int(store.size)
        self._closed = False

    def read(self, offset: int, length: int) -> bytes:
        if self._closed:
            raise SourceError(f"{self.name}: read after close")
        self._check_range(offset, length)
        if length == 0:
            return b""
        try:
            data = self._run_sync(self.js_store.read(offset, length))
        except self._JsException as e:
            raise SourceError(f"{self.name}: {e}") from None
        return data.to_bytes()

    def close(self) -> None:
        self._closed = True
