# fusionopt — the two entry points of the README, idempotent on a fresh Debian 12 machine:
#   make demo   install dependencies, build, optimize the default model at -O3, bench it, print the summary
#   make test   install dependencies, build, run every test (C++ unit tests, then pytest), then
#               the hardening checks: sanitize-test and fuzz-smoke; closes with a summary line per
#               stage and the totals
#   make sanitize-test  the unit tests (and fuzz regressions) under ASan + UBSan, in $(BUILD_HARDENING)
#   make fuzz-smoke     each libFuzzer target for 60 s (scripts/fuzz.sh; docs/robustness.md)
#   make install        build, then install the CLI, plugin, header and docs under PREFIX (default /usr/local)
#   make package        build, then the Debian packages fusionopt_<version>_amd64.deb (and fusionopt-cuda_...)
#                       in $(BUILD)/packages (CPack; docs/install.md)
#   make wheel          the Python package as a wheel in $(BUILD)/dist (pyproject.toml; docs/python.md)
#   make real-models    the real-export corpus (models/real/README.md): torch, transformers,
#                       torchvision, timm, ultralytics in .venv-export; fixtures, then full size

SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
VENV := .venv
PYTHON := $(VENV)/bin/python
DEMO_MODEL ?= models/bert_style.onnx
DEMO_OUT := $(BUILD)/demo

# What building the CLI needs (make demo, make install), then what the tests add. Debian's oneDNN
# is built with its OpenCL runtime and its CMake config requires OpenCL, which libdnnl-dev only
# recommends: without ocl-icd-opencl-dev a bare machine's --no-install-recommends build fails.
APT_BUILD_PACKAGES := build-essential cmake pkg-config libprotobuf-dev protobuf-compiler \
  libonnx-dev libcli11-dev libspdlog-dev libfmt-dev catch2 nlohmann-json3-dev libdnnl-dev libdlpack-dev \
  ocl-icd-opencl-dev
APT_PACKAGES := $(APT_BUILD_PACKAGES) libonnx-testdata python3 python3-venv python3-pip clang \
  libclang-rt-14-dev libomp-14-dev
APT_BUILD_STAMP := $(BUILD)/.apt-$(shell echo $(APT_BUILD_PACKAGES) | md5sum | cut -c1-8)
APT_STAMP := $(BUILD)/.apt-$(shell echo $(APT_PACKAGES) | md5sum | cut -c1-8)
PREFIX ?= /usr/local
# The hardening build: clang (libFuzzer), ASan + UBSan and the fuzzers in one folder, CUDA off;
# -O1 with line tables only, the cheapest flags that keep reports readable (2-core CI).
BUILD_HARDENING ?= build-hardening
HARDENING_CMAKE_FLAGS := -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only" \
  -DFUSIONOPT_SANITIZE=ON -DFUSIONOPT_FUZZ=ON -DFUSIONOPT_WITH_CUDA=OFF
FUZZ_TARGETS := loader_fuzzer shape_inference_fuzzer text_format_fuzzer pipeline_fuzzer
# Any sanitizer report fails the test that triggered it (the code is built with
# -fno-sanitize-recover=all; these make the exit code and the report certain).
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
VENV_STAMP := $(VENV)/.installed-$(shell md5sum requirements-dev.txt | cut -c1-8)
EXPORT_VENV := .venv-export
EXPORT_STAMP := $(EXPORT_VENV)/.installed-$(shell md5sum models/real/requirements.txt | cut -c1-8)
# pytest: unbuffered, so a CI log shows how far it got; a test that runs past 15 minutes fails
# with its stack instead of stalling the whole run; the slowest tests are listed at the end.
PYTEST := PYTHONUNBUFFERED=1 FUSIONOPT_BIN=$(abspath $(BUILD))/fusionopt $(PYTHON) -m pytest tests/python \
  -q -p no:cacheprovider --timeout=900 --durations=10

.PHONY: all deps build build-cli demo test unit-test py-test hardening-build sanitize-test fuzz-smoke clean \
  real-models install package wheel

all: build

# Installs whichever of the listed Debian packages are missing, with apt-get options $(2). The
# CLI's build takes no recommended extras (hundreds of MB it never uses); the test set keeps them.
define install_apt_packages
	@mkdir -p $(BUILD)
	@missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) $$missing; \
	fi
	@touch $@
endef

$(APT_BUILD_STAMP):
	$(call install_apt_packages,$(APT_BUILD_PACKAGES),--no-install-recommends)

$(APT_STAMP):
	$(call install_apt_packages,$(APT_PACKAGES),)

$(VENV_STAMP): requirements-dev.txt
	@test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q -r requirements-dev.txt
	@touch $@

$(EXPORT_STAMP): models/real/requirements.txt
	@test -x $(EXPORT_VENV)/bin/python || python3 -m venv $(EXPORT_VENV)
	$(EXPORT_VENV)/bin/python -m pip install -q -r models/real/requirements.txt
	@touch $@

