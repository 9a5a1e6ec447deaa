"""The Python half of the browser worker (web/worker.js): judge a model before downloading it, load it onto the
page's GPU, and answer the JS API's requests in OpenAI's shapes (llmchat.protocol, as the server does).

Entry points are called from JS through promising calls (JSPI), so the core below may wait on JS promises with
`run_sync`. Payloads cross as JSON text: one conversion each way, no proxies to leak.
"""
from __future__ import annotations

import json
import time

from ..api import LLM
from .source import BrowserSource
from ..chat.template import jinja_environment
from ..runtime.chat_cache import ChatCacheError
from ..errors import FieldError, InvalidRequestError, SourceError, error_class
from ..gguf.file import GGUFFile, open_gguf
from .device import BrowserDevice
from ..gpu.device import AdapterInfo
from ..gpu.tune import MemoryStore
from ..hub.catalogue import model_title
from ..runtime.memory import plan_memory
from ..models import model_config
from ..protocol import Completion, Piece, read_request
from ..tokenizer.pretokenize import SUPPORTED, get_pre_tokenizer

# The tuner's results in OPFS (web/worker.js reads and writes it): {cache key: entry}, as gpu/tune.py keeps them.
TUNE_FILE = "llmchat-tune.json"

# Tokens one prefill step takes (the engine's `max_tokens_per_step`): activations and logits are sized for it.
STEP_TOKENS = 64


class _Session:
    """What the worker's calls share, one model at a time."""

    def __init__(self) -> None:
        self.device: BrowserDevice | None = None
        self.gguf: GGUFFile | None = None  # opened by `check`, taken by `load`
        self.llm: LLM | None = None
        self.chat_key: str | None = None  # the prompt_cache_key of the conversation the engine holds
        self.name = ""  # the model's name in replies and status lines (hub.catalogue.model_title)

    def take_gguf(self) -> GGUFFile | None:
        gguf, self.gguf = self.gguf, None
        return gguf


_session = _Session()


def _make_ahead() -> None:
    """Make at import what every load makes the same way: the worker snapshots the interpreter once this module is
    imported (web/python.js), so loads restored from the snapshot find them made. On SwiftShader's 2 cores a load
    spent 0.15-0.20 s importing jinja2 (with the standard-library modules it needs, compiled from source) and
    ~0.09 s compiling its pre-tokenizer's regular expressions."""
    jinja_environment()
    for name in SUPPORTED:
        get_pre_tokenizer(name)


_make_ahead()


def plan(gguf: GGUFFile, info: AdapterInfo, context: int | None, gpu_budget: int = 0) -> dict:
    """What the model needs on this adapter, in bytes (llmchat.runtime.memory's plan, from the header alone, so it runs
    before a single weight is downloaded); ModelTooLargeError/UnsupportedModelError if it cannot run.

    `gpu_budget` is an estimate of the memory the GPU may use (0: unknown); WebGPU does not tell, so the worker
    derives it from `navigator.deviceMemory` when that says little memory (the value is capped at 8 GiB for privacy).
    """
    result = plan_memory(gguf, info, context=context, step_tokens=STEP_TOKENS, gpu_budget=gpu_budget).as_dict()
    config = model_config(gguf)
    return {**result, "model": model_title(gguf), "vocab": config.vocab_size, "layers": config.n_layer}


def open_model(store, open_shard=None) -> GGUFFile:
    """The model in `store`; a split model's other shards come from `open_shard(url)`, a JS function that resolves
    to their stores (the worker opens each once). The shard rules (names, split.* keys) are core/gguf.py's."""
    if open_shard is None:
        return open_gguf(BrowserSource(store))
    from pyodide.ffi import JsException, run_sync

    def opener(name: str) -> BrowserSource:
        try:
            return BrowserSource(run_sync(open_shard(name)))
        except JsException as e:  # open_gguf names the shard that is missing
            raise SourceError(str(e)) from None
    return open_gguf(BrowserSource(store), opener=opener)


def check(store, bridge, context: int | None, gpu_budget: int, profile: str | None = None, open_shard=None) -> str:
    """Parse the header (Range reads, no weights) and judge the model on this adapter, capped by the device
    `profile` the page named (llmchat.gpu.profiles; its GPU memory budget counts with `gpu_budget`). Returns the
    plan as JSON."""
    device = BrowserDevice(bridge, profile=profile or None)
    gguf = open_model(store, open_shard)
    try:
        result = plan(gguf, device.info, context, gpu_budget)
    except BaseException:
        gguf.close()
        raise
    # Kept for `load`: parsing the header again (a vocabulary's strings) would cost the load ~0.4 s on SwiftShader.
    _session.device, _session.gguf = device, gguf
    result["adapter"] = device.info.as_dict()
    return json.dumps(result)


