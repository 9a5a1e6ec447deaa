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

from .config import ModelConfig
from .errors import ContextOverflowError, InvalidRequestError, LLMChatError
from .gpu import ops
from .gpu.device import Device, Program, View
from .gpu.kernels import Kernels
from .gpu.recorder import Act, Recorder
from .gpu.kvlayout import BLOCK_TOKENS
from .kv_cache import KVCache
from .models.llama import BINDING_ALIGN, Activations


@dataclass
class Feed:
    """Tokens for one sequence in one step, starting at position `start`."""

    slot: int
    tokens: list[int]
    start: int
    all_logits: bool = False  # logits for every fed token (perplexity) instead of the last one only


# The smallest context bucket: steps are recorded per bucket of the longest position count they reach, so
# attention can cut short contexts into fewer ranges (see ops.attention).
CONTEXT_MIN = 128


def bucket(n: int) -> int:
    """The smallest power of two ≥ n: programs exist per bucket, so a handful cover every step size."""
    return 1 << max(0, n - 1).bit_length()


class Engine:
    def __init__(self, model, device: Device, kernels: Kernels, *, context: int, n_slots: int = 1,
                 max_tokens_per_step: int = 64, cache_positions: int | None = None):
        """`n_slots` sequences can be open at once; they share a KV cache of `cache_positions` positions
        (default: a full context for each)."""
        self.model = model
        self.config: ModelConfig = model.config
        self.device = device
        self.kernels = kernels
        self.context = context
        n_blocks = None if cache_positions is None else -(-cache_positions // BLOCK_TOKENS)
        self.kv = KVCache(device, self.config, n_slots=n_slots, context=context, n_blocks=n_blocks)
        self.max_step = bucket(max_tokens_per_step)
        # The two step counts share one uniform buffer, so a step writes them at once (bindings of one buffer
        # sit at multiples of 256 bytes, WebGPU's largest offset alignment).
        self._counts = device.buffer(BINDING_ALIGN + 16, "step counts", uniform=True)
        self.step_buf = View(self._counts, 0, 16)
        self.out_buf = View(self._counts, BINDING_ALIGN, 16)
        rec = self._recorder()
        split_ffn = len(model.blk[0].ffn_gate_up) > 1
        self.acts = Activations.create(rec, self.config, self.max_step, self.max_step, split_ffn=split_ffn,
                                       fold_norms=model.fold_norms)
        self.logits = rec.act("logits", self.max_step, self.config.vocab_size)
        self.candidates = rec.device.buffer(self.max_step * ops.topk_words(ops.TOPK_MAX) * 4, "candidates")
        self._programs: dict[tuple[int, int, int, int], Program] = {}
        # host_s: Python and driver time of steps, program recording excluded (record_s), GPU waits excluded
        self.stats = {"steps": 0, "tokens": 0, "host_s": 0.0, "record_s": 0.0}

    def _recorder(self) -> Recorder:
        return Recorder(self.device, self.kernels, self.step_buf, self.out_buf)

    def program(self, rows: int, out_rows: int, top_k: int = 0, context: int | None = None) -> Program:
        """The program for steps of `rows` tokens, `out_rows` of them producing logits (or top-k candidates), in
        which no token sees more than `context` positions (default: the whole context)."""
        context = self.context if context is None else min(context, self.context)
        key = (rows, out_rows, top_k, context)
        prog = self._programs.get(key)
        if prog is None:
            rec = self._recorder()
            a = self.acts
            acts = Activations(tokens=a.tokens, out_rows=a.out_rows, x=_rows(a.x, rows),
                               h=_rows(a.h, rows) if a.h else None, qkv=_rows(a.qkv, rows),
                               attn=_rows(a.attn, rows), ff=_rows(a.ff, rows),
                               up=_rows(a.up, rows) if a.up else None, last=_rows(a.last, out_rows))
            logits = _rows(self.logits, out_rows)
            self.model.record(rec, acts, self.kv, logits, context=context)
            if top_k:
                ops.topk(rec, logits, self.candidates, top_k)
            prog = self._programs[key] = rec.finish()
        return prog

    def dispatches_per_step(self, rows: int = 1, out_rows: int = 1, top_k: int = 1, context: int | None = None) -> int:
        """Dispatches of the step that feeds `rows` tokens reaching position `context` (default: the full context)."""
        reach = None if context is None else max(CONTEXT_MIN, bucket(context))
        return len(self.program(bucket(rows), bucket(out_rows), top_k, reach))

    def step(self, feeds: list[Feed], top_k: int = 0) -> list:
        """Run one forward step. Per feed: the logits rows it asked for (a flat row-major array('f')), or with
        `top_k` > 0 the GPU's top-k candidates of its last row (`ops.TopK`), so only a few numbers come back."""
        t0 = time.perf_counter()
        n = sum(len(f.tokens) for f in feeds)
        if not 0 < n <= self.max_step:
            raise LLMChatError(f"a step takes 1..{self.max_step} tokens, got {n}")
        tokens = array("I")
        out_rows = array("I")
        vocab = self.config.vocab_size
        for f in feeds:
            end = f.start + len(f.tokens)
            if end > self.context:
                raise ContextOverflowError(f"sequence needs {end} positions; the context holds {self.context}")
            self.kv.reserve(f.slot, end)
            first = len(tokens) // 4
            for i, tok in enumerate(f.tokens):
                if not 0 <= tok < vocab:
                    raise InvalidRequestError(f"token id {tok} is outside the vocabulary (0..{vocab - 1})")
                tokens.extend((tok, f.start + i, f.slot, 0))
            rows = range(first, first + len(f.tokens)) if f.all_logits else [first + len(f.tokens) - 1]
            out_rows.extend(rows)
        n_out = len(out_rows)
        if n_out > self.max_step:
            raise LLMChatError(f"a step returns at most {self.max_step} logits rows, asked for {n_out}")
        if top_k and any(f.all_logits for f in feeds):
            raise LLMChatError("top-k candidates come from the last row of each feed; all_logits asks for every row")
        self.kv.sync()
        dev = self.device
        # Token records and logits rows share one buffer (Activations.create): one write, as for the counts.
        inputs = bytearray(tokens.tobytes())
        inputs += bytes(self.acts.out_rows.offset - len(inputs))
        dev.write(self.acts.tokens.buffer, inputs + out_rows.tobytes())
        dev.write(self._counts, struct.pack("<4I", n, 0, 0, 0) + bytes(BINDING_ALIGN - 16) +
                  struct.pack("<4I", n_out, 0, 0, 0))
        reach = max(f.start + len(f.tokens) for f in feeds)
        t_record = time.perf_counter()
        program = self.program(bucket(n), bucket(n_out), top_k, max(CONTEXT_MIN, bucket(reach)))
        recorded = time.perf_counter() - t_record
        dev.run(program)
        self.stats["record_s"] += recorded
        self.stats["host_s"] += time.perf_counter() - t0 - recorded
        self.stats["steps"] += 1
        self.stats["tokens"] += n
        if top_k:
            return ops.read_topk(dev.read(self.candidates, 0, n_out * ops.topk_words(top_k) * 4), top_k, n_out)
        data = array("f", dev.read(self.logits.buffer, 0, n_out * vocab * 4))
        result, i = [], 0
        for f in feeds:
            k = len(f.tokens) if f.all_logits else 1
            result.append(data[i * vocab:(i + k) * vocab])
            i += k
        return result


def _rows(a: Act, rows: int) -> Act:
    return Act(a.buffer, rows, a.cols)
