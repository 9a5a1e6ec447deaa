"""The engine commands of the CLI (run, chat, logits, perplexity, bench), each run for real in a subprocess on
the SmolLM2 test model and checked against llama.cpp's numbers where there are some."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from cli_util import hears_ctrl_c, llmchat, ok, one_line_error, read_terminal
from test_cli import GOLDEN

from llmchat.server.launch import free_port

pytestmark = pytest.mark.model
ROOT = Path(__file__).parents[2]

PROMPT = GOLDEN["prompts"][0]  # "The capital of France is"
# Counting from 1 to 7: no near-ties in its first 16 greedy tokens (on prompt 0 llama.cpp's 8-bit activations flip
# a 0.2-logit tie at token 6, which tests/model/test_golden.py allows for).
COUNTING = GOLDEN["prompts"][4]


@pytest.fixture(scope="module")
def model(smollm2_path):
    return str(smollm2_path)


def test_run_json_is_greedy_and_matches_llama_cpp(model):
    out = json.loads(ok(llmchat("run", model, "-p", COUNTING["text"], "-n", "8", "--json")))
    assert out["prompt_ids"] == COUNTING["ids"]
    assert out["ids"] == COUNTING["greedy_ids"][:8]
    assert out["text"] == COUNTING["greedy_text"][:len(out["text"])]
    assert set(out["timings"]) >= {"load_s", "compile_s", "prefill_tok_s", "decode_tok_s", "host_ms_per_token"}
    # A fresh process records the prompt step's program in its first prefill: that time is counted apart.
    assert out["timings"]["compile_s"] > 0
    assert out["adapter"]["name"] and out["finish_reason"] == "length"


SPEED = re.compile(r"llmchat: (\d+) prompt tokens at \d+\.\d tokens/s \(prefill\), (\d+) generated at \d+\.\d "
                   r"tokens/s \(decode\), \d+\.\d s compiling kernels; finish: (\w+)")


def test_run_streams_text_and_honours_stop(model):
    result = llmchat("run", model, "-p", PROMPT["text"], "-n", "16", "--stop", ".")
    assert ok(result) == " Paris\n"  # the greedy text is " Paris.\n\n..." and stops before the "."; piped: no prompt
    speed = SPEED.fullmatch(result.stderr.splitlines()[-1])  # the speed goes to stderr
    assert speed and int(speed[1]) == len(PROMPT["ids"]) and int(speed[2]) >= 1 and speed[3] == "stop", result.stderr


def test_run_on_a_terminal_shows_the_prompt_dimmed_before_the_completion(model):
    terminal, child_side = pty.openpty()
    result = subprocess.run([sys.executable, "-m", "llmchat", "run", model, "-p", PROMPT["text"], "-n", "16",
                             "--stop", "."], stdout=child_side, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(child_side)
    out = read_terminal(terminal)
    os.close(terminal)
    assert result.returncode == 0, result.stderr
    # The terminal turns "\n" into "\r\n".
    assert out.decode() == f"\033[2m{PROMPT['text']}\033[0m Paris\r\n"
    assert SPEED.fullmatch(result.stderr.splitlines()[-1]), result.stderr
    if "llvmpipe" in result.stderr:  # the slow-adapter line says what llvmpipe is, in the README's words
        assert "lavapipe, Mesa's Vulkan on the CPU) runs on the CPU: correct, and slow" in result.stderr


def test_make_demo_completes_then_serves_until_ctrl_c_ends_it_with_status_0(model, tmp_path):
    """The Makefile's own demo recipe, run by make on a terminal of its own (a pty that is make's controlling
    terminal) with its set-up taken as done (-o): the completion as a terminal shows it, serve's account of its
    memory, then Ctrl-C typed at the terminal, which signals the terminal's foreground process group. make
    ends with status 0 and no error line, and serve shut down rather than being killed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, run in (("llmchat", "-m llmchat"), ("python", "")):  # the recipe runs $(BIN)/llmchat, $(BIN)/python
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {run} "$@"\n')
        script.chmod(0o755)
    terminal, child_side = pty.openpty()
    proc = subprocess.Popen(["make", "-o", "system-deps-demo", "-o", ".venv/.installed", "-o", "web",
                             f"BIN={bin_dir}", f"MODEL={model}", f"PORT={free_port()}", "demo"], cwd=ROOT,
                            stdin=child_side, stdout=child_side, stderr=child_side, start_new_session=True,
                            preexec_fn=lambda: (hears_ctrl_c(), fcntl.ioctl(0, termios.TIOCSCTTY, 0)))
    os.close(child_side)
    try:
        out = read_terminal(terminal, b"Application startup complete.", timeout=300)
        os.write(terminal, b"\x03")  # Ctrl-C, as typed
        out += read_terminal(terminal)
        proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(terminal)
    text = out.decode(errors="replace")
    assert "make: ***" not in text and "Traceback" not in text, text
    assert "Finished server process" in text  # uvicorn shut down: serve was not killed
    assert proc.returncode == 0, text
    assert '\033[2mThe three most useful things to know about WebGPU are\033[0m' in text  # the prompt, dimmed
    assert SPEED.search(text), text
    memory = re.search(r"llmchat: GPU memory \d+ MiB: weights [\d.]+ MiB, KV cache [\d.]+ MiB \(f(16|32), "
                       r"(\d+) sequences of 2048 positions\), activations [\d.]+ MiB \(\d+ tokens a step\)\r\n"
                       r"llmchat: the KV cache's (\d+) sequences: up to (\d+) decoded at once \(--max-batch; "
                       r"the default( on a CPU emulation)?\) and (\d+) finished ones kept for prefix sharing", text)
    assert memory, text
    software = "runs on the CPU: correct, and slow" in text
    assert int(memory[2]) == int(memory[3]) == int(memory[4]) + int(memory[6])
    assert (int(memory[4]), bool(memory[5])) == ((2, True) if software else (8, False))


