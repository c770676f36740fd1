# make demo: a profiled 2-rank training run of resnet18 with its report.
# make test: lint, format check and the whole test suite.
# make gpu-check: the GPU and many-core checks on a lent machine (docs/gpu.md).
# make bench: every benchmark in a row (30-45 min, not CI), written to docs/benchmarks.md.
#   BENCH_ARGS=--quick: the quick tier (the fault matrix's quick cases and one figure of each
#   kind, ~15 min on 2 cores), written to docs/benchmarks-quick.md.
# make faultbench: the fault matrix (benchmarks/faultbench), scored in docs/accuracy.md
#   (3 pairs a case: ~50 min a seed on 2 cores);
#   FAULTBENCH_ARGS="--quick --traceml" also runs each case under TraceML, in its own venv;
#   FAULTBENCH_ARGS=--held-out: the held-out seeds, once, thresholds frozen (docs/accuracy-heldout.md);
#   "--held-out --held-out-seed 4902": that seed alone, once (docs/accuracy-heldout-4902.md).
#   "--cores-per-rank 4": each rank on 4 cores of its own (a machine with 12 or more; docs/gpu.md).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_TORCH := torch==2.14.1 torchvision==0.29.1

.PHONY: demo test lint format clean sysdeps gpu-check bench faultbench native

# pandas (the notebook extra) goes beside the venv, not in it: where pandas is importable, pyarrow
# imports it in every process that converts an array (each rank, the launcher: +0.65 s of CPU
# each), so only the tests of the extra put .venv/notebook on their path.
# uv installs what pip would, from the indexes and constraints pip is configured with (uv
# reads no pip.conf), in a minute where pip takes three (it unpacks torch's 5.5 GB in
# parallel and compiles the bytecode on both cores); where uv cannot be had, pip does it.
NOTEBOOK := 'pandas>=2.0' python-dateutil six tzdata
# DeepSpeed (an optional test dependency: tests/e2e/test_deepspeed_run.py) also goes beside the
# venv, without its dependencies (it would pull a second torch): its small ones that the venv
# lacks are listed by hand. Its only release is an sdist, built without its C++ ops
# (DS_BUILD_OPS=0): ~25 s from a cold cache with pip. Where it does not install, its tests
# skip with the reason.
DEEPSPEED := deepspeed==0.19.8 hjson py-cpuinfo einops msgpack nvidia-ml-py
DS_SKIPS := DeepSpeed did not install: its tests skip
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	if $(PY) -m pip install --quiet uv; then \
		uv="$(VENV)/bin/uv pip install --quiet --python $(PY) --compile-bytecode \
			--index-strategy unsafe-best-match $$($(PY) .ci/pip_sources.py)"; \
		$$uv $(DEV_TORCH) -e '.[dev]' && \
		$$uv --no-deps --target $(VENV)/notebook $(NOTEBOOK) && \
		{ DS_BUILD_OPS=0 $$uv --no-deps --no-build-isolation --target $(VENV)/deepspeed \
			$(DEEPSPEED) || echo "$(DS_SKIPS)"; }; \
	else \
		$(PY) -m pip install --quiet $(DEV_TORCH) && \
		$(PY) -m pip install --quiet -e '.[dev]' && \
		$(PY) -m pip install --quiet --no-deps --upgrade --target $(VENV)/notebook $(NOTEBOOK) && \
		{ DS_BUILD_OPS=0 $(PY) -m pip install --quiet --no-deps --no-build-isolation --upgrade \
			--target $(VENV)/deepspeed $(DEEPSPEED) || echo "$(DS_SKIPS)"; }; \
	fi
	touch $(STAMP)

# The probe's C++ collective hooks, compiled once per torch (about a minute; without a
# compiler the probe keeps its Python hooks).
native: $(STAMP)
	-$(PY) -m scalescope.probe.native

demo: $(STAMP) native
	$(VENV)/bin/scalescope bench resnet18 -n 2 --batch-size 16 --image-size 128 \
		--steps 40 --warmup-steps 5 --html scalescope_runs/demo-dashboard.html

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

format: $(STAMP)
	$(VENV)/bin/ruff format src tests benchmarks
	$(VENV)/bin/ruff check --fix src tests benchmarks

# Debian packages the tests use (mpirun, ip netns and tc, headless chromium, tmux);
# installed with apt-get when missing.
sysdeps:
	@missing=""; \
	command -v mpirun >/dev/null || missing="$$missing openmpi-bin"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v tmux >/dev/null || missing="$$missing tmux"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Three at a time: many tests wait on ranks that sleep, hang or are killed, so three workers
# keep 2 cpus busy. Nothing here compares a time measured on this machine with a truth: that
# is make bench's (benchmarks/accuracy), so the suite may share the cpus (docs/testing.md).
# The Debian packages install while pip does; the sources are compiled once beforehand
# (where PYTHONDONTWRITEBYTECODE is set, every rank would compile what it imports). Tests
# marked heavy (live runs too heavy for CI's 12 minutes) run in make bench. Whole files go to
# the workers dearest first (tests/helpers/file_costs.py), not xdist's most-tests-first.
test:
	@echo "[$$(date +%T)] make test: install, lint, system packages, C++ hooks"
	$(MAKE) -j3 lint sysdeps native
	$(PY) -m compileall -q src tests/helpers
	@echo "[$$(date +%T)] make test: the suite"
	$(VENV)/bin/pytest -q -n 3 --dist loadfile --no-loadscope-reorder -m "not heavy" --durations=15

# Sets itself up (uses .venv, creates it when missing: over a preinstalled torch, or with
# the recipe above), so it starts from any python3. GPU_CHECK_ARGS: e.g. --cpu-smoke.
gpu-check:
	python3 benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

bench: $(STAMP) native
	$(PY) benchmarks/run_all.py $(BENCH_ARGS)

# FAULTBENCH_ARGS: e.g. --quick, --pairs 3, --seed 7 (tuning), --held-out (scored once).
faultbench: $(STAMP) native
	$(PY) benchmarks/faultbench/run.py $(FAULTBENCH_ARGS)

clean:
	rm -rf $(VENV) scalescope_runs .pytest_cache .ruff_cache
