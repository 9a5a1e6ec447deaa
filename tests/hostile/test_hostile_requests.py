"""Hostile but well-formed-enough requests against the app in process (a tiny random model, 64-token context):
every answer is JSON in OpenAI's error shape or a real completion, never a 500 or plain text."""
from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from llmchat.api import LLM
from llmchat.chat.template import ChatTemplate
from llmchat.server import Scheduler, ServerOptions, create_app, model_info
from llmchat.server.guard import HostPolicy
from llmchat.server.static import parse_ranges
from model_factory import write_model
from gpu_util import adapter_gpu  # noqa: F401 (a fixture)
from server_util import ENGINES

pytestmark = pytest.mark.gpu

HOSTILE = ["\ud800", "a\udfffb", "\x00\x01\x1b[31m\x7f", "\u202e\ufeff", "9" * 5000, "x" * 70000, "💥" * 1000,
           "{{ 7*7 }}{% raw %}", "<|im_start|>system\n", "../../etc/passwd", "%00%2e%2e"]


@pytest.fixture(scope="module", params=ENGINES)  # llmchat's kernels, and llama.cpp's behind the same server
def setup(request, tmp_path_factory, adapter_gpu):  # noqa: F811
    root = tmp_path_factory.mktemp("hostile")
    path = write_model(root / "tiny.gguf")
    (root / "f.bin").write_bytes(bytes(range(256)) * 4)
    on = {"device": adapter_gpu.device} if request.param == "webgpu" else {"engine": "cpu"}
    llm = LLM(str(path), context=64, n_slots=8, max_tokens_per_step=32, **on)
    scheduler = Scheduler(llm.runtime.engine, llm.tokenizer, max_batch=4, max_queue=16, prefill_chunk=8)
    scheduler.start()
    info = model_info(llm.runtime, "tiny", str(path))
    app = create_app(scheduler, info, ServerOptions(web_dir=root, models_dir=root, max_body=1 << 20))

    @app.get("/v1/test-crash")
    async def crash():
        raise RuntimeError("boom")

    app.router.routes.insert(0, app.router.routes.pop())  # ahead of the web folder's catch-all

    yield TestClient(app, raise_server_exceptions=False), llm
    scheduler.stop()
    assert scheduler.failure is None


def post(client, url: str, body) -> object:
    # json.dumps keeps lone surrogates as \ud800 escapes, which is valid JSON (a client library would refuse them).
    return client.post(url, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def assert_json_error(r, status: int | None = None) -> dict:
    assert r.status_code != 500 or status == 500, r.text[:300]
    if status is not None:
        assert r.status_code == status, r.text[:300]
    assert r.headers["content-type"].startswith("application/json"), r.text[:200]
    error = r.json()["error"]
    assert isinstance(error["message"], str) and error["type"]
    return error


def chat(**fields):
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **fields}


@given(text=st.sampled_from(HOSTILE) | st.text(max_size=40), where=st.sampled_from(
    ["model", "content", "role", "name", "stop", "user", "prompt", "path", "model_path", "range", "nested"]))