def test_seeded_sampling_repeats(model):
    args = ("run", model, "-p", "Once upon a time", "-n", "6", "--temp", "1.0", "--top-k", "40", "--seed", "7", "--json")
    first, second = (json.loads(ok(llmchat(*args)))["ids"] for _ in range(2))
    assert first == second


def test_logits_top_matches_llama_cpp(model):
    out = json.loads(ok(llmchat("logits", model, "-p", PROMPT["text"], "--top", "5", "--json")))
    assert out["ids"] == PROMPT["ids"]
    assert out["top"][0][0] == PROMPT["top_ids"][0]
    assert abs(out["top"][0][1] - PROMPT["top_logits"][0]) < 0.5


def test_perplexity_json(model, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 6)
    out = json.loads(ok(llmchat("perplexity", model, "--file", str(text), "--window", "32", "--json")))
    assert out["tokens"] > 0 and 1.0 < out["ppl"] < 50 and out["mean_nll"] > 0


def test_bench_json(model):
    out = json.loads(ok(llmchat("bench", model, "-n", "4", "--repeat", "1", "--json")))
    assert out["generated"] == 4 and out["prompt_tokens"] == 33
    assert out["decode_tok_s"] > 0 and out["prefill_tok_s"] > 0 and out["dispatches_per_token"] > 0


def test_weights_from_textures_or_buffers_give_the_same_tokens(model):
    """CPU emulators read split-layout weights from textures (variants.weight_textures); bench's JSON says where
    the weights were read from, LLMCHAT_WEIGHT_TEXTURES=0 keeps them in buffers, and both give the same tokens."""
    bench = json.loads(ok(llmchat("bench", model, "-n", "2", "--repeat", "1", "--json")))
    adapter = bench["adapter"]
    textures = adapter["software"] and adapter["backend"].startswith("wgpu-native")
    assert set(bench["weights_read_from"]) == ({"texture"} if textures else {"buffer"}), bench["weights_read_from"]
    off = {"LLMCHAT_WEIGHT_TEXTURES": "0"}
    assert set(json.loads(ok(llmchat("bench", model, "-n", "2", "--repeat", "1", "--json", env=off)))
               ["weights_read_from"]) == {"buffer"}
    run = ("run", model, "-p", "List three fruits:", "-n", "24", "--json")
    assert json.loads(ok(llmchat(*run)))["ids"] == json.loads(ok(llmchat(*run, env=off)))["ids"]