# The committed fixtures (small configs), then the full-size configs into models/bench/real.
real-models: $(APT_STAMP) $(EXPORT_STAMP)
	$(EXPORT_VENV)/bin/python models/real/export.py
	$(EXPORT_VENV)/bin/python models/real/export.py --full

deps: $(APT_STAMP) $(VENV_STAMP)

build: $(APT_STAMP)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# Only the CLI: what the demo runs (its CPU runtime; the plugin is not needed to optimize or bench
# on the CPU), without the tests, the CUDA suite and the benchmarks.
build-cli: $(APT_BUILD_STAMP)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target fusionopt

install: build
	cmake --install $(BUILD) --prefix $(PREFIX) --strip

package: build
	cd $(BUILD) && cpack -G DEB

demo: build-cli
	@mkdir -p $(DEMO_OUT)
	$(BUILD)/fusionopt inspect $(DEMO_MODEL)
	$(BUILD)/fusionopt $(DEMO_MODEL) -O3 -o $(DEMO_OUT)/$(notdir $(DEMO_MODEL)) --report $(DEMO_OUT)/report.json
	$(BUILD)/fusionopt inspect $(DEMO_OUT)/$(notdir $(DEMO_MODEL)) --json > $(DEMO_OUT)/summary.json
	$(BUILD)/fusionopt bench $(DEMO_MODEL) --optimized $(DEMO_OUT)/$(notdir $(DEMO_MODEL)) --warmup 3 --iters 30 \
	  --json $(DEMO_OUT)/bench.json --roofline $(DEMO_OUT)/roofline.svg
	@echo "optimized model: $(DEMO_OUT)/$(notdir $(DEMO_MODEL)); fusions: $(DEMO_OUT)/report.json;" \
	  "bench: $(DEMO_OUT)/bench.json, $(DEMO_OUT)/roofline.svg"

unit-test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

py-test: deps build
	$(PYTEST)

# Each stage's output is also kept in $(TEST_LOGS). Every stage runs even when one before it
# failed, and the run closes with one line per stage and the totals (scripts/test_summary.sh),
# so a failing CI log still ends with the counts; the exit status is non-zero if any failed.
TEST_LOGS := $(BUILD)/test-logs
test: deps build wheel
	@rm -rf $(TEST_LOGS) && mkdir -p $(TEST_LOGS)
	@set -o pipefail; status=0; \
	(cd $(BUILD) && ctest --output-on-failure -j $(JOBS)) 2>&1 | tee $(TEST_LOGS)/ctest.txt || status=1; \
	$(PYTEST) 2>&1 | tee $(TEST_LOGS)/pytest.txt || status=1; \
	$(MAKE) --no-print-directory sanitize-test 2>&1 | tee $(TEST_LOGS)/sanitize.txt || status=1; \
	$(MAKE) --no-print-directory fuzz-smoke 2>&1 | tee $(TEST_LOGS)/fuzz.txt || status=1; \
	scripts/test_summary.sh $(TEST_LOGS) || status=1; \
	exit $$status

hardening-build: $(APT_STAMP)
	cmake -S . -B $(BUILD_HARDENING) $(HARDENING_CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD_HARDENING) -j $(JOBS) --target fusionopt_unit_tests fusionopt_c_api_test $(FUZZ_TARGETS)

# The unit tests and the fuzz regression corpus; the ONNX conformance driver is not built here.
# The hardening build makes the unit tests, the C API's test program (a C client of
# libfusionopt.so, so the library's boundary runs under the sanitizers too) and the fuzzers; the
# conformance driver runs in the main build's ctest.
sanitize-test: hardening-build
	cd $(BUILD_HARDENING) && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS) -E '^onnx_node_conformance$$'

fuzz-smoke: deps build hardening-build
	BUILD_HARDENING=$(BUILD_HARDENING) FUSIONOPT_BIN=$(BUILD)/fusionopt PYTHON=$(PYTHON) scripts/fuzz.sh smoke

clean:
	rm -rf $(BUILD) $(BUILD_HARDENING)

# The Python package as a wheel in $(BUILD)/dist (pyproject.toml, docs/python.md): scikit-build-core
# builds in $(BUILD) with the Makefile generator that folder was made with, after `make build` only
# linking and installing. Without pip's build isolation (the backend is in .venv): an isolated
# build configures from a new temporary folder each time, and every object file recompiled.
wheel: $(VENV_STAMP) build
	PATH="$(abspath $(VENV))/bin:$$PATH" CMAKE_GENERATOR="Unix Makefiles" $(PYTHON) -m pip wheel -q --no-build-isolation --no-deps -w $(BUILD)/dist .
	@ls $(BUILD)/dist/fusionopt-*.whl
