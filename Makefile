# Two commands do all the set-up: `make demo` (the main job on the local lab) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha256sum | cut -c1-12)

.PHONY: test unit lint demo validate clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

# Lint, then every test. pytest's exit 5 ("no tests collected") is a failure here: a suite
# that collects nothing has proven nothing.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest -q -p no:cacheprovider; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .

validate: $(STAMP)
	$(BIN)/gpuinfra validate inventory/lab.py

# Until the lab lands (issue 3) the demo validates the lab spec and checks captured hardware.
demo: $(STAMP)
	$(BIN)/gpuinfra validate inventory/lab.py
	$(BIN)/gpuinfra check --profile nvswitch-all-to-all --gpus 8 --model H100-SXM5-80GB \
	  --topo tests/fixtures/real/nvidia-smi-topo-m/8x-h100-sxm-nv18-no-nics-spaces.txt \
	  --p2p tests/fixtures/real/nvidia-smi-topo-p2p/8x-h100-80gb-hbm3-p2p-r-all-OK.txt

clean:
	rm -rf $(VENV) *.egg-info
