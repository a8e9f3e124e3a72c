# Both entry targets create .venv at the repository root and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# Pin torch before anything depends on it (the CPU build; unpinned pulls CUDA wheels).
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

## The main job on the embedded default: bundled sample history -> Milvus Lite + igraph, then recall.
demo: $(STAMP)
	$(BIN)/memlane retain --bank demo samples/conversations.jsonl
	$(BIN)/memlane recall --bank demo "What is the name of Priya's dog?" --max-tokens 200

## The test suite (unit + integration on real Milvus Lite, igraph and models).
test: $(STAMP)
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .memlane .memlane-eval .memlane-bench