def test_chat_answers_and_ctrl_c_stops_a_reply_then_says_how_to_leave(model):
    proc = subprocess.Popen([sys.executable, "-m", "llmchat", "chat", model, "-n", "400"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
                            preexec_fn=hears_ctrl_c)
    proc.stdin.write("Tell me a very long story about a dragon.\n")
    proc.stdin.flush()
    out = proc.stdout.read(3)  # "> " prompt and the first streamed character: a reply is under way
    proc.send_signal(signal.SIGINT)
    while not out.endswith("[stopped]\n> "):  # the reply stops, and the next prompt waits for a line
        char = proc.stdout.read(1)
        assert char, out
        out += char
    _wait_for_a_read(proc)
    proc.send_signal(signal.SIGINT)  # at the prompt: the first Ctrl-C only says how to leave
    err = ""
    while not err.endswith("(Ctrl-C again or Ctrl-D leaves; the conversation is not kept)\n"):
        line = proc.stderr.readline()
        assert line, err
        err += line
    assert proc.poll() is None
    _wait_for_a_read(proc)
    proc.send_signal(signal.SIGINT)  # the second leaves
    rest, err_rest = proc.communicate(timeout=120)
    assert proc.returncode == 0, err + err_rest
    assert "Traceback" not in err + err_rest and rest == "\n> \n"  # the prompt again after the hint, then leaving
    assert "chat template: tokenizer.chat_template from the model file" in err  # it says which template it uses
    assert re.search(r"^llmchat: SmolLM2 135M Instruct on ", err, re.M), err  # its name everywhere (model_title)


def _wait_for_a_read(proc: subprocess.Popen, timeout: float = 30) -> None:
    """Wait until the process's main thread blocks reading its stdin pipe. A signal that comes between input()
    writing its prompt and starting to read is only acted on after the read returns (a person never types that
    fast); where the kernel does not say what a thread waits in, a pause stands in."""
    wchan = Path(f"/proc/{proc.pid}/task/{proc.pid}/wchan")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            waiting = wchan.read_text()
        except OSError:
            break
        if waiting in ("", "0"):  # hidden
            break
        if "pipe_read" in waiting:
            return
        time.sleep(0.02)
    time.sleep(0.5)


def not_a_model(tmp_path) -> str:
    """A file named like a model that holds no GGUF: an error about anything else came before it was read."""
    path = tmp_path / "not-a-model.gguf"
    path.write_bytes(b"not a GGUF file")
    return str(path)


def test_bad_sampling_is_refused_before_loading(tmp_path):
    assert "top_p" in one_line_error(llmchat("run", not_a_model(tmp_path), "-p", "x", "--top-p", "3"))


def test_context_overflow_is_an_error_not_a_truncation(model):
    result = llmchat("run", model, "-p", "word " * 40, "-n", "8", "--ctx", "32")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stdout == ""
    # After the notice that the adapter is a CPU emulation, one error line with the numbers.
    assert result.stderr.strip().splitlines()[-1] == (
        "llmchat: error: the prompt has 41 tokens and 8 more were asked for; the context holds 32 "
        "(nothing was truncated)")


def test_run_and_chat_hold_the_reply_to_a_json_schema_or_a_grammar(model, tmp_path):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                               "founded": {"type": "integer", "minimum": 0, "maximum": 2100}},
              "required": ["city", "founded"], "additionalProperties": False}
    (tmp_path / "city.json").write_text(json.dumps(schema))
    out = json.loads(ok(llmchat("run", model, "-p", "Paris as JSON:", "-n", "60", "--json",
                                "--json-schema", str(tmp_path / "city.json"))))
    assert out["finish_reason"] == "stop", out
    reply = json.loads(out["text"])
    assert set(reply) == {"city", "founded"} and 0 <= reply["founded"] <= 2100
    (tmp_path / "yesno.gbnf").write_text('root ::= ("yes" | "no") "!"\n')
    out = ok(llmchat("chat", model, "--grammar", str(tmp_path / "yesno.gbnf"), stdin="Is Paris in France?\n"))
    assert out.strip().splitlines()[0].removeprefix("> ") in ("yes!", "no!")


