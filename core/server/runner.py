"""`llmchat serve`: load the model, start the scheduler thread, run the app under uvicorn."""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ..hub.catalogue import CATALOGUE, model_title, models_dir, resolve
from ..errors import LLMChatError, ModelTooLargeError
from ..gpu.device import AdapterInfo, adapter_notice
from ..gpu.profiles import NO_PROFILE, Profile, get_profile
from .app import ServerOptions, create_app, runtime_missing
from .completions import ModelInfo
from .connections import FLUSH_MARGIN_S, GracefulServer, header_timeout_protocol, check_port
from .guard import DEFAULT_MAX_BODY, HostPolicy
from ..runtime.memory import MemoryPlan, check_context
from ..serving.metrics import Metrics
from ..serving.scheduler import Scheduler
from ..chat.structured import structured_constraint

if TYPE_CHECKING:  # imported by serve itself, as uvicorn and the device are
    from ..runtime.runtime import Runtime


@dataclass(frozen=True)
class ServeConfig:
    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    ctx: int | None = None  # None: llmchat.runtime.memory.context_size's default
    max_batch: int | None = None  # None: default_max_batch for the adapter
    max_queue: int = 64
    prefill_chunk: int = 16
    cache_entries: int | None = None  # finished sequences kept for prefix sharing; None: as many as max_batch
    cors_origins: Sequence[str] = ()
    web_dir: str | None = None  # default: the package's web demo
    pages_dir: str | None = None  # served at /pages/
    log_level: str = "info"
    api_key_all: bool = False
    allowed_hosts: Sequence[str] = ()
    max_body: int = DEFAULT_MAX_BODY
    shutdown_grace: float = 10.0
    header_timeout: float = 30.0
    profile: str | None = None  # a device profile name (llmchat.gpu.profiles); None: $LLMCHAT_PROFILE
    engine: str | None = None  # webgpu, cpu or auto (llmchat.runtime.engine_choice); None: $LLMCHAT_ENGINE, else auto
    threads: int | None = None  # the cpu engine's; None: every core

    def validate(self) -> Profile | str:
        """Refuse settings that cannot work, before the model is loaded; returns the device profile they name, or
        NO_PROFILE (the adapter as it is, whatever $LLMCHAT_PROFILE says) when none."""
        check_context(self.ctx)  # the rule the CLI and the API load with
        checks = [(1 <= self.port <= 65535, "--port must be between 1 and 65535"),
                  (self.max_batch is None or 1 <= self.max_batch <= 256, "--max-batch must be between 1 and 256"),
                  (self.max_queue >= 0, "--max-queue must be >= 0"),
                  (self.prefill_chunk >= 1, "--prefill-chunk must be >= 1"),
                  (self.cache_entries is None or self.cache_entries >= 0, "--cache-entries must be >= 0"),
                  (self.max_body >= 1024, "--max-body must be at least 1024 bytes"),
                  (self.shutdown_grace >= 0, "--shutdown-grace must be >= 0"),
                  (self.header_timeout > 0, "--header-timeout must be > 0"),
                  (bool(self.api_key) or not self.api_key_all, "--api-key-all needs --api-key"),
                  (self.pages_dir is None or Path(self.pages_dir).is_dir(),
                   f"--pages {self.pages_dir!r} is not a folder")]
        for ok, message in checks:
            if not ok:
                raise LLMChatError(message)
        return get_profile(self.profile) or NO_PROFILE  # an unknown name is refused before the model is pulled


# Sequences decoded together by default. On a CPU emulation (lavapipe), as on the cpu engine, the "GPU memory" is
# the machine's own and every sequence of a batch shares the same few cores, so 8 (and 8 more kept for prefix
# sharing: 16 full contexts of KV cache, 720 MiB for SmolLM2 135M's 2048 tokens) would cost a small machine much
# memory for replies that each run slower; 2 keeps a second client from waiting for the first.
MAX_BATCH = 8
MAX_BATCH_CPU = 2


def default_max_batch(info: AdapterInfo | None) -> int:
    """The default --max-batch on an adapter (None: on the cpu engine)."""
    return MAX_BATCH_CPU if info is None or info.software else MAX_BATCH


def memory_lines(plan: MemoryPlan, max_batch: int, cache_entries: int, batch_why: str = "",
                 memory: str = "GPU memory") -> list[str]:
    """What the `memory` goes to, the KV cache's sequences named by the options that set them (`batch_why`: why
    max_batch is what it is, when the user did not choose it)."""
    return [f"llmchat: {memory} {plan.total / 2**20:.0f} MiB: {plan.parts()}",
            f"llmchat: the KV cache's {plan.slots} sequences: up to {max_batch} decoded at once (--max-batch"
            f"{'; ' + batch_why if batch_why else ''}) and {cache_entries} finished "
            f"{'one' if cache_entries == 1 else 'ones'} kept for prefix sharing (--cache-entries)"]


def model_info(runtime: Runtime, requested: str, path: str) -> ModelInfo:
    """The served model's public id (the catalogue name if one was given, else the file's stem) and the other
    names a request may use for it."""
    name = Path(path).name
    model_id = requested.lower() if requested.lower() in CATALOGUE else Path(name).stem
    aliases = frozenset({model_id, requested, name, Path(name).stem})
    tokenizer = runtime.tokenizer
    return ModelInfo(id=model_id, aliases=aliases, context=runtime.context, vocab_size=runtime.config.vocab_size,
                     encode_prompt=runtime.encode_prompt, prepare_chat=runtime.prepare_chat,
                     encode_chat=runtime.encode_chat, constraint=partial(structured_constraint, tokenizer),
                     token_bytes=tokenizer.token_bytes, max_token_bytes=tokenizer.max_token_bytes(),
                     title=model_title(runtime.gguf), engine=runtime.engine_report())


