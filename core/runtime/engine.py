"""Runs forward steps of a model over several sequences at once: prefill chunks and batched decode in one shape.

A step feeds each participating sequence some tokens at its next positions. The engine packs them into the
token buffer, makes sure their KV blocks exist, and replays the program recorded for that many tokens (programs
are recorded once per token-count bucket and logits-row bucket, then reused). Per step the host writes only the
token list, two counts and (when they changed) the block tables.
"""
from __future__ import annotations

import struct
import time
from array import array
from dataclasses import dataclass

from ..errors import ContextOverflowError, InvalidRequestError, LLMChatError
from ..gpu import ops
from ..gpu.device import BINDING_ALIGN, Device, Program, View, describe_adapter
from ..gpu.kernels import Kernels
from ..gpu.kvlayout import blocks_for
from ..gpu.recorder import Act, Recorder
from .kv_cache import KVCache
from .memory import candidates_bytes, inputs_bytes, step_bucket
from ..models.base import Activations, Model, state_widths


@dataclass
class Feed:
    """Tokens for one sequence in one step, starting at position `start`."""

    slot: int
    tokens: list[int]
    start: int
    all_logits: bool = False  # logits for every fed token (perplexity) instead of the last one only
    # False: the tokens only fill the cache (a prompt chunk before the last), so the step skips their output head,
    # which for a large vocabulary costs as much as several tokens through the layers
    logits: bool = True


# The smallest context bucket: steps are recorded per bucket of the longest position count they reach, so
# attention can cut short contexts into fewer ranges (see ops.attention).
CONTEXT_MIN = 128


