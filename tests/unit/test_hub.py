"""Hugging Face references end to end: the real `llmchat` CLI and the real huggingface_hub client, pointed through
HF_ENDPOINT at a local hub (tests/support/fake_hub.py) that answers as the hub does — file listings, 302 redirects to a
CDN on another origin, Range, ETag / X-Repo-Commit / X-Linked-Etag headers, 401/403 for a gated repository.

Each test gets its own Hugging Face cache (HF_HOME) and llmchat home, so nothing here touches the user's caches.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gguf_factory import default_tensors
from cli_util import ok
from hub_cli import BIG, CUT, env_for, error_line, llmchat
from hub_cli import files, home, hub  # noqa: F401 (fixtures)

huggingface_hub = pytest.importorskip("huggingface_hub")


def snapshot_of(home: Path, repo: str) -> Path:
    storage = home / "hf" / "hub" / ("models--" + repo.replace("/", "--"))
    return storage / "snapshots" / (storage / "refs" / "main").read_text()


# --- pulling ------------------------------------------------------------------------------------------------------


def test_short_reference_pulls_the_matching_quant_into_the_hf_cache(hub, home, files) -> None:
    # huggingface_hub draws its bar only on a terminal; TQDM_POSITION=-1 is its switch to draw it anyway.
    result = llmchat("pull", "org/tiny-GGUF:q8_0", env=env_for(hub, home, TQDM_POSITION="-1"))
    path = Path(ok(result).strip())
    assert path == snapshot_of(home, "org/tiny-GGUF") / "tiny-Q8_0.gguf"
    assert path.read_bytes() == files["tiny-Q8_0.gguf"]
    assert path.is_symlink() and path.resolve().parent.name == "blobs"  # huggingface_hub's own cache layout
    assert "hf://org/tiny-GGUF:q8_0 is tiny-Q8_0.gguf" in result.stderr
    assert [r.path for r in hub.log("hub", "GET") if r.path.startswith("/api/")] == \
        ["/api/models/org/tiny-GGUF/revision/main"]
    assert [r.path for r in hub.log("cdn", "GET")] == \
        [f"/cdn/{hashlib.sha256(files['tiny-Q8_0.gguf']).hexdigest()}?signature=test"]  # followed the redirect
    if int(huggingface_hub.__version__.split(".")[0]) >= 1:  # older releases have no switch to force the bar
        assert "100%" in result.stderr  # huggingface_hub's progress bar, on stderr


def test_every_reference_form_reaches_the_same_file(hub, home, files) -> None:
    env = env_for(hub, home)
    paths = {ref: ok(llmchat("pull", ref, env=env)).strip() for ref in (
        "hf://org/tiny-GGUF/tiny-Q4_0.gguf", "hf://org/tiny-GGUF/tiny-Q4_0.gguf@main", "org/tiny-GGUF:Q4_0",
        "hf.co/org/tiny-GGUF:q4_0", "huggingface.co/org/tiny-GGUF:Q4_0", "hf://org/tiny-GGUF:Q4_0")}
    assert len(set(paths.values())) == 1, paths
    assert len(hub.log("cdn", "GET")) == 1  # fetched once, then found in the cache


def test_default_quant_is_q4_k_m(hub, home, files) -> None:
    path = Path(ok(llmchat("pull", "hf.co/org/default-GGUF", env=env_for(hub, home))).strip())
    assert path.name == "plain-Q4_K_M.gguf" and path.read_bytes() == files["plain-Q4_K_M.gguf"]


def test_a_file_another_tool_fetched_is_reused(hub, home, files) -> None:
    env = env_for(hub, home)
    other_tool = "from huggingface_hub import hf_hub_download; print(hf_hub_download('org/tiny-GGUF', 'tiny-Q8_0.gguf'))"
    theirs = subprocess.run([sys.executable, "-c", other_tool], capture_output=True, text=True, env=env, check=True)
    hub.clear()
    ours = ok(llmchat("pull", "org/tiny-GGUF:Q8_0", env=env)).strip()
    assert ours == theirs.stdout.strip()
    assert hub.log("cdn") == []  # not one byte downloaded again: ETag matched the cached blob


def test_a_cut_connection_is_resumed_where_it_broke(hub, home) -> None:
    sha = hashlib.sha256(BIG).hexdigest()
    hub.cut_at[sha] = CUT  # the CDN drops the first download partway
    result = llmchat("pull", "org/big-GGUF:Q8_0", env=env_for(hub, home))
    path = Path(ok(result).strip())
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    gets = hub.log("cdn", "GET")
    assert len(gets) == 2 and gets[0].range is None, gets
    assert gets[1].range is not None and gets[1].range.endswith("-"), gets
    resumed_at = int(gets[1].range.removeprefix("bytes=")[:-1])
    assert 0 < resumed_at <= CUT  # went on from what it had, not from zero


def test_split_model_is_pulled_whole_and_opens_as_one(hub, home, files) -> None:
    env = env_for(hub, home)
    path = Path(ok(llmchat("pull", "org/split-GGUF:Q4_K_M", env=env)).strip())
    assert path.name == "split-Q4_K_M-00001-of-00003.gguf" and path.parent.name == "Q4_K_M"
    for i in (1, 2, 3):
        shard = path.with_name(f"split-Q4_K_M-0000{i}-of-00003.gguf")
        assert shard.read_bytes() == files[f"Q4_K_M/{shard.name}"]
    summary = json.loads(ok(llmchat("inspect", "org/split-GGUF:Q4_K_M", "--json", env=env)))
    assert [t["name"] for t in summary["tensors"]] == [t.name for t in default_tensors()]
    assert {t["shard"] for t in summary["tensors"]} == {0, 1, 2}
    # Naming one shard exactly means the whole set too.
    assert ok(llmchat("pull", "hf://org/split-GGUF/Q4_K_M/split-Q4_K_M-00002-of-00003.gguf", env=env)).strip() == \
        str(path)


def test_python_api_resolves_references(hub, home, files) -> None:
    script = "from llmchat.hub.catalogue import resolve; print(resolve('hf://org/tiny-GGUF/tiny-Q8_0.gguf'))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env_for(hub, home))
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).read_bytes() == files["tiny-Q8_0.gguf"]


def test_a_reference_is_read_once_however_it_is_pulled(hub, home, files) -> None:
    """resolve parses what the user typed once, and hands the parsed reference on (pull used to parse it again)."""
    script = ("import llmchat.hub.catalogue as c\n"
              "calls = []\n"
              "parse = c.parse_reference\n"
              "c.parse_reference = lambda text: calls.append(text) or parse(text)\n"
              "c.resolve('org/tiny-GGUF:Q8_0')\n"
              "print(len(calls))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env_for(hub, home))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1"]


def test_engine_commands_take_references(hub, home) -> None:
    env = env_for(hub, home)
    ids = ok(llmchat("tokenize", "org/tiny-GGUF:Q8_0", "--text", "hello", env=env)).split()
    assert ids and all(i.isdigit() for i in ids)


def test_cached_models_work_offline(hub, home, files) -> None:
    ok(llmchat("pull", "org/tiny-GGUF:Q8_0", env=env_for(hub, home)))
    hub.clear()
    for env in (env_for(None, home), env_for(hub, home, HF_HUB_OFFLINE="1")):  # hub unreachable / offline mode
        result = llmchat("pull", "org/tiny-GGUF:Q8_0", env=env)
        assert Path(ok(result).strip()).read_bytes() == files["tiny-Q8_0.gguf"]
        assert "choosing among the cached files" in result.stderr
    assert hub.log() == []


def test_gated_model_needs_an_accepted_licence_and_hf_token(hub, home, files) -> None:
    line = error_line(llmchat("pull", "org/gated-GGUF:Q4_0", env=env_for(hub, home)))
    assert "HTTP 401" in line and "accept its licence" in line and "HF_TOKEN" in line
    assert f"{hub.url}/org/gated-GGUF" in line
    line = error_line(llmchat("pull", "org/gated-GGUF:Q4_0", env=env_for(hub, home, HF_TOKEN="hf_not_granted")))
    assert "HTTP 403" in line and "has not been granted access" in line
    path = Path(ok(llmchat("pull", "org/gated-GGUF:Q4_0", env=env_for(hub, home, HF_TOKEN="hf_granted"))).strip())
    assert path.read_bytes() == files["tiny-Q4_0.gguf"]
    tokens = {r.authorization for r in hub.log("hub") if r.path.startswith("/org/gated-GGUF/resolve/")}
    assert tokens == {None, "Bearer hf_not_granted", "Bearer hf_granted"}
    assert all(r.authorization is None for r in hub.log("cdn"))  # the token never leaves the hub for the CDN


# --- errors -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("reference", "expected"), [
    ("org/tiny-GGUF:Q5_K_M", "org/tiny-GGUF has no GGUF file for quantization Q5_K_M; it has: tiny-Q4_0.gguf; "
                             "tiny-Q8_0.gguf. Name one as ORG/REPO:QUANT or hf://ORG/REPO/FILE.gguf"),
    ("hf.co/org/tiny-GGUF", "org/tiny-GGUF has no GGUF file for quantization Q4_K_M; it has: tiny-Q4_0.gguf; "
                            "tiny-Q8_0.gguf"),
    ("hf://org/tiny-GGUF/tiny-F16.gguf", "org/tiny-GGUF@main has no file tiny-F16.gguf"),
    ("org/nowhere-GGUF:Q4_K_M", "org/nowhere-GGUF was not found on"),
    ("hf://org/tiny-GGUF@v9/tiny-Q8_0.gguf", "org/tiny-GGUF has no revision 'v9'"),
])
def test_errors_name_what_is_there(hub, home, reference: str, expected: str) -> None:
    assert expected in error_line(llmchat("pull", reference, env=env_for(hub, home)))


def test_ambiguous_reference_lists_the_candidates(hub, home, files) -> None:
    hub.add_repo("org/twice-GGUF", {"a/m-Q8_0.gguf": files["tiny-Q8_0.gguf"], "b/m-Q8_0.gguf": files["tiny-Q8_0.gguf"]})
    line = error_line(llmchat("pull", "org/twice-GGUF:Q8_0", env=env_for(hub, home)))
    assert "matches 2 models: a/m-Q8_0.gguf; b/m-Q8_0.gguf" in line


def test_unreachable_hub_with_nothing_cached(home) -> None:
    line = error_line(llmchat("pull", "hf://org/tiny-GGUF/tiny-Q8_0.gguf", env=env_for(None, home)))
    assert "cannot reach http://127.0.0.1:9" in line and "not in the Hugging Face cache" in line
    line = error_line(llmchat("pull", "org/tiny-GGUF:Q8_0", env=env_for(None, home)))
    assert "org/tiny-GGUF" in line and "http://127.0.0.1:9" in line


# --- list and rm --------------------------------------------------------------------------------------------------


def test_list_shows_both_caches_with_header_facts(hub, home, files) -> None:
    env = env_for(hub, home)
    ok(llmchat("pull", "org/tiny-GGUF:Q8_0", env=env))
    ok(llmchat("pull", "org/split-GGUF:Q4_K_M", env=env))
    ok(llmchat("pull", "hf://org/default-GGUF/gemma-Q8_0.gguf", env=env))
    ours = home / "llmchat" / "models"
    ours.mkdir(parents=True)
    (ours / "mine.gguf").write_bytes(files["tiny-Q4_0.gguf"])
    (ours / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    rows = {row["model"]: row for row in json.loads(ok(llmchat("list", "--json", env=env)))}
    assert set(rows) == {"mine.gguf", "broken.gguf", "hf://org/tiny-GGUF/tiny-Q8_0.gguf",
                         "hf://org/split-GGUF/Q4_K_M/split-Q4_K_M-00001-of-00003.gguf",
                         "hf://org/default-GGUF/gemma-Q8_0.gguf"}
    tiny = rows["hf://org/tiny-GGUF/tiny-Q8_0.gguf"]
    assert (tiny["source"], tiny["architecture"], tiny["quant"], tiny["runs"], tiny["problem"]) == \
        ("huggingface", "llama", "Q8_0", True, None)
    assert tiny["size"] == len(files["tiny-Q8_0.gguf"]) and tiny["files"] == 1
    mine = rows["mine.gguf"]
    assert (mine["source"], mine["quant"], mine["runs"]) == ("llmchat", "Q4_0", True)
    gemma = rows["hf://org/default-GGUF/gemma-Q8_0.gguf"]
    assert gemma["architecture"] == "olmo2" and not gemma["runs"] and "'olmo2' is not supported" in gemma["problem"]
    split = rows["hf://org/split-GGUF/Q4_K_M/split-Q4_K_M-00001-of-00003.gguf"]
    assert split["files"] == 3 and split["size"] == sum(len(v) for k, v in files.items() if k.startswith("Q4_K_M/"))
    assert not split["runs"]  # a valid GGUF, but not a model (no architecture keys)
    assert rows["broken.gguf"]["problem"] and not rows["broken.gguf"]["runs"]
    text = ok(llmchat("list", env=env))
    assert text.splitlines()[0].split() == ["MODEL", "SIZE", "ARCH", "QUANT", "RUNS"]
    assert "hf://org/default-GGUF/gemma-Q8_0.gguf: " in text  # the reason it cannot run, under the table
    # What the list names can be given as MODEL.
    assert ok(llmchat("tokenize", "mine.gguf", "--text", "hi", env=env)).split()


def test_rm_removes_the_file_and_its_blob(hub, home, files) -> None:
    env = env_for(hub, home)
    path = Path(ok(llmchat("pull", "org/tiny-GGUF:Q8_0", env=env)).strip())
    blob = path.resolve()
    ok(llmchat("pull", "org/tiny-GGUF:Q4_0", env=env))
    assert ok(llmchat("rm", "hf.co/org/tiny-GGUF:q8_0", env=env)).strip() == f"removed {path}"
    assert not path.exists() and not blob.exists()
    assert path.with_name("tiny-Q4_0.gguf").is_file()  # the other file of the repository stays
    line = error_line(llmchat("rm", "org/tiny-GGUF:Q8_0", env=env))
    assert "is not in the Hugging Face cache" in line and "tiny-Q4_0.gguf" in line
    split = Path(ok(llmchat("pull", "org/split-GGUF:Q4_K_M", env=env)).strip())
    assert len(ok(llmchat("rm", "org/split-GGUF:Q4_K_M", env=env)).splitlines()) == 3
    assert not any(split.parent.iterdir())
    line = error_line(llmchat("rm", "smollm2", env=env))
    assert "smollm2 is not in the cache" in line
    assert "is not in the Hugging Face cache" in error_line(llmchat("rm", "qwen3-0.6b", env=env))


# --- catalogue entries that live on the hub -----------------------------------------------------------------------

ADD_ENTRY = """
import sys
import llmchat.hub.catalogue as c
c.CATALOGUE["tiny"] = c.CatalogueEntry(name="tiny", description="test", file_name="tiny-Q8_0.gguf",
                                       size=int(sys.argv[1]), sha256=sys.argv[2],
                                       hub="hf://org/tiny-GGUF/tiny-Q8_0.gguf")
