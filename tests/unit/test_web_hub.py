"""web/hub.js, the browser's reading of Hugging Face references, under Node: the same answers as core/hub_ref.py on
the shared cases, and real resolutions against a local hub (its file listing, then the file's URL)."""
from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from fake_hub import FakeHub
from test_hub_refs import CASES

HERE = Path(__file__).parents[1]
RUNNER = HERE / "node" / "hub_cases.mjs"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

MODELS = [
    "hf://org/single/m-Q8_0.gguf",
    "org/single:q8_0",
    "hf.co/org/single",
    "hf://org/single@v2/m-Q8_0.gguf",
    "org/split:Q4_K_M",
    "org/single:Q2_K",
    "org/nowhere:Q4_K_M",
    "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory):
    hub = FakeHub()
    hub.add_repo("org/single", {"README.md": b"# single\n", "m-Q4_K_M.gguf": b"GGUF q4", "m-Q8_0.gguf": b"GGUF q8"},
                 revisions=("main", "v2"))
    hub.add_repo("org/split", {f"big-Q4_K_M-0000{i}-of-00002.gguf": b"GGUF %d" % i for i in (1, 2)})
    try:
        result = subprocess.run(["node", str(RUNNER), str(HERE / "data" / "hub_references.json"), hub.url, *MODELS],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        yield hub, json.loads(result.stdout)
    finally:
        hub.close()


def test_parse_cases_match(answers) -> None:
    _, out = answers
    for case, got in zip(CASES["parse"], out["parse"], strict=True):
        if "error" in case:
            assert case["error"] in got.get("error", ""), (case, got)
            assert got["code"] == "model-not-found"
        else:
            assert got == {"value": case["ref"]}, case


def test_url_cases_match(answers) -> None:
    _, out = answers
    assert [got["value"] for got in out["urls"]] == [case["url"] for case in CASES["urls"]]


def test_choose_cases_match(answers) -> None:
    _, out = answers
    for case, got in zip(CASES["choose"], out["choose"], strict=True):
        if "error" in case:
            assert case["error"] in got.get("error", ""), (case, got)
            for listed in case["lists"]:
                assert listed in got["error"]
        else:
            assert got == {"value": case["chosen"]}, case


def test_resolutions_against_a_hub(answers) -> None:
    hub, out = answers
    got = dict(zip(MODELS, out["resolve"], strict=True))
    q8 = f"{hub.url}/org/single/resolve/main/m-Q8_0.gguf"
    assert got["hf://org/single/m-Q8_0.gguf"] == {"value": q8}
    assert got["org/single:q8_0"] == {"value": q8}
    assert got["hf.co/org/single"] == {"value": f"{hub.url}/org/single/resolve/main/m-Q4_K_M.gguf"}
    assert got["hf://org/single@v2/m-Q8_0.gguf"] == {"value": f"{hub.url}/org/single/resolve/v2/m-Q8_0.gguf"}
    # A split model resolves to its first shard; the browser opens the others beside it.
    assert got["org/split:Q4_K_M"] == {"value": f"{hub.url}/org/split/resolve/main/big-Q4_K_M-00001-of-00002.gguf"}
    assert got["org/single:Q2_K"]["code"] == "model-not-found"
    assert "m-Q4_K_M.gguf; m-Q8_0.gguf" in got["org/single:Q2_K"]["error"]
    assert got["org/nowhere:Q4_K_M"]["code"] == "model-not-found"
    assert got["/models/SmolLM2-135M-Instruct.Q4_1.gguf"] == {"value": "/models/SmolLM2-135M-Instruct.Q4_1.gguf"}
    # The URL the page will fetch leads to the bytes (through the hub's redirect to its CDN).
    with urllib.request.urlopen(q8) as response:
        assert response.read() == b"GGUF q8"
    listings = [r.path for r in hub.log("hub") if r.path.startswith("/api/")]
    assert "/api/models/org/single/revision/main" in listings  # the short forms asked for the file list
    assert not any("v2" in p for p in listings)  # an exact file needs no listing


def test_an_unreachable_hub_is_a_network_error(tmp_path: Path) -> None:
    result = subprocess.run(["node", str(RUNNER), str(HERE / "data" / "hub_references.json"), "http://127.0.0.1:9",
                             "org/repo:Q4_K_M"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    (answer,) = json.loads(result.stdout)["resolve"]
    assert answer["code"] == "network" and "could not list org/repo" in answer["error"]