def serve(config: ServeConfig) -> None:
    import uvicorn

    from ..runtime.runtime import LoadOptions, Runtime

    from ..gpu import open_device
    from ..runtime.engine_choice import choose_engine

    profile = config.validate()
    check_port(config.host, config.port)  # before the model is pulled and loaded
    path = resolve(config.model)
    # The engine and its device before the load: the default batch depends on them.
    choice, device = choose_engine(config.engine, [] if profile == NO_PROFILE else ["profile"], None,
                                   lambda: open_device(profile=profile))
    print(f"llmchat: {choice.describe()}", file=sys.stderr)
    if device is not None:
        notice = adapter_notice(device.info)
        if notice:
            print(notice, file=sys.stderr)
        if device.info.profile:
            print(f"llmchat: device profile '{device.info.profile}' "
                  f"(GPU memory budget {device.info.gpu_budget / 2**20:.0f} MiB)", file=sys.stderr)
    max_batch = default_max_batch(device and device.info) if config.max_batch is None else config.max_batch
    batch_why = ("the default on the cpu engine" if device is None else
                 "the default on a CPU emulation" if device.info.software else "the default") \
        if config.max_batch is None else ""
    while True:
        cache_entries = max_batch if config.cache_entries is None else config.cache_entries
        # A step carries every decoding sequence's token plus a prompt chunk, so it must hold max_batch + 1 at least.
        step = max(64, max_batch + config.prefill_chunk)
        options = LoadOptions(context=config.ctx, n_slots=max_batch + cache_entries, max_tokens_per_step=step,
                              profile=profile if device else None, engine=choice.engine, threads=config.threads)
        try:
            runtime = Runtime(path, options, device=device, choice=choice)
            break
        except ModelTooLargeError:
            # The memory plan refuses before anything is allocated. A batch the user chose stays as chosen (the
            # error says what fits); a default one is halved until the plan fits a small GPU memory budget.
            if config.max_batch is not None or max_batch == 1:
                raise
            max_batch //= 2
            batch_why = "fewer than the default, to fit the GPU memory budget"
    memory = "GPU memory" if device else "memory (as llmchat plans it; llama.cpp lays it out its own way)"
    for line in memory_lines(runtime.plan, max_batch, cache_entries, batch_why, memory):
        print(line, file=sys.stderr)
    scheduler = Scheduler(runtime.engine, runtime.tokenizer, max_batch=max_batch, max_queue=config.max_queue,
                          prefill_chunk=config.prefill_chunk, cache_entries=cache_entries, metrics=Metrics())
    local = not path.startswith(("http://", "https://"))
    # Not resolve(): a Hugging Face cache file is a link whose target is named by its hash; /models/NAME should
    # offer the model under the name the link (the repository) gives it.
    options = ServerOptions(api_key=config.api_key, cors_origins=config.cors_origins, models_dir=models_dir(),
                            model_file=Path(path).absolute() if local else None, api_key_all=config.api_key_all,
                            hosts=HostPolicy(config.host, config.port, config.allowed_hosts),
                            max_body=config.max_body)
    if config.web_dir is not None:
        if not Path(config.web_dir).is_dir():
            raise LLMChatError(f"--web-dir {config.web_dir!r} is not a folder")
        options.web_dir = Path(config.web_dir)
    if config.pages_dir is not None:
        options.pages_dir = Path(config.pages_dir)
    if os.environ.get("LLMCHAT_WEB_DIST"):
        options.dist_dir = Path(os.environ["LLMCHAT_WEB_DIST"])
    if runtime_missing(options.runtime_dir):
        # An install without the browser files (pip install . on a machine without node): the chat page still
        # works, through this server's API, and says so; here is where the operator hears why.
        print(f"llmchat: warning: the browser runtime is not installed ({options.runtime_dir} has no "
              "manifest.json): the chat page will answer through this server's /v1 API instead of running the "
              "model in the browser; build it with `make web` (needs node and npm)", file=sys.stderr, flush=True)
    info = model_info(runtime, config.model, path)
    app = create_app(scheduler, info, options)
    for name in ("llmchat.server", "llmchat.serving"):  # the routes' log, and the scheduler's
        logging.getLogger(name).setLevel(config.log_level.upper())
    scheduler.start()
    at_once = f"{max_batch} {'sequence' if max_batch == 1 else 'sequences'} at once"
    base = f"http://{config.host}:{config.port}"
    print(f"llmchat: serving {info.id} ({runtime.context}-token context, up to {at_once}) on {base}/v1",
          file=sys.stderr, flush=True)
    if options.pages_dir is not None:
        pages = sorted(p.name for p in options.pages_dir.glob("*.html"))
        print(f"llmchat: your pages at {base}/pages/{': ' if pages else ''}"
              f"{', '.join(f'{base}/pages/{name}' for name in pages)}", file=sys.stderr, flush=True)
    uv_config = uvicorn.Config(app, host=config.host, port=config.port, log_level=config.log_level,
                               http=header_timeout_protocol(config.header_timeout),
                               timeout_graceful_shutdown=config.shutdown_grace + FLUSH_MARGIN_S)
    server = GracefulServer(uv_config, grace=config.shutdown_grace,
                            on_drain=lambda: setattr(app.state, "draining", True), end_running=scheduler.stop)
    try:
        server.run()
    finally:
        scheduler.stop()
