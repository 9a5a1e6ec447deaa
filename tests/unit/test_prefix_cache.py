"""The prefix cache's bookkeeping over the paged KV cache (llmchat.serving.prefix_cache), and the serving metrics'
text format, on a device stub: no GPU."""
from __future__ import annotations

from types import SimpleNamespace

from llmchat.gpu.kvlayout import BLOCK_TOKENS
from llmchat.runtime.kv_cache import KVCache
from llmchat.serving.metrics import Metrics
from llmchat.serving.prefix_cache import PrefixCache, common_prefix

class _Device:
    """Enough of a Device for KVCache's bookkeeping: buffers are placeholders, writes are dropped."""

    info = SimpleNamespace(max_binding_size=1 << 30, f16=False, name="a bookkeeping stub")

    def buffer(self, size, label, uniform=False):
        return SimpleNamespace(size=size, label=label)

    def write(self, buffer, data):
        pass


def _kv(n_slots: int = 4, n_blocks: int | None = None) -> KVCache:
    return KVCache(_Device(), [8], n_slots=n_slots, context=128, n_blocks=n_blocks)


def _filled(kv: KVCache, tokens: list[int]) -> int:
    slot = kv.new_slot()
    kv.reserve(slot, len(tokens))
    return slot


def test_common_prefix():
    a = list(range(100))
    assert common_prefix(a, a) == 100
    assert common_prefix(a, a[:37]) == 37
    assert common_prefix(a, a[:50] + [-1] + a[51:]) == 50
    assert common_prefix([], a) == 0


def test_lease_shares_whole_blocks_of_the_longest_prefix():
    kv = _kv()
    cache = PrefixCache(kv, max_entries=2)
    system = list(range(1000, 1040))  # 40 tokens: two whole blocks and a part
    slot = _filled(kv, system + [1, 2, 3])
    cache.insert(slot, system + [1, 2, 3])
    free = kv.free_blocks
    lease = cache.lease(system + [7, 8, 9])
    assert lease.cached == 2 * BLOCK_TOKENS and cache.hit_tokens == 32
    assert kv._blocks[lease.slot] == kv._blocks[slot][:2] and kv.free_blocks == free  # shared, nothing copied
    assert cache.lease([5] * 40).cached == 0  # nothing in common


def test_lease_leaves_one_token_to_compute():
    kv = _kv()
    cache = PrefixCache(kv, max_entries=2)
    tokens = list(range(32))
    cache.insert(_filled(kv, tokens), tokens)
    assert cache.lease(tokens).cached == BLOCK_TOKENS  # 31 positions could be reused; whole blocks of them: 16


def test_lease_shares_a_running_sequence():
    kv = _kv()
    cache = PrefixCache(kv, max_entries=2)
    running = list(range(50))
    slot = _filled(kv, running)
    lease = cache.lease(running[:40] + [0], live=[(slot, running)])
    assert lease.cached == 32 and kv._blocks[lease.slot] == kv._blocks[slot][:2]


def test_insert_keeps_one_entry_per_prefix_and_evicts_lru():
    kv = _kv(n_slots=6)
    cache = PrefixCache(kv, max_entries=2)
    base = list(range(48))
    cache.insert(_filled(kv, base[:20]), base[:20])
    cache.insert(_filled(kv, base), base)  # covers the first: it is dropped
    assert len(cache) == 1
    cache.insert(_filled(kv, base[:33]), base[:33])  # covered by the longer one: freed at once
    assert len(cache) == 1
    cache.insert(_filled(kv, [7] * 8), [7] * 8)  # under one block: nothing to share, freed
    assert len(cache) == 1
    cache.insert(_filled(kv, [1] * 20), [1] * 20)
    cache.insert(_filled(kv, [2] * 20), [2] * 20)  # a third distinct prefix: the least recently used goes
    assert len(cache) == 2 and cache.lease(base + [0]).cached == 0
    cache.clear()
    assert len(cache) == 0 and kv.free_slots == 5  # the lease above still holds one slot


def test_block_pressure_evicts_entries():
    kv = _kv(n_slots=4, n_blocks=6)
    cache = PrefixCache(kv, max_entries=3)
    for t in (1, 2, 3):
        cache.insert(_filled(kv, [t] * 32), [t] * 32)
    assert kv.free_blocks == 0
    assert cache.make_block_room(3) and kv.free_blocks >= 3 and len(cache) < 3
    assert not cache.make_block_room(7)  # more than the cache could ever free


def test_kv_blocks_needed():
    kv = _kv()
    slot = kv.new_slot()
    assert kv.blocks_needed(slot, 1) == 1 and kv.blocks_needed(slot, 33) == 3
    kv.reserve(slot, 20)
    assert kv.blocks_needed(slot, 20) == 0 and kv.blocks_needed(slot, 33) == 1


def test_metrics_text_format():
    m = Metrics()
    m.requests.inc(1, "/v1/completions", "200")
    m.requests.inc(2, '/we"ird', "404")
    m.ttft.observe(0.3)
    m.ttft.observe(100)
    m.gauge("llmchat_queue_depth", "Waiting.", lambda: 3)
    text = m.render()
    assert 'llmchat_requests_total{route="/v1/completions",code="200"} 1' in text
    assert 'llmchat_requests_total{route="/we\\"ird",code="404"} 2' in text
    assert 'llmchat_time_to_first_token_seconds_bucket{le="0.25"} 0' in text
    assert 'llmchat_time_to_first_token_seconds_bucket{le="0.5"} 1' in text
    assert 'llmchat_time_to_first_token_seconds_bucket{le="+Inf"} 2' in text
    assert "llmchat_time_to_first_token_seconds_count 2" in text
    assert "# TYPE llmchat_queue_depth gauge\nllmchat_queue_depth 3" in text
