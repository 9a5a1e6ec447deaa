"""Which kind of device the app runs on, what that means for loading a model, and where the bundled wgpu-native
library is. wgpu-py finds its library inside its own wheel on desktops; phones have no such wheel, so the app
carries the library (a framework on iOS, a jniLibs .so on Android) and points WGPU_LIB_PATH at it before wgpu is
imported."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from llmchat.errors import NoAdapterError

PHONES = ("ios", "android")


def device_kind() -> str:
    """"ios", "android" or "desktop". CPython 3.13+ reports "ios"/"android" itself; Chaquopy's older Pythons
    report "linux" but expose sys.getandroidapilevel, and older iOS builds "darwin" with an iphoneos multiarch."""
    if sys.platform in PHONES:
        return sys.platform
    if hasattr(sys, "getandroidapilevel"):
        return "android"
    if sys.platform == "darwin" and "iphone" in getattr(sys.implementation, "_multiarch", ""):
        return "ios"
    return "desktop"


def load_options(kind: str | None = None) -> dict:
    """Keyword arguments for `llmchat.load`: phones run under the core's phone profile (capped limits and a GPU
    memory budget); desktops use their adapter as it is."""
    return {"profile": "phone"} if (kind or device_kind()) in PHONES else {}


def library_candidates(kind: str, app_dir: Path, native_lib_dir: Path | None = None) -> list[Path]:
    """Where the bundled wgpu-native library may be, best first.

    iOS: the library is embedded as `Frameworks/libwgpu_native.framework` (mobile/README.md says how), or shipped
    as `llmchat_app/native/libwgpu_native.dylib`, which Briefcase's Xcode build moves into a framework, leaving a
    `.fwork` file that holds the framework binary's path relative to the bundle.
    Android: Gradle installs `jniLibs/<abi>/libwgpu_native.so` into the app's native library directory.
    Desktop: a library shipped next to the app wins over the wgpu wheel's own (none is shipped by default)."""
    native = app_dir / "llmchat_app" / "native"
    if kind == "ios":
        bundle = app_dir.parent  # app_dir is <bundle>/app
        fwork = native / "libwgpu_native.fwork"
        found = [bundle / fwork.read_text().strip()] if fwork.is_file() else []
        return found + [bundle / "Frameworks" / "libwgpu_native.framework" / "libwgpu_native",
                        native / "libwgpu_native.dylib"]
    if kind == "android":
        return [native_lib_dir / "libwgpu_native.so"] if native_lib_dir is not None else []
    name = {"win32": "wgpu_native.dll", "darwin": "libwgpu_native.dylib"}.get(sys.platform, "libwgpu_native.so")
    return [native / name]


def configure_wgpu_library(kind: str, app_dir: Path, native_lib_dir: Path | None = None,
                           environ: dict = os.environ) -> Path | None:
    """Set WGPU_LIB_PATH to the bundled library (unless the user set it); returns the path used, or None on a
    desktop that relies on the wgpu wheel's library. A phone without the library raises NoAdapterError naming
    where it looked: wgpu would otherwise fail later with a message about pip."""
    if environ.get("WGPU_LIB_PATH"):
        return Path(environ["WGPU_LIB_PATH"])
    candidates = library_candidates(kind, app_dir, native_lib_dir)
    for path in candidates:
        if path.is_file():
            environ["WGPU_LIB_PATH"] = str(path)
            return path
    if kind == "android":
        # Current Android Gradle plugins keep jniLibs inside the APK (uncompressed) instead of extracting them to
        # the native library directory; Android's linker still loads them by their bare name.
        environ["WGPU_LIB_PATH"] = "libwgpu_native.so"
        return Path("libwgpu_native.so")
    if kind in PHONES:
        raise NoAdapterError("the wgpu-native library is missing from this build (looked for "
                             + ", ".join(map(str, candidates)) + "); see mobile/README.md for where it goes")
    return None


def android_native_lib_dir(toga_app) -> Path | None:
    """The Android app's native library directory, through the Java activity Toga's Android backend wraps."""
    try:
        return Path(str(toga_app._impl.native.getApplicationInfo().nativeLibraryDir))
    except Exception:  # not on Android, or a backend without a Java activity
        return None