from llmchat.cli import main
raise SystemExit(main(sys.argv[3:]))
"""


def test_hub_catalogue_entry_is_checked(hub, home, files) -> None:
    data = files["tiny-Q8_0.gguf"]
    sha = hashlib.sha256(data).hexdigest()
    env = env_for(hub, home)

    def run(size: int, digest: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", ADD_ENTRY, str(size), digest, *args], capture_output=True,
                              text=True, env=env)

    assert Path(ok(run(len(data), sha, "pull", "tiny", "--verify")).strip()).read_bytes() == data
    line = error_line(run(len(data) + 1, sha, "pull", "tiny"))
    assert f"has {len(data)} bytes instead of {len(data) + 1}" in line and "llmchat rm tiny" in line
    line = error_line(run(len(data), "0" * 64, "pull", "tiny", "--verify"))
    assert f"has sha256 {sha} instead of {'0' * 64}" in line
    assert ok(run(len(data), sha, "rm", "tiny")).startswith("removed ")


def test_real_catalogue_entries_go_to_their_repositories(hub, home, files) -> None:
    # The catalogue's hub entries ask HF_ENDPOINT for their exact repository and file; the local hub holds a file of
    # another size under that name, which the catalogue's size check refuses.
    hub.add_repo("HuggingFaceTB/SmolLM2-360M-Instruct-GGUF", {"smollm2-360m-instruct-q8_0.gguf": files["tiny-Q8_0.gguf"]})
    line = error_line(llmchat("pull", "smollm2-360m", env=env_for(hub, home)))
    assert f"has {len(files['tiny-Q8_0.gguf'])} bytes instead of 386404992" in line


# --- plain URLs -----------------------------------------------------------------------------------------------------


def test_pull_url_downloads_in_chunks_and_retries_a_cut_chunk(hub, home) -> None:
    env = env_for(hub, home)
    url = f"{hub.url}/org/big-GGUF/resolve/main/big-Q8_0.gguf"  # redirects to the CDN, as hub URLs do
    sha = hashlib.sha256(BIG).hexdigest()
    hub.cut_at[sha] = CUT
    path = Path(ok(llmchat("pull", url, env=env)).strip())
    port = hub.url.rsplit(":", 1)[1]
    assert path == home / "llmchat" / "models" / "url" / f"127.0.0.1_{port}" / "org/big-GGUF/resolve/main/big-Q8_0.gguf"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == sha
    ranges = [r.range for r in hub.log("cdn", "GET")]
    chunk = 16 << 20
    assert ranges == ["bytes=0-65535", f"bytes=0-{chunk - 1}", f"bytes=0-{chunk - 1}",  # the cut chunk, again
                      f"bytes={chunk}-{len(BIG) - 1}"]
    assert list(path.parent.glob(".*")) == []  # no partial file left behind
    hub.clear()
    assert ok(llmchat("pull", url, env=env)).strip() == str(path)
    assert [r.range for r in hub.log("cdn", "GET")] == ["bytes=0-65535"]  # a size check, not a second download
    assert ok(llmchat("rm", url, env=env)).strip() == f"removed {path}"
    assert "has not been pulled" in error_line(llmchat("rm", url, env=env))


def test_pull_url_of_a_split_model_fetches_every_shard(hub, home, files) -> None:
    base = f"{hub.url}/org/split-GGUF/resolve/main/Q4_K_M/split-Q4_K_M-0000"
    path = Path(ok(llmchat("pull", f"{base}2-of-00003.gguf", env=env_for(hub, home))).strip())
    assert path.name == "split-Q4_K_M-00001-of-00003.gguf"
    for i in (1, 2, 3):
        assert path.with_name(f"split-Q4_K_M-0000{i}-of-00003.gguf").read_bytes() == \
            files[f"Q4_K_M/split-Q4_K_M-0000{i}-of-00003.gguf"]


# --- the server -----------------------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_serve_takes_a_reference(hub, home, files) -> None:
    import httpx

    from server_util import running_server

    env = env_for(hub, home)
    with running_server("org/tiny-GGUF:Q8_0", ["--ctx", "64", "--max-batch", "1"], env=env,
                        log=home / "serve.log") as base:
        models = httpx.get(f"{base}/v1/models", timeout=30).json()
        assert [m["id"] for m in models["data"]] == ["tiny-Q8_0"]
        reply = httpx.post(f"{base}/v1/completions", json={"model": "org/tiny-GGUF:Q8_0", "prompt": "hello",
                                                             "max_tokens": 2}, timeout=120)
        assert reply.status_code == 200, reply.text
        assert reply.json()["usage"]["completion_tokens"] == 2
        served = httpx.get(f"{base}/models/tiny-Q8_0.gguf", timeout=30)  # the file, under the repository's name
        assert served.status_code == 200 and served.content == files["tiny-Q8_0.gguf"]