@pytest.mark.parametrize(("args", "words"), [
    (["--json-schema", "/nonexistent/schema.json"], "cannot read"),
    (["--json-schema", "BAD"], "is not JSON"),
    (["--json-schema", "UNSUPPORTED"], "multipleOf"),
    (["--grammar", "UNDEFINED"], "undefined rule"),
])
def test_bad_schemas_and_grammars_are_one_line_errors(model, tmp_path, args, words):
    files = {"BAD": "{not json", "UNSUPPORTED": '{"type": "integer", "multipleOf": 2}', "UNDEFINED": "root ::= nope"}
    if args[1] in files:
        path = tmp_path / "file"
        path.write_text(files[args[1]])
        args = [args[0], str(path)]
    # A schema is refused before the model is read (so the model need not be one); a grammar needs its vocabulary.
    err = llmchat("run", not_a_model(tmp_path) if args[0] == "--json-schema" else model, "-p", "x", *args)
    assert words in one_line_error(err) if args[0] == "--json-schema" else words in err.stderr.splitlines()[-1]
    assert err.returncode == 2 and "Traceback" not in err.stderr


def test_profile_phone_end_to_end(model):
    """--profile phone on lavapipe: the same greedy tokens, and bench's JSON names the profile and its adapter."""
    out = json.loads(ok(llmchat("run", model, "-p", COUNTING["text"], "-n", "8", "--json", "--profile", "phone")))
    assert out["ids"] == COUNTING["greedy_ids"][:8]
    assert out["adapter"]["profile"] == "phone" and not out["adapter"]["subgroups"] and not out["adapter"]["f16"]
    bench = json.loads(ok(llmchat("bench", model, "-n", "4", "--repeat", "1", "--json", "--profile", "phone")))
    assert bench["profile"] == "phone" and bench["adapter"]["gpu_budget"] == 1 << 30
    assert bench["adapter"]["max_binding_size"] == 128 << 20 and bench["decode_tok_s"] > 0


def test_profile_errors_are_one_line(model):
    line = one_line_error(llmchat("run", model, "-p", "x", "--profile", "toaster"))
    assert "unknown device profile 'toaster'; known profiles: phone, iphone, iphone-safari, adreno, mali" in line
    line = one_line_error(llmchat("run", model, "-p", "x", "--profile", "phone,gpu_budget=110MiB"))
    assert "'phone' device profile" in line and "110.0 MiB GPU memory budget" in line
    assert "the largest context that fits is" in line
    # The environment names the default profile.
    line = one_line_error(llmchat("bench", model, "-n", "1", env={"LLMCHAT_PROFILE": "phone,gpu_budget=64MiB"}))
    assert "no context fits, however small" in line


def test_inspect_reports_what_fits_under_a_profile_without_a_gpu(model):
    plan = json.loads(ok(llmchat("inspect", model, "--json", "--profile", "phone,gpu_budget=110MiB")))["plan"]
    assert plan["profile"] == "phone" and plan["gpu_budget"] == 110 << 20 and plan["largest_context"] > 0
    assert "largest context that fits" in plan["error"]
    text = ok(llmchat("inspect", model, "--profile", "phone"))
    assert "the 'phone' device profile, 1024 MiB GPU memory budget" in text
