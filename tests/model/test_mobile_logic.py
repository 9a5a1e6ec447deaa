"""The app's plain modules, without a GUI: downloads (cut, paused, resumed, checked, storage full), conversations
that survive a kill, the platform's choices, and wgpu-native loaded from an app bundle's layout."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mobile_support import ROOT, mirror_url, model_mirror

from llmchat.hub.catalogue import CATALOGUE
from llmchat_app import conversations as conv
from llmchat_app.downloads import CHUNK, download
from llmchat_app.errors import ChecksumMismatchError, DownloadInterruptedError, NoSourceError, StorageFullError
from llmchat_app.platform import configure_wgpu_library, device_kind, library_candidates, load_options
from llmchat_app.store import ModelStore

ENTRY = CATALOGUE["smollm2"]


@pytest.fixture
def served(smollm2_path):
    with model_mirror(smollm2_path, cut_at=ENTRY.size // 3 + 12345) as server:
        yield server


def test_download_survives_a_cut_connection_and_a_kill(tmp_path, served):
    store = ModelStore(tmp_path, mirror=mirror_url(served))
    cancel, seen = threading.Event(), []

    def progress(have, total):
        seen.append(have)
        if have > ENTRY.size // 2:
            cancel.set()  # the app is stopped here, after the cut connection was resumed by the reader's retry

    with pytest.raises(DownloadInterruptedError, match="resumes"):
        download(store, ENTRY, progress=progress, cancel=cancel)
    assert served.faults.drop_model_at is None  # the connection was cut once, mid-file, and the download went on
    kept = store.partial_path(ENTRY).stat().st_size
    assert ENTRY.size // 2 < kept < ENTRY.size and not store.path(ENTRY).exists()
    assert store.state(ENTRY).label.startswith("partial")
    first_run = len(served.log.model_ranges())
    again = []
    path = download(ModelStore(tmp_path, mirror=mirror_url(served)), ENTRY, progress=lambda h, t: again.append(h))
    assert again[0] == kept  # the second run starts where the first one stopped
    assert path.stat().st_size == ENTRY.size and not store.partial_path(ENTRY).exists()
    probe, *rest = served.log.model_ranges()[first_run:]
    assert probe == (0, (64 << 10) - 1)  # the reader learns the size; then only the missing bytes are asked for
    assert rest[0][0] == kept and sum(end - start + 1 for start, end in rest) == ENTRY.size - kept
    assert store.delete(ENTRY) == [path] and store.state(ENTRY).label == "not downloaded"


def test_a_corrupted_partial_fails_the_sha256_and_is_discarded(tmp_path, served, smollm2_path):
    store = ModelStore(tmp_path, mirror=mirror_url(served))
    with smollm2_path.open("rb") as f:
        head = bytearray(f.read(5 * CHUNK))
    head[1000] ^= 0xFF
    store.partial_path(ENTRY).write_bytes(head)
    with pytest.raises(ChecksumMismatchError, match="discarded"):
        download(store, ENTRY)
    assert not store.partial_path(ENTRY).exists() and not store.path(ENTRY).exists()


def test_storage_full_keeps_what_was_written_and_says_what_is_needed(tmp_path, served):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    store = ModelStore(tmp_path, mirror=mirror_url(served))
    store.partial_path(ENTRY).symlink_to("/dev/full")  # every write there fails with ENOSPC, from the kernel
    with pytest.raises(StorageFullError, match=r"needs 98\.4 MB more") as info:
        download(store, ENTRY)
    assert info.value.needed == ENTRY.size


def test_a_model_in_a_wheel_needs_a_mirror(tmp_path):
    with pytest.raises(NoSourceError, match="mirror"):
        ModelStore(tmp_path).url(ENTRY)
    hub = ModelStore(tmp_path).url(CATALOGUE["gemma3-1b"])
    assert hub.endswith("/ggml-org/gemma-3-1b-it-GGUF/resolve/main/gemma-3-1b-it-Q4_K_M.gguf")


def test_a_reply_cut_by_a_kill_is_marked_cut(tmp_path):
    db = tmp_path / "c.sqlite3"
    store = conv.ConversationStore(db)
    c = store.new_conversation("smollm2", "Be brief.")
    store.add_user(c.id, "Hello there")
    done = store.begin_reply(c.id)
    store.finish_reply(done.id, "Hi!", [1, 2])
    store.add_user(c.id, "Tell me more")
    growing = store.begin_reply(c.id)
    store.update_reply(growing.id, "Well, the", [5, 6, 7])
    # The process dies here: no finish_reply. The next start finds the row still being written.
    reopened = conv.ConversationStore(db)
    assert reopened.cut_on_start == 1
    msgs = reopened.messages(c.id)
    assert [(m.role, m.content, m.state) for m in msgs] == [
        ("user", "Hello there", conv.DONE), ("assistant", "Hi!", conv.DONE),
        ("user", "Tell me more", conv.DONE), ("assistant", "Well, the", conv.CUT)]
    assert msgs[-1].tokens == (5, 6, 7)
    assert reopened.conversations()[0].title == "Hello there"
    assert conv.chat_messages(reopened.conversation(c.id), msgs)[0] == {"role": "system", "content": "Be brief."}
    assert conv.ConversationStore(db).cut_on_start == 0  # marked once, not again


def test_phones_load_under_the_phone_profile_desktops_as_they_are():
    assert device_kind() == "desktop"  # this machine
    assert load_options("ios") == load_options("android") == {"profile": "phone"}
    assert load_options("desktop") == {}


def _wheel_library() -> Path:
    import wgpu
    return Path(wgpu.__file__).parent / "resources" / "libwgpu_native-release.so"


ADAPTER_PROBE = """
import json, wgpu
from wgpu.backends.wgpu_native import _ffi
adapter = wgpu.gpu.request_adapter_sync()
print(json.dumps({"lib": _ffi.get_wgpu_lib_path(), "loaded": _ffi.lib_path, "adapter": adapter.info["device"]}))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["android", "ios"])
def test_the_bundled_wgpu_native_library_is_found_and_loads(tmp_path, kind):
    """The Linux library stands in for a phone's: placed where the phone build puts its own, found by the start-up
    code, and loaded by wgpu from there in a fresh interpreter (which then finds the real lavapipe adapter)."""
    app_dir = tmp_path / "bundle" / "app"
    app_dir.mkdir(parents=True)
    if kind == "android":
        native = tmp_path / "data" / "app" / "lib" / "x86_64"  # where Android installs jniLibs/<abi>/*.so
        native.mkdir(parents=True)
        shutil.copy(_wheel_library(), native / "libwgpu_native.so")
        expected = native / "libwgpu_native.so"
    else:
        framework = tmp_path / "bundle" / "Frameworks" / "org.llmchat.wgpu.framework"
        framework.mkdir(parents=True)
        shutil.copy(_wheel_library(), framework / "wgpu")
        (app_dir / "llmchat_app" / "native").mkdir(parents=True)
        (app_dir / "llmchat_app" / "native" / "libwgpu_native.fwork").write_text("Frameworks/org.llmchat.wgpu.framework/wgpu\n")
        native, expected = None, framework / "wgpu"
    env = {k: v for k, v in os.environ.items() if k != "WGPU_LIB_PATH"}
    assert configure_wgpu_library(kind, app_dir, native, env) == expected
    assert env["WGPU_LIB_PATH"] == str(expected)
    out = subprocess.run([sys.executable, "-c", ADAPTER_PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["lib"] == str(expected) and probe["loaded"] == str(expected)
    assert probe["adapter"]


def test_a_phone_build_without_the_library_says_where_it_looked(tmp_path):
    from llmchat.errors import NoAdapterError
    with pytest.raises(NoAdapterError, match="libwgpu_native.framework"):
        configure_wgpu_library("ios", tmp_path / "app", None, {})
    env = {}  # Android: a library kept inside the APK is loaded by its name, by Android's linker
    assert configure_wgpu_library("android", tmp_path, tmp_path / "lib", env) == Path("libwgpu_native.so")
    assert env["WGPU_LIB_PATH"] == "libwgpu_native.so"
    assert configure_wgpu_library("desktop", tmp_path, None, {}) is None  # the wgpu wheel's own library serves
    assert library_candidates("ios", tmp_path / "app")[0].name == "libwgpu_native"


@pytest.mark.gpu
def test_the_pure_wgpu_wheel_runs_compute_with_a_bundled_library(tmp_path):
    """mobile/tools/build_wgpu_wheel.py from wgpu's sdist: pure, no native library, dependencies trimmed; installed
    on its own it finds an adapter through WGPU_LIB_PATH (the phone apps' arrangement)."""
    sys.path.insert(0, str(ROOT / "mobile" / "tools"))
    import build_wgpu_wheel
    from importlib import metadata

    try:
        result = build_wgpu_wheel.build(metadata.version("wgpu"), tmp_path / "wheels")
    except subprocess.CalledProcessError as e:
        if os.environ.get("LLMCHAT_REQUIRE_MODEL") == "1":
            raise
        pytest.skip(f"pip could not fetch or build wgpu's sdist ({e}); needs the package index")
    assert [build_wgpu_wheel.requirement_name(r) for r in result["requires"]] == ["cffi", "rubicon-objc"]
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    result["wheel"]], check=True)
    assert not list(target.rglob("*.so")) and not list(target.rglob("*.dylib"))
    library = tmp_path / "lib" / "libwgpu_native.so"
    library.parent.mkdir()
    shutil.copy(_wheel_library(), library)
    env = {**os.environ, "PYTHONPATH": str(target), "WGPU_LIB_PATH": str(library)}
    probe = ADAPTER_PROBE + "print(wgpu.__file__)\n"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    info, wgpu_file = out.stdout.strip().splitlines()[-2:]
    assert wgpu_file.startswith(str(target)) and json.loads(info)["loaded"] == str(library)