class Engine:
    def __init__(self, model: Model, device: Device, kernels: Kernels, *, context: int, n_slots: int = 1,
                 max_tokens_per_step: int = 64, cache_positions: int | None = None, q8_activations: bool = False,
                 kv_type: str | None = None):
        """`n_slots` sequences can be open at once; they share a KV cache of `cache_positions` positions
        (default: a full context for each), of `kv_type` elements (default: the adapter's, kvlayout.cache_type).
        Buffers are sized as `llmchat.runtime.memory.plan_memory` plans them."""
        self.model = model
        self.config = model.config
        self.q8_activations = q8_activations
        self.device = device
        self.kernels = kernels
        self.context = context
        n_blocks = None if cache_positions is None else blocks_for(cache_positions)
        self.kv = KVCache(device, model.kv_widths(), n_slots=n_slots, context=context, n_blocks=n_blocks,
                          state_widths=state_widths(model), kv_type=kv_type)
        self.max_step = step_bucket(max_tokens_per_step)
        # The two step counts share one uniform buffer, so a step writes them at once.
        self._counts = device.buffer(BINDING_ALIGN + 16, "step counts", uniform=True)
        self.step_buf = View(self._counts, 0, 16)
        self.out_buf = View(self._counts, BINDING_ALIGN, 16)
        # Token records and logits rows in one buffer, so a step uploads them with one write.
        self._tokens_end = inputs_bytes(self.max_step) - self.max_step * 4
        inputs = device.buffer(inputs_bytes(self.max_step), "step inputs")
        specs = model.activations()
        rec = self._recorder()
        self.acts = Activations(View(inputs, 0, self.max_step * 16), View(inputs, self._tokens_end, self.max_step * 4),
                                {s.name: rec.act(s.name, self.max_step, s.cols) for s in specs},
                                frozenset(s.name for s in specs if s.per_out_row))
        self.logits = rec.act("logits", self.max_step, self.config.vocab_size)
        self.candidates = device.buffer(candidates_bytes(self.max_step), "candidates")
        self._programs: dict[tuple[int, int, int, int], Program] = {}
        self._recordings: dict[tuple[int, int, int, int], Recorder] = {}  # `prepare`d, not built yet
        # host_s: Python and driver time of steps, program recording excluded (record_s), GPU waits excluded
        self.stats = {"steps": 0, "tokens": 0, "host_s": 0.0, "record_s": 0.0}

    def describe(self) -> str:
        """What computes the steps, for people: the adapter's name (gpu.device.describe_adapter)."""
        return describe_adapter(self.device.info)

    def _recorder(self) -> Recorder:
        return Recorder(self.device, self.kernels, self.step_buf, self.out_buf, q8_activations=self.q8_activations)

    def program(self, rows: int, out_rows: int, top_k: int = 0, context: int | None = None) -> Program:
        """The program for steps of `rows` tokens, `out_rows` of them producing logits (or top-k candidates), in
        which no token sees more than `context` positions (default: the whole context)."""
        key = self._key(rows, out_rows, top_k, context)
        prog = self._programs.get(key)
        if prog is None:
            rec = self._recordings.pop(key, None) or self._record(*key)
            prog = self._programs[key] = rec.finish()
        return prog

    def prepare(self, rows: int, out_rows: int, top_k: int = 0, context: int | None = None) -> None:
        """Record `program(rows, out_rows, top_k, context)` without building it: where kernels compile in the
        background (the browser's device), they start now and nothing waits for them until the program is first
        asked for. Natively kernels compile as they are recorded, so this only moves that work earlier."""
        key = self._key(rows, out_rows, top_k, context)
        if key not in self._programs and key not in self._recordings:
            self._recordings[key] = self._record(*key)

    def _key(self, rows: int, out_rows: int, top_k: int, context: int | None) -> tuple[int, int, int, int]:
        return rows, out_rows, top_k, self.context if context is None else min(context, self.context)

    def _record(self, rows: int, out_rows: int, top_k: int, context: int) -> Recorder:
        rec = self._recorder()
        logits = Act(self.logits.buffer, out_rows, self.logits.cols)
        self.model.record(rec, self.acts.cut(rows, out_rows), self.kv, logits, context=context)
        if top_k:
            ops.topk(rec, logits, self.candidates, top_k)
        return rec

    def context_bucket(self, positions: int) -> int:
        """The context a step reaching `positions` runs its program for: whole buckets, so attention reads every
        position its program covers, from CONTEXT_MIN up to the engine's context."""
        return min(self.context, max(CONTEXT_MIN, step_bucket(positions)))

    def warm_up(self, tokens: int = 1, *, wait: bool = True) -> None:
        """Record the program of a greedy step feeding `tokens` prompt tokens (1: a decode step) of a reply that
        has just started (the shortest context bucket). `wait` builds it, its kernels compiled, before returning;
        otherwise it is only `prepare`d, and the first step that needs it waits for the rest."""
        key = (step_bucket(tokens), 1, 1, CONTEXT_MIN)
        if wait:
            self.program(*key)
        else:
            self.prepare(*key)

    def dispatches_per_step(self, rows: int = 1, out_rows: int = 1, top_k: int = 1, context: int | None = None) -> int:
        """Dispatches of the step that feeds `rows` tokens reaching position `context` (default: the full context)."""
        reach = None if context is None else self.context_bucket(context)
        return len(self.program(step_bucket(rows), step_bucket(out_rows), top_k, reach))

    def decode_program(self, context: int, top_k: int = 1) -> Program:
        """The program of one decode token at position `context` - 1 of a fresh sequence (which is then freed), with
        the engine's buffers filled by one real step, so that replaying it reads what a decode step reads."""
        slot = self.kv.new_slot()
        try:
            self.kv.reserve(slot, context)
            self.step([Feed(slot, [0], context - 1)], top_k=top_k)
            return self.program(1, 1, top_k, self.context_bucket(context))
        finally:
            self.kv.free_slot(slot)

    def step(self, feeds: list[Feed], top_k: int = 0) -> list:
        """Run one forward step. Per feed: the logits rows it asked for (a flat row-major array('f')), or with
        `top_k` > 0 the GPU's top-k candidates of its last row (`ops.TopK`), so only a few numbers come back; None
        for a feed that asked for no logits."""
        t0 = time.perf_counter()
        tokens, out_rows = pack_step(feeds, self.kv, self.context, self.max_step, self.config.vocab_size, top_k)
        n, n_out = len(tokens) // 4, len(out_rows)
        self.kv.sync()
        dev = self.device
        # Token records and logits rows share one buffer: one write, as for the counts.
        inputs = bytearray(tokens.tobytes())
        inputs += bytes(self._tokens_end - len(inputs))
        dev.write(self.acts.tokens.buffer, inputs + out_rows.tobytes())
        dev.write(self._counts, struct.pack("<4I", n, 0, 0, 0) + bytes(BINDING_ALIGN - 16) +
                  struct.pack("<4I", n_out, 0, 0, 0))
        reach = max(f.start + len(f.tokens) for f in feeds)
        t_record = time.perf_counter()
        program = self.program(step_bucket(n), step_bucket(n_out), top_k, self.context_bucket(reach))
        recorded = time.perf_counter() - t_record
        dev.run(program)
        self.stats["record_s"] += recorded
        self.stats["host_s"] += time.perf_counter() - t0 - recorded
        self.stats["steps"] += 1
        self.stats["tokens"] += n
        if not n_out:  # the head's dispatches ran with no rows to compute
            return [None] * len(feeds)
        if top_k:
            tops = ops.read_topk(dev.read(self.candidates, 0, n_out * ops.topk_words(top_k) * 4), top_k, n_out)
            return split_outputs(feeds, tops)
        vocab = self.config.vocab_size
        return split_outputs(feeds, array("f", dev.read(self.logits.buffer, 0, n_out * vocab * 4)), vocab)

    def logits_row(self, index: int) -> array:
        """Output row `index` of the last step, read back on demand. A step that returned only top-k candidates
        leaves every row on the GPU until the next step, so a caller whose candidates fall short (a grammar that
        allows none of them) reads the one row it needs instead of every step reading them all."""
        vocab = self.config.vocab_size
        return array("f", self.device.read(self.logits.buffer, index * vocab * 4, vocab * 4))



