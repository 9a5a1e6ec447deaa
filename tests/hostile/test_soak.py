"""A short soak (tools/bench/soak.py for 30 s, few clients, a tiny random model): mixed streaming, dropped, oversized
and hostile requests against a real server end with no 5xx, /health answering throughout, nothing left running and
the report's figures filled in."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from model_factory import write_model

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]


def test_short_soak(tmp_path):
    model = write_model(tmp_path / "soak.gguf")
    out = tmp_path / "soak.json"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "bench" / "soak.py"), str(model), "--minutes", "0.5",
                          "--clients", "6", "--ctx", "64", "--sample-every", "5", "--log", str(tmp_path / "serve.log"),
                          "--json", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    kinds = {k.split(":")[0] for k in report["outcomes"]}
    assert all(k.split(":")[1] in ("200", "429", "413", "400", "dropped") for k in report["outcomes"])
    assert kinds == {"plain", "stream", "dropped", "oversized", "too_long", "hostile"}, report["outcomes"]
    assert report["outcomes"].get("oversized:413", 0) > 0 and report["outcomes"].get("too_long:400", 0) > 0
    assert report["outcomes"].get("hostile:400", 0) > 0
    assert report["health_probes"]["count"] >= 5 and report["health_probes"]["failed"] == 0
    assert report["latency_s"]["completed"] > 0 and len(report["rss_mib_and_fds_over_time"]) >= 6
