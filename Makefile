# Two commands on a fresh machine: `make demo` and `make test` (each sets up .venv first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test data clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,data]'
	# torch only for the runtime-hook tests (the linter never imports it); this exact spec is a CPU build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	touch $(STAMP)

setup: $(STAMP)

## demo: lint the bundled sample with flake8 and write the official CSV reports under out/
demo: $(STAMP)
	$(BIN)/flake8 --select ASC examples/ || true  # exit 1 only means "findings"
	@mkdir -p out/torch_apis out/affinity_apis
	$(BIN)/ascend-analyse -i examples/yolo_mini -o out/torch_apis
	$(BIN)/ascend-analyse -i examples/yolo_mini -o out/affinity_apis -m affinity_apis

## test: run the whole test suite
test: $(STAMP)
	$(BIN)/python -m pytest -q

## data: trace torch's API surface to ATen ops (torch 2.13 CPU, about 10 s), then rebuild the packaged
## rule data from rules_data/sources and torch's stubs (no network)
data: $(STAMP)
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