def test_a_model_too_large_for_the_adapter_is_refused_from_its_header(tmp_path, served, smollm2_path):
    """The fit check reads the header over HTTP Range and plans on the adapter's limits: a phone-sized binding limit
    refuses SmolLM2's 2048-token plan with the core's numbers, before the download."""
    from llmchat.gpu.device import AdapterInfo
    from llmchat_app.device_report import fit

    store = ModelStore(tmp_path, mirror=mirror_url(served))
    roomy = AdapterInfo(name="test", backend="vulkan")
    assert fit(store, ENTRY, roomy).fits is True
    tight = dataclasses.replace(roomy, max_binding_size=4 << 20)
    verdict = fit(store, ENTRY, tight)
    assert verdict.fits is False and "cannot run on this device" in verdict.detail and "4 MiB" in verdict.detail
    assert served.log.model_bytes < ENTRY.size // 10  # the header, read in 1 MiB blocks; not the model
    assert fit(ModelStore(tmp_path), ENTRY, roomy, remote=False).fits is None


NO_ADAPTER_APP = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[1])
from llmchat_app.app import main
app = main()
deadline = time.monotonic() + 60
while app.adapter is None and "No GPU adapter" not in app.device_text.value and time.monotonic() < deadline:
    app.loop.run_until_complete(asyncio.sleep(0.05))
print(app.device_text.value)
"""


def test_no_gpu_adapter_is_said_on_the_device_screen(tmp_path):
    env = {**os.environ, "TOGA_BACKEND": "toga_dummy", "TOGA_DUMMY_HOME": str(tmp_path),
           "WGPU_LIB_PATH": str(tmp_path / "missing" / "libwgpu_native.so")}
    out = subprocess.run([sys.executable, "-c", NO_ADAPTER_APP, str(ROOT / "mobile" / "src")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("No GPU adapter: ") and "libwgpu_native.so" in out.stdout, out.stdout
