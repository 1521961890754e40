# Two commands on a fresh machine: `make demo` and `make test` (each sets up .venv first).
# `make demo` installs the package alone; `make test` adds the test extras and torch.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PACKAGE_STAMP := $(VENV)/.installed-package
TEST_STAMP := $(VENV)/.installed-test
# torch==2.13.0 is only for the runtime-hook tests (the linter never imports it). From a plain package index on
# Linux x86-64 it resolves to the CUDA build, which pulls in about 19 nvidia-* packages (several GB); the tests
# need only the CPU build: `make test TORCH_INDEX=https://download.pytorch.org/whl/cpu`.
TORCH_INDEX ?=

.PHONY: setup demo test data clean

$(PACKAGE_STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
		{ echo "flake8-ascend needs Python >= 3.10; run: make PYTHON=python3.11 ..." >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(PACKAGE_STAMP)

$(TEST_STAMP): $(PACKAGE_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,data]'
	$(BIN)/python -m pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) torch==2.13.0
	touch $(TEST_STAMP)

setup: $(TEST_STAMP)

## demo: lint the bundled sample with flake8 and write the official CSV reports under out/ (no torch needed)
demo: $(PACKAGE_STAMP)
	$(BIN)/flake8 --select ASC,E9 examples/ || true  # exit 1 only means "findings"
	$(BIN)/ascend-analyse -i examples/yolo_mini -o out
	$(BIN)/ascend-analyse -i examples/yolo_mini -o out -m affinity_apis

## test: run the whole test suite
test: $(TEST_STAMP)
	$(BIN)/python -m pytest -q

## data: trace torch's API surface to ATen ops (torch 2.13 CPU, about 10 s), then rebuild the packaged
## rule data from rules_data/sources and torch's stubs (no network)
data: $(TEST_STAMP)
	$(BIN)/python tools/trace_torch_apis.py
	$(PYTHON) tools/build_rules_data.py
	$(PYTHON) tools/build_affinity.py
	$(PYTHON) tools/build_aten_ops.py
	$(PYTHON) tools/build_transfer_to_npu.py
	$(PYTHON) tools/build_cuda_fixes.py
	$(PYTHON) tools/build_mmcv_ops.py
	$(BIN)/python tools/build_torch_types.py  # reads torch's stubs

clean:
	rm -rf $(VENV) out build *.egg-info src/*.egg-info
