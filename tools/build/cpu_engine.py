"""`make demo`'s step that sets up the cpu engine where it is the one `auto` would run: where the only WebGPU
adapter emulates a GPU on the CPU, or there is none, llama-cpp-python is installed, compiled for this CPU
(llmchat.runtime.cpu_build), unless it is there already or $LLMCHAT_ENGINE asks for webgpu. Elsewhere it says
nothing and installs nothing."""
from __future__ import annotations

import os
import subprocess
import sys

from llmchat.errors import NoAdapterError
from llmchat.gpu import open_device
from llmchat.gpu.device import describe_adapter
from llmchat.runtime.cpu_build import cmake_args
from llmchat.runtime.engine_choice import cpu_engine_installed, requested_engine


def main() -> int:
    if requested_engine(None) == "webgpu" or cpu_engine_installed():
        return 0
    try:
        device = open_device()
    except NoAdapterError:
        why = "there is no WebGPU adapter"
    else:
        software, why = device.info.software, f"the only adapter, {describe_adapter(device.info)}, emulates a GPU"
        device.close()
        if not software:
            return 0
    args = cmake_args()
    print(f"llmchat: {why}: installing the cpu engine (llama.cpp built for this CPU: CMAKE_ARGS={args}; a few "
          "minutes, once)", file=sys.stderr, flush=True)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run([sys.executable, "-m", "pip", "install", "-e", f"{root}[cpu]"],
                          env={**os.environ, "CMAKE_ARGS": args}).returncode


if __name__ == "__main__":
    sys.exit(main())
