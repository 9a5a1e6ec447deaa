"""The cpu engine: steps over several sequences at once on llama.cpp's CPU kernels, through llama-cpp-python's
low-level bindings to its C API, in the shape the WebGPU engine takes them (engine.py: the same feeds, checks and
outputs). Everything else stays llmchat's on either engine: the file's checks and the memory plan, the tokenizer
and chat templates, the sampler, grammars, the generation loop, the scheduler and the prefix cache.

Each sequence slot is a llama.cpp sequence id with a stream of KV cells of its own. llmchat's KVCache keeps the
bookkeeping and its rules (the scheduler admits and evicts by it) and tells this engine what changed (`fork`,
`forget`); llama.cpp's memory follows with `seq_cp` and `seq_rm`. llama.cpp computes logits; candidates for the
sampler are picked from them here (numpy), so only what sampling needs crosses into Python.
"""
from __future__ import annotations

import ctypes
import os
import time
import weakref
from array import array

from ..errors import ContextOverflowError, LLMChatError, MissingDependencyError, UnsupportedModelError
from ..gpu.kvlayout import blocks_for
from ..gpu.ops import TopK
from ..gguf.config import ModelConfig
from .engine import Feed, pack_step, split_outputs
from .engine_choice import CPU_INSTALL
from .kv_cache import KVCache
from .memory import step_bucket


def bindings():
    """llama-cpp-python's low-level module, its backend initialised once, its log kept for errors."""
    global _callback
    try:
        import llama_cpp
        import numpy  # noqa: F401  (a dependency of llama-cpp-python; the candidates are picked with it)
    except ImportError as exc:
        raise MissingDependencyError(f"the cpu engine needs llama-cpp-python ({exc}): {CPU_INSTALL}") from None
    if _callback is None:
        _callback = llama_cpp.llama_log_callback(_log)  # kept here: llama.cpp holds the pointer
        llama_cpp.llama_log_set(_callback, None)
        llama_cpp.llama_backend_init()
    return llama_cpp


_callback = None
_LOG: list[str] = []  # llama.cpp's last warnings and errors, for the message of a load or step that fails
_ERROR_LEVELS = (3, 4)  # GGML_LOG_LEVEL_WARN, GGML_LOG_LEVEL_ERROR