def pack_step(feeds: list[Feed], kv: KVCache, context: int, max_step: int, vocab: int,
              top_k: int) -> tuple[array, array]:
    """Check one step's feeds and make room for them in `kv`, whose slots then stand at the step's end: the
    step's token records (token, position, slot, 0) in feed order, and the indices of the records whose logits
    come back. One set of rules for every engine."""
    n = sum(len(f.tokens) for f in feeds)
    if not 0 < n <= max_step:
        raise LLMChatError(f"a step takes 1..{max_step} tokens, got {n}")
    if len({f.slot for f in feeds}) != len(feeds):
        raise LLMChatError("a step feeds each sequence slot at most once")
    if any(f.all_logits and not f.logits for f in feeds):
        raise LLMChatError("a feed cannot ask for the logits of every token and for none")
    if top_k and any(f.all_logits for f in feeds):
        raise LLMChatError("top-k candidates come from the last row of each feed; all_logits asks for every row")
    tokens = array("I")
    out_rows = array("I")
    for f in feeds:
        end = f.start + len(f.tokens)
        if end > context:
            raise ContextOverflowError(f"sequence needs {end} positions; the context holds {context}")
        kv.check_start(f.slot, f.start)
        kv.reserve(f.slot, end)
        first = len(tokens) // 4
        for i, tok in enumerate(f.tokens):
            if not 0 <= tok < vocab:
                raise InvalidRequestError(f"token id {tok} is outside the vocabulary (0..{vocab - 1})")
            tokens.extend((tok, f.start + i, f.slot, 0))
        if f.logits:
            out_rows.extend(range(first, first + len(f.tokens)) if f.all_logits else [first + len(f.tokens) - 1])
    if len(out_rows) > max_step:
        raise LLMChatError(f"a step returns at most {max_step} logits rows, asked for {len(out_rows)}")
    for f in feeds:  # every feed is valid: their slots' state moves to the step's end
        kv.advance(f.slot, f.start, f.start + len(f.tokens))
    return tokens, out_rows


def split_outputs(feeds: list[Feed], data, vocab: int = 0) -> list:
    """A step's outputs per feed, as `Engine.step` returns them: `data` is its logits rows as one flat array of
    `vocab` values a row, or (vocab 0) its top-k candidates, one per feed that asked for logits."""
    result, i = [], 0
    for f in feeds:
        k = (len(f.tokens) if f.all_logits else 1) if f.logits else 0
        result.append((data[i * vocab:(i + k) * vocab] if vocab else data[i]) if k else None)
        i += k
    return result
