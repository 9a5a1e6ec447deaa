# `make demo` runs the main job, `make test` the test suite; each first sets up what it needs: Debian packages,
# the virtual environment .venv and the default model. Stamp files inside .venv make repeated runs quick.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
MODEL  ?= smollm2
PYTEST_ARGS ?=

.PHONY: demo test system-deps clean

demo: system-deps $(VENV)/.installed
	$(BIN)/llmchat pull $(MODEL)
	$(BIN)/llmchat inspect $(MODEL)
	$(BIN)/llmchat tokenize $(MODEL) --text "llmchat runs GGUF models on your own GPU."

# LLMCHAT_REQUIRE_MODEL turns "model missing" into a failure instead of a skip.
test: system-deps $(VENV)/.installed-test
	$(BIN)/llmchat pull smollm2 >/dev/null
	LLMCHAT_REQUIRE_MODEL=1 $(BIN)/python -m pytest $(PYTEST_ARGS)

system-deps:
	@PYTHON=$(PYTHON) tools/system-deps.sh

$(VENV)/.created:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "llmchat needs Python >= 3.11; $(PYTHON) is older: run make PYTHON=python3.12 (or newer)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml $(VENV)/.created
	$(BIN)/python -m pip install -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) build dist *.egg-info