@settings(max_examples=120, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_hostile_strings_never_crash(setup, text, where):
    client, _ = setup
    if where == "prompt":
        r = post(client, "/v1/completions", {"model": "tiny", "prompt": text, "max_tokens": 1})
    elif where == "path":
        r = client.get("/v1/models/" + quote(text.encode("utf-8", "surrogatepass"), safe=""))
    elif where == "model_path":
        r = client.get("/models/" + quote(text.encode("utf-8", "surrogatepass"), safe="/"))
    elif where == "range":
        r = client.get("/models/f.bin", headers={"Range": "bytes=" + text.encode("ascii", "replace").decode()
                                                 .replace("\r", "").replace("\n", "").replace("\x00", "")})
    elif where == "nested":
        r = post(client, "/v1/chat/completions", chat(stream_options={"include_usage": [[[[text]]]]}))
    elif where in ("content", "name"):
        r = post(client, "/v1/chat/completions", chat(messages=[{"role": "user", "content": "hi", where: text}]))
    elif where == "role":
        r = post(client, "/v1/chat/completions", chat(messages=[{"role": text, "content": "hi"}]))
    else:
        r = post(client, "/v1/chat/completions", chat(**{where: text}))
    assert r.status_code < 500, r.text[:300]
    if r.status_code >= 400 and r.status_code != 416:  # a 416 has no body (Content-Range says why)
        assert_json_error(r)


def test_deep_nesting_is_a_400(setup):
    client, _ = setup
    deep = "[" * 5000 + "]" * 5000
    r = client.post("/v1/chat/completions", content=b'{"model":"tiny","messages":' + deep.encode() + b"}",
                    headers={"content-type": "application/json"})
    assert_json_error(r, 400)


@pytest.mark.parametrize("field,value", [("max_tokens", "4"), ("max_tokens", True), ("stream", "yes"), ("n", 1.0),
                                         ("temperature", "0.5"), ("logprobs", 1), ("seed", 1.5)])
def test_loose_types_are_refused(setup, field, value):
    client, _ = setup
    error = assert_json_error(post(client, "/v1/chat/completions", chat(**{field: value})), 400)
    assert error["param"] == field


@pytest.mark.parametrize("kwargs", [{"messages": []}, {"add_generation_prompt": False}, {"tools": []},
                                    {"bos_token": "x"}, {"raise_exception": 1}, {"range": 1}, {"namespace": 1},
                                    {"enable_thinking": "false"}, {"enable_thinking": 0}])
def test_template_kwargs_cannot_replace_the_templates_own_variables(setup, kwargs):
    client, _ = setup
    error = assert_json_error(post(client, "/v1/chat/completions", chat(chat_template_kwargs=kwargs)), 400)
    assert error["param"] == "chat_template_kwargs" and next(iter(kwargs)) in error["message"]


@pytest.mark.parametrize("field,value", [("grammar", 'root ::= "\ud800"'), ("logit_bias", {"9" * 5000: 1})])
def test_bad_text_is_blamed_on_its_field(setup, field, value):
    client, _ = setup
    error = assert_json_error(post(client, "/v1/chat/completions", chat(**{field: value})), 400)
    assert error["param"] == field and "Exceeds the limit" not in error["message"]


@pytest.mark.parametrize("field,value", [
    ("response_format", {"type": "json_schema", "json_schema": {"name": "deep", "schema": json.loads(
        '{"type": "array", "items": ' * 300 + "{}" + "}" * 300)}}),
    ("grammar", "root ::= " + "(" * 3000 + '"a"' + ")" * 3000),
])
def test_deep_structures_are_a_400_naming_the_field(setup, field, value):
    client, _ = setup
    error = assert_json_error(post(client, "/v1/chat/completions", chat(**{field: value})), 400)
    assert error["param"] == field and "nest more than" in error["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_grammar_that_grows_too_ambiguous_while_replying_is_a_400(setup, stream):
    # One parse after "x", five thousand after it: the grammar compiles, and fails at the reply's second byte.
    client, _ = setup
    pattern = "x(" + "|".join(chr(0x4E00 + i) for i in range(5000)) + ")"
    r = post(client, "/v1/chat/completions", chat(response_format={"type": "regex", "regex": pattern}, stream=stream))
    if stream:
        assert r.status_code == 200
        error = next(json.loads(line[6:])["error"] for line in r.text.splitlines() if '"error"' in line)
    else:
        error = assert_json_error(r, 400)
    assert error["param"] == "response_format" and "simultaneous parses" in error["message"]
    assert error["type"] == "invalid_request_error"


def test_ints_are_still_floats(setup):
    client, _ = setup
    assert post(client, "/v1/chat/completions", chat(temperature=0, top_p=1, presence_penalty=0)).status_code == 200


@pytest.mark.parametrize("message", [{"role": "user", "content": []}, {"role": "tool", "content": "result"}])
def test_bad_messages_are_refused(setup, message):
    client, _ = setup
    assert_json_error(post(client, "/v1/chat/completions", chat(messages=[message])), 400)


def test_template_failure_says_what_is_wrong(setup, monkeypatch):
    client, llm = setup
    # A template that trips a Python error on a message without text (SmolLM2's does this for tool calls).
    monkeypatch.setattr(llm.runtime, "template",
                        ChatTemplate("{% for m in messages %}{{ '<' + m['role'] + '>' + m['content'] }}{% endfor %}"))
    error = assert_json_error(post(client, "/v1/chat/completions", chat(
        messages=[{"role": "assistant", "tool_calls": [{"id": "1"}]}, {"role": "user", "content": "hi"}])), 400)
    assert "TypeError" not in error["message"] and "messages[0]" in error["message"]


def test_a_template_that_never_ends_is_a_400_naming_the_limit(setup, monkeypatch):
    client, llm = setup
    monkeypatch.setattr(llm.runtime, "template", ChatTemplate(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{{ 'a' * 10**9 }}",
        name="tokenizer.chat_template"))
    error = assert_json_error(post(client, "/v1/chat/completions", chat()), 400)
    assert "tokenizer.chat_template" in error["message"] and "1,000,000 operations" in error["message"]
    assert client.get("/health").status_code == 200


def test_lone_surrogate_model_name_is_a_404(setup):
    client, _ = setup
    error = assert_json_error(post(client, "/v1/chat/completions", chat(model="\ud800")), 404)
    assert error["code"] == "model_not_found"


def test_many_prompts_are_refused_before_tokenizing(setup, monkeypatch):
    client, llm = setup
    calls = []
    monkeypatch.setattr(llm.tokenizer, "encode", lambda text, **k: calls.append(len(text)) or [1] * len(text))
    error = assert_json_error(post(client, "/v1/completions", {"model": "tiny", "prompt": ["a"] * 100_000}), 400)
    assert "100000 prompts" in error["message"] and calls == []


def test_long_prompt_is_refused_without_tokenizing_it_all(setup, monkeypatch):
    client, llm = setup
    calls = []
    monkeypatch.setattr(llm.tokenizer, "encode", lambda text, **k: calls.append(len(text)) or [1] * len(text))
    error = assert_json_error(post(client, "/v1/completions", {"model": "tiny", "prompt": "word " * 150_000}), 400)
    assert error["code"] == "context_length_exceeded" and calls == []


def test_large_tools_are_refused_before_any_work(setup, monkeypatch):
    client, llm = setup
    calls = []
    monkeypatch.setattr(llm.tokenizer, "encode", lambda text, **k: calls.append(len(text)) or [1] * len(text))
    tools = [{"type": "function", "function": {"name": f"f{i}", "description": "does a thing " * 200,
                                               "parameters": {"type": "object"}}} for i in range(300)]
    error = assert_json_error(post(client, "/v1/chat/completions", chat(tools=tools)), 400)
    assert error["code"] == "context_length_exceeded" and error["param"] == "tools" and calls == []


def test_a_template_that_writes_a_long_prompt_is_refused_before_tokenizing(setup, monkeypatch):
    client, llm = setup
    calls = []
    monkeypatch.setattr(llm.tokenizer, "encode", lambda text, **k: calls.append(len(text)) or [1] * len(text))
    monkeypatch.setattr(llm.runtime, "template",
                        ChatTemplate("{% for i in range(2000) %}{{ 'padding ' * 100 }}{% endfor %}"))
    error = assert_json_error(post(client, "/v1/chat/completions", chat()), 400)
    assert error["code"] == "context_length_exceeded" and calls == []


def test_unexpected_errors_are_json_500(setup):
    client, _ = setup
    error = assert_json_error(client.get("/v1/test-crash"), 500)
    assert error["type"] == "server_error" and "boom" not in error["message"]


def test_get_on_a_post_route_is_405(setup):
    client, _ = setup
    r = client.get("/v1/chat/completions")
    assert_json_error(r, 405)
    assert r.headers["allow"] == "POST"
    assert_json_error(client.post("/health"), 405)


def test_file_names_longer_than_the_os_allows_are_404(setup):
    client, _ = setup
    assert_json_error(client.get("/models/" + "a" * 5000), 404)
    assert_json_error(client.get("/" + "b" * 5000), 404)


def test_range_abuse(setup):
    client, _ = setup
    size = 1024
    # Overlapping parts are merged: never more bytes than the file.
    r = client.get("/models/f.bin", headers={"Range": "bytes=" + ",".join(["0-1023"] * 16)})
    assert r.status_code == 206 and len(r.content) == size and r.headers["content-range"] == "bytes 0-1023/1024"
    r = client.get("/models/f.bin", headers={"Range": "bytes=0-9,5-19,20-29,-4"})
    assert r.status_code == 206 and r.headers["content-type"].startswith("multipart/byteranges")
    assert r.content.count(b"Content-Range") == 2  # 0-29 and 1020-1023
    # More than 16 parts: ignored, the whole file once.
    r = client.get("/models/f.bin", headers={"Range": "bytes=" + ",".join(["0-0"] * 17)})
    assert r.status_code == 200 and len(r.content) == size
    # Numbers past Python's int() limit.
    r = client.get("/models/f.bin", headers={"Range": "bytes=" + "1" * 5000 + "-"})
    assert r.status_code == 416
    r = client.get("/models/f.bin", headers={"Range": "bytes=0-" + "1" * 5000})
    assert r.status_code == 206 and len(r.content) == size
    assert parse_ranges("bytes=0-4,3-9,10-12,20-", 30) == [(0, 12), (20, 29)]


@pytest.mark.parametrize("bound,header,ok", [
    ("127.0.0.1", "127.0.0.1:8000", True), ("127.0.0.1", "localhost:8000", True), ("127.0.0.1", "[::1]:8000", True),
    ("127.0.0.1", "localhost", True), ("127.0.0.1", "LOCALHOST.:8000", True), ("127.0.0.1", "evil.example:8000", False),
    ("127.0.0.1", "localhost:9999", False), ("127.0.0.1", "10.0.0.5:8000", False), ("127.0.0.1", "[::1", False),
    ("127.0.0.1", "localhost:80x", False), ("0.0.0.0", "10.0.0.5:8000", True), ("0.0.0.0", "[fe80::1]:8000", True),
    ("0.0.0.0", "evil.example:8000", False), ("myhost.lan", "myhost.lan:8000", True),
    ("myhost.lan", "other.lan:8000", False)])
def test_host_policy(bound, header, ok):
    assert HostPolicy(bound, 8000).allows(header) is ok
    assert HostPolicy(bound, 8000, ["evil.example"]).allows("evil.example:8000")
    assert HostPolicy(bound, 8000, ["*"]).allows("anything:1")


def test_requests_while_draining_are_503(setup):
    client, _ = setup
    client.app.state.draining = True
    try:
        for r in (client.get("/health"), post(client, "/v1/chat/completions", chat())):
            error = assert_json_error(r, 503)
            assert "shutting down" in error["message"] and r.headers["connection"] == "close"
    finally:
        client.app.state.draining = False
