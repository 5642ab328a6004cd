# All set-up happens here: a local virtualenv with the pinned working set.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: run test test-fast benchmark clean

$(STAMP): setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[test]'
	touch $(STAMP)

# The main job (for now: a small Transformer learns to reverse sequences).
run: $(STAMP)
	$(BIN)/python -m keras_attn

# The whole suite, slow tests included (this is what CI runs).
test: $(STAMP)
	$(BIN)/python -m pytest tests

# Everything but the tests marked slow.
test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not slow"

benchmark: $(STAMP)
	$(BIN)/python benchmarks/attention.py

clean:
	rm -rf $(VENV) build *.egg-info