def load(store, context: int, open_shard=None, tune: bool | None = None, tune_json: str | None = None) -> str:
    """Build the model on the GPU from the store's (now local) bytes; returns load facts as JSON.

    `tune` turns the kernel tuner on or off (None: gpu/tune.py's default, off on software adapters); `tune_json` is
    the text of the tuning results the worker keeps in OPFS (TUNE_FILE). The facts carry what tuning chose
    ("tuning", as `llmchat bench` reports it) and, when it measured, the results to write back ("tune_json")."""
    t0 = time.perf_counter()
    try:
        entries = json.loads(tune_json) if tune_json else {}
    except ValueError:
        entries = {}  # unreadable: measure again, and the rewrite replaces it
    cache = MemoryStore(entries if isinstance(entries, dict) else {}, place=f"opfs:{TUNE_FILE}")
    gguf = _session.take_gguf() or open_model(store, open_shard)
    llm = LLM(gguf, context=context, device=_session.device, max_tokens_per_step=STEP_TOKENS,
              tune=tune, tune_store=cache)
    llm.runtime.engine.warm_up(1)  # the decode step: the load waits for its kernels
    _session.llm, _session.name = llm, model_title(gguf)
    report = llm.runtime.report()
    return json.dumps({"load_s": time.perf_counter() - t0, "context": llm.context,
                       "dispatches_per_token": report["dispatches_per_token"], "tuning": report["kernels"],
                       "tune_json": json.dumps(cache.entries) if cache.changed else None})


def prepare_prompt() -> None:
    """Record the prompt step of a short reply (greedy sampling) without waiting for its kernels: they compile
    from now on, while the last weights upload, rather than when a prompt comes (on SwiftShader its matmul tiles
    take seconds each); a prompt that comes before they are done waits for the rest. The worker calls this once
    `load` has returned, so it can tell the kernels the load waited for from these (worker.js saveKernels)."""
    _session.llm.runtime.engine.warm_up(STEP_TOKENS, wait=False)


def sweep(rounds: int) -> str:
    """Every kernel variant the tuner chooses among, timed at the loaded model's shapes (Runtime.sweep_kernels), as
    JSON."""
    return json.dumps(_session.llm.runtime.sweep_kernels(int(rounds)))


def chat(request: str, emit, should_stop, cache=None) -> None:
    """Answer `request` (JSON: a chat completion body with `messages`, or a text completion's with `prompt`), read
    by llmchat.protocol as the server reads it. The page's engine has filled in the browser's defaults for what a
    call left out (web/request-defaults.js), the same on the device and through an endpoint.

    `emit(json)` receives {"chunk": ...} per OpenAI stream chunk and then {"done": true} when the request streams;
    otherwise only {"response": ...}, the whole answer. Chunks carry llmchat's fields under "llmchat": each token's
    id ("token"); while the prompt is read, before each of its steps, "prefill": {"done", "total"} (prompt tokens
    computed so far and in all, cached ones left out) in a chunk of its own; at the finish "timings" and
    "kv_cache". `should_stop()`, a JS function whose promise gives the worker's event loop a turn first (a prompt's
    steps read nothing back from the GPU, so nothing else would let the stop message in), is awaited before each
    prompt step and before each token is sent: a stop (the stop button) ends the reply within a step, no token
    after it, with finish_reason "abort", as WebLLM reports a user's stop (its usage counts the prompt and the
    tokens sent). The conversation keeps its KV cache across calls: a request that repeats the previous turns only
    computes the new tokens.

    A chat request with `prompt_cache_key` keeps that conversation's KV cache in OPFS too: `cache` is a JS object
    {handle (the key's file, a FileSystemSyncAccessHandle), identity (of the model's bytes), error (why there is
    no handle)} from the worker. Before the reply, a conversation this engine does not hold is restored from it;
    after a finished reply it is saved (LLM.save_chat writes only what changed). "kv_cache" says what happened.
    """
    llm: LLM = _session.llm
    body = json.loads(request)
    is_chat = "prompt" not in body
    if is_chat and "messages" not in body:
        raise FieldError("a request needs `messages` (a chat) or `prompt` (a text completion)", "messages")
    asked = read_request(body, chat=is_chat, vocab_size=llm.runtime.config.vocab_size)
    if asked.top_logprobs is not None:
        raise FieldError("the browser runtime does not report log-probabilities; leave `logprobs` out", "logprobs")
    kept = _kept_chat(llm, body.get("prompt_cache_key"), cache) if is_chat else None
    completion = Completion(chat=is_chat, model=_session.name, include_usage=asked.include_usage)

    def send(chunk) -> None:
        if asked.stream and chunk is not None:
            emit(json.dumps({"chunk": chunk}))

    from pyodide.ffi import run_sync  # inside Pyodide only: this module imports natively too

    def stopped() -> bool:
        return bool(run_sync(should_stop()))

    def prefill(done: int, total: int) -> None:
        send(completion.take(0, Piece(extension={"prefill": {"done": done, "total": total}})))

    pieces = llm.answer(asked, messages=body.get("messages"), prompt=body.get("prompt"), on_prefill=prefill,
                        should_stop=stopped)
    for chunk in completion.opening():
        send(chunk)
    for piece in pieces:
        if piece.finish_reason is None:
            piece.extension = {"token": piece.token}
        else:  # a stopped turn is not saved to OPFS (the engine still holds what it computed of it)
            whole = piece.finish_reason != "abort"
            piece.extension["kv_cache"] = kept.save() if kept and whole else None
        send(completion.take(0, piece))
    for chunk in completion.closing():
        send(chunk)
    emit(json.dumps({"done": True} if asked.stream else {"response": completion.response()}))


