"""Gemma 4 through the engine: sequences batched side by side in uneven chunks equal each alone, token by token,
across the sliding window and the layers that read another layer's cache (tests/gpu/test_arch_oracle.py checks the
logits themselves against llama.cpp); and the refusals of what llama.cpp runs but llmchat does not (mixture of
experts, a layer sharing a cache of the other kind). Tolerance as in tests/gpu/test_hybrid.py.
"""
from __future__ import annotations

import pytest

from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from llmchat.api import LLM
from llmchat.errors import UnsupportedModelError
from llmchat.gguf.file import open_gguf
from llmchat.models import config_from_metadata
from model_factory import oracle_params, write_model
from test_hybrid import batched_equal_alone

pytestmark = pytest.mark.gpu

PARAMS = oracle_params("gemma4")


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("gemma4") / "gemma4.gguf", **PARAMS)


def test_three_sequences_batched_equal_each_alone(path, adapter_gpu):  # noqa: F811
    llm = LLM(str(path), context=128, n_slots=4, max_tokens_per_step=16, device=adapter_gpu.device)
    kv = llm.runtime.engine.kv
    assert kv.k[4] is None and kv.k[3] is not None  # layers 4-6 read layers 2 and 3
    batched_equal_alone(llm)


def test_what_llmchat_does_not_run_is_refused(path):
    with open_gguf(str(path)) as f:
        md = dict(f.metadata)
    config_from_metadata(md)
    with pytest.raises(UnsupportedModelError, match="mixture-of-experts"):
        config_from_metadata(md | {"gemma4.expert_count": 8})
    # Shared layers read the last two layers with a cache, which must be a local one and then a global one.
    pattern = list(md["gemma4.attention.sliding_window_pattern"])
    with pytest.raises(UnsupportedModelError, match="layer 6 would attend over layer 3"):
        config_from_metadata(md | {"gemma4.attention.sliding_window_pattern": pattern[:3] + [True] + pattern[4:]})