def _log(level: int, text: bytes, _user) -> None:
    if level in _ERROR_LEVELS:
        _LOG.append(text.decode("utf-8", "replace").strip())
        del _LOG[:-8]


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class CpuEngine:
    """The model file at `path` (its header read as `config`) on llama.cpp's CPU kernels: `n_slots` sequences of
    up to `context` positions sharing a cache of `cache_positions` (default: a full context each), steps of up to
    `max_tokens_per_step` tokens, `threads` threads (default: every core this process may run on). `kv_widths`
    and `state_widths` are the model's (llmchat.models), for the bookkeeping; `kv_type` is the cache's element
    type (f16 or f32)."""

    def __init__(self, path: str, config: ModelConfig, *, context: int, n_slots: int, max_tokens_per_step: int = 64,
                 cache_positions: int | None = None, kv_widths: list[int], state_widths: list[int],
                 kv_type: str = "f16", threads: int | None = None):
        llama = self._llama = bindings()
        self.config = config
        self.context = context
        self.vocab_size = vocab_size = config.vocab_size
        self.max_step = step_bucket(max_tokens_per_step)
        self.threads = threads or cores()
        n_blocks = blocks_for(cache_positions) if cache_positions else None
        self.kv = KVCache(None, kv_widths, n_slots=n_slots, context=context, n_blocks=n_blocks,
                          state_widths=state_widths, kv_type=kv_type, memory=self)
        _LOG.clear()
        model_params = llama.llama_model_default_params()
        # Weights as stored, not repacked for the CPU's matrix kernels: with repacking, a row computed in a batch
        # of several (K-quants: Gemma 3 270M's Q4_K_M) comes out up to 1.5 logits away from the same row alone,
        # so a reply would depend on what ran beside it. Unrepacked, batched rows are bit-identical to lone ones,
        # at the same speed here (tools/bench/bench_side_by_side.py); logits move by up to 0.9 (Q4_K) from a
        # repacked run's, within the golden gates both engines meet.
        model_params.use_extra_bufts = False
        model = llama.llama_model_load_from_file(os.fsencode(path), model_params)
        if not model:
            raise UnsupportedModelError(f"llama.cpp could not load {path}: {'; '.join(_LOG) or 'no reason given'}")
        params = llama.llama_context_default_params()
        # A stream of cells per sequence, each room for a whole context: the bookkeeping admits no more than the
        # cache's blocks hold, all sequences together.
        params.n_ctx = context * n_slots
        params.n_batch = params.n_ubatch = self.max_step
        params.n_seq_max = n_slots
        params.n_threads = params.n_threads_batch = self.threads
        params.type_k = params.type_v = llama.GGML_TYPE_F16 if kv_type == "f16" else llama.GGML_TYPE_F32
        # Not one pool of cells for every sequence: where a sequence's positions sit in it would then depend on
        # the others, and so would the order its attention sums in, a few ulps that flip near-tied greedy tokens.
        # In a stream of its own a sequence computes as it does alone, batched or not.
        params.kv_unified = False
        params.swa_full = True  # sliding-window layers keep every position, so a sequence can be cut anywhere
        # Attention as llama-cpp-python runs it by default (and its numbers, tests/data, were taken): flash attention
        # off. llama.cpp's own default (auto) turns it on, which moves logits by tenths.
        params.flash_attn_type = llama.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.no_perf = True
        ctx = llama.llama_init_from_model(model, params)
        if not ctx:
            llama.llama_model_free(model)
            raise LLMChatError(f"llama.cpp could not make a context for {path}: {'; '.join(_LOG) or 'no reason'}")
        n_vocab = llama.llama_vocab_n_tokens(llama.llama_model_get_vocab(model))
        batch = llama.llama_batch_init(self.max_step, 0, 1)
        weakref.finalize(self, _free, llama, model, ctx, batch)
        self._ctx, self._batch, self._memory = ctx, batch, llama.llama_get_memory(ctx)
        if n_vocab != vocab_size:
            raise UnsupportedModelError(f"{path}: llama.cpp reads a vocabulary of {n_vocab} tokens where the file's "
                                        f"header gives {vocab_size}")
        self._rows = None  # the last step's logits rows (numpy, llama.cpp's buffer), until the next step
        self.stats = {"steps": 0, "tokens": 0, "host_s": 0.0, "record_s": 0.0}

    def describe(self) -> str:
        """What computes the steps, for people: "llama.cpp, 2 CPU threads"."""
        return f"llama.cpp, {self.threads} CPU thread{'s' * (self.threads != 1)}"

    # -- the memory, as the bookkeeping tells it ------------------------------------------------------------------
    def fork(self, parent: int, child: int, n_positions: int) -> None:
        # Between streams llama.cpp copies a whole sequence, then the child forgets what follows its share.
        self._llama.llama_memory_seq_cp(self._memory, parent, child, -1, -1)
        self.forget(child, n_positions)

    def forget(self, slot: int, n_positions: int) -> None:
        if self._held(slot) > n_positions and not self._llama.llama_memory_seq_rm(self._memory, slot, n_positions, -1):
            self._llama.llama_memory_seq_rm(self._memory, slot, -1, -1)
            raise LLMChatError(f"llama.cpp cannot cut sequence {slot} at position {n_positions}; it was cleared")

    def _held(self, slot: int) -> int:
        """Positions llama.cpp's memory holds for `slot` (its positions run from 0 without gaps)."""
        return self._llama.llama_memory_seq_pos_max(self._memory, slot) + 1

    # -- steps ---------------------------------------------------------------------------------------------------
    def step(self, feeds: list[Feed], top_k: int = 0) -> list:
        """One forward step, as `llmchat.runtime.engine.Engine.step`: per feed its logits rows, or with `top_k` its
        last row's top-k candidates, or None.

        llama.cpp rounds a sequence's tokens differently when they share a micro-batch with another sequence's
        several tokens (it splits such a batch by sequence), which flips near-tied greedy tokens. So the tokens a
        sequence decodes one at a time go together in one call, and each prompt chunk in a call of its own: every
        sequence then computes as it does alone, whatever runs beside it."""
        t0 = time.perf_counter()
        tokens, out_rows = pack_step(feeds, self.kv, self.context, self.max_step, self.vocab_size, top_k)
        for f in feeds:  # a sequence continues from what its memory holds: anything past the start is recomputed
            self.forget(f.slot, f.start)
            if self._held(f.slot) != f.start:
                raise LLMChatError(f"slot {f.slot} holds {self._held(f.slot)} positions; a step cannot start it "
                                   f"at {f.start}")
        first = [0]
        for f in feeds:
            first.append(first[-1] + len(f.tokens))
        singles = [i for i, f in enumerate(feeds) if len(f.tokens) == 1]
        calls = ([singles] if singles else []) + [[i] for i, f in enumerate(feeds) if len(f.tokens) > 1]
        outputs, rows, decode_s = set(out_rows), {}, 0.0
        for call in calls:
            records = [r for i in call for r in range(first[i], first[i + 1])]
            t1 = time.perf_counter()
            try:
                self._decode(tokens, records, outputs)
            except LLMChatError:
                for f in feeds:  # what llama.cpp kept of the step is dropped: the slots stand where they did
                    self._llama.llama_memory_seq_rm(self._memory, f.slot, f.start, -1)
                raise
            decode_s += time.perf_counter() - t1
            rows.update(zip((i for i in call if feeds[i].logits), self._read_rows(call, feeds, len(calls) > 1)))
        result = self._outputs(feeds, [rows[i] for i in range(len(feeds)) if i in rows], top_k)
        self.stats["host_s"] += time.perf_counter() - t0 - decode_s
        self.stats["steps"] += 1
        self.stats["tokens"] += len(tokens) // 4
        return result

    def _decode(self, tokens: array, records: list[int], outputs: set[int]) -> None:
        batch = self._batch
        for j, r in enumerate(records):
            batch.token[j], batch.pos[j], batch.seq_id[j][0] = tokens[4 * r], tokens[4 * r + 1], tokens[4 * r + 2]
            batch.n_seq_id[j] = 1
            batch.logits[j] = r in outputs
        batch.n_tokens = len(records)
        status = self._llama.llama_decode(self._ctx, batch)
        if status != 0:
            if status == 1:
                raise ContextOverflowError("llama.cpp found no room in its KV cache for the step; finish or cancel "
                                           "other sequences first")
            raise LLMChatError(f"llama.cpp's decode failed (status {status}): {'; '.join(_LOG) or 'no reason'}")

    def _read_rows(self, call: list[int], feeds: list[Feed], copy: bool) -> list:
        """Per feed of the call that asked for logits, its rows (numpy, in llama.cpp's buffer unless `copy`)."""
        import numpy as np

        counts = [(len(feeds[i].tokens) if feeds[i].all_logits else 1) for i in call if feeds[i].logits]
        if not counts:
            return []
        pointer = ctypes.cast(self._llama.llama_get_logits(self._ctx), ctypes.POINTER(ctypes.c_float))
        data = np.ctypeslib.as_array(pointer, shape=(sum(counts), self.vocab_size))
        if copy:  # the next call writes over the buffer
            data = data.copy()
        bounds = np.cumsum([0, *counts])
        return [data[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def _outputs(self, feeds: list[Feed], rows: list, top_k: int) -> list:
        """The step's result from each logits-asking feed's rows (in feed order)."""
        import numpy as np

        if not rows:
            self._rows = None
            return [None] * len(feeds)
        self._rows = rows[0] if len(rows) == 1 else np.concatenate(rows)
        if top_k:
            return split_outputs(feeds, [top_candidates(r[-1], top_k) for r in rows])
        return split_outputs(feeds, array("f", self._rows.tobytes()), self.vocab_size)

    def logits_row(self, index: int) -> array:
        """Output row `index` of the last step (as `Engine.logits_row`)."""
        if self._rows is None or not 0 <= index < len(self._rows):
            raise LLMChatError(f"the last step returned no logits row {index}")
        return array("f", self._rows[index].tobytes())


def top_candidates(row, k: int) -> TopK:
    """The `k` largest logits of `row` (numpy), highest first and ties by lower id, with the row's maximum and
    sum of exp(logit - maximum): what the GPU's top-k gives the sampler."""
    import numpy as np

    k = min(k, row.size)
    if k == 1:  # greedy, the usual case: argmax takes the first (lowest) id of a tie, 100x faster than a partition
        ids = np.array([row.argmax()])
    else:  # those above the k-th largest value, then the lowest ids of those equal to it
        kth = np.partition(row, row.size - k)[row.size - k]
        above = np.flatnonzero(row > kth)
        ids = np.concatenate([above, np.flatnonzero(row == kth)[:k - above.size]])
        ids = ids[np.lexsort((ids, -row[ids]))]
    top = float(row[ids[0]])
    return TopK(top, float(np.exp(row - top).sum()), tuple(row[ids].tolist()), tuple(ids.tolist()))


def _free(llama, model, ctx, batch) -> None:
    llama.llama_batch_free(batch)
    llama.llama_free(ctx)
    llama.llama_model_free(model)