def error_code(name: str) -> str:
    """The code a page receives for the Python error class `name`: the one its class says (llmchat.errors), or
    "python" for an error that is not llmchat's own (a bug)."""
    cls = error_class(name)
    return cls.code if cls is not None else "python"


class OPFSFile:
    """chat_cache.ChatFile over an OPFS FileSystemSyncAccessHandle (synchronous calls in a dedicated worker)."""

    def __init__(self, handle) -> None:
        self._handle = handle

    def size(self) -> int:
        return int(self._handle.getSize())

    def read(self, offset: int, size: int) -> bytes:
        from js import Uint8Array
        buffer = Uint8Array.new(size)
        n = self._handle.read(buffer, _at(offset))
        return buffer.subarray(0, n).to_bytes()

    def write(self, offset: int, data: bytes) -> None:
        from pyodide.ffi import to_js
        self._handle.write(to_js(memoryview(data)), _at(offset))

    def truncate(self, size: int) -> None:
        self._handle.truncate(size)


def _at(offset: int):
    from js import Object
    from pyodide.ffi import to_js
    return to_js({"at": offset}, dict_converter=Object.fromEntries)


class _KeptChat:
    """One request's use of a conversation kept in OPFS under its prompt_cache_key: the restore before it (done
    in the constructor) and the save after it, reported as the reply's "kv_cache"."""

    def __init__(self, llm: LLM, key: str, cache) -> None:
        self.llm, self.report = llm, {}
        self.file = OPFSFile(cache.handle) if cache and cache.handle else None
        self.identity = str(cache.identity) if cache and cache.identity else ""
        if self.file is None:
            self.report["error"] = str(cache.error) if cache and cache.error else "no file for it"
        elif _session.chat_key != key and self.file.size():
            t0 = time.perf_counter()
            try:
                self.report["restored"] = llm.restore_chat(self.file, self.identity)
            except Exception as e:  # noqa: BLE001 - damaged, another model, OPFS failing: computed again
                self.report["refused"] = str(e) if isinstance(e, ChatCacheError) else f"{type(e).__name__}: {e}"
            self.report["restore_ms"] = (time.perf_counter() - t0) * 1000
        _session.chat_key = key

    def save(self) -> dict:
        if self.file is not None:
            t0 = time.perf_counter()
            try:
                saved = self.llm.save_chat(self.file, self.identity)
                self.report.update(saved=saved.tokens, written=saved.written, bytes=saved.nbytes)
            except Exception as e:  # noqa: BLE001 - OPFS full or gone: the reply stands, the next visit computes
                self.report["error"] = f"not saved: {e}"
            self.report["save_ms"] = (time.perf_counter() - t0) * 1000
        return self.report


def _kept_chat(llm: LLM, key, cache) -> _KeptChat | None:
    if key is None:
        _session.chat_key = None  # the conversation held from here on belongs to no key
        return None
    if not isinstance(key, str) or not key:
        raise InvalidRequestError("prompt_cache_key must be a non-empty string")
    return _KeptChat(llm, key, cache)


def forget(key: str) -> None:
    """The conversation kept under `key` is about to be deleted: if this engine holds it, it forgets it too."""
    if _session.chat_key == key:
        reset()


def reset() -> None:
    """Forget the conversation (and free its KV cache blocks)."""
    llm = _session.llm
    if llm is not None:
        llm.reset_chat()
    _session.chat_key = None
