# Two commands: `make run` serves the agent, `make test` runs the tests (all but the
# slow set: the real service in a subprocess, chaos); `make test-slow` runs the slow set.
# CI (.ci/run) runs both.
# `make mutation` (not part of `make test`) mutation-tests the observers' rules.
# Both create ./.venv on first use (Python 3.11+, no root, no API keys).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Parallel test processes. Most of `make test` waits on real time (audio paced as it is
# spoken, timers), so more workers than cores pay off; the slow set's services keep the
# cores busy, so it runs on fewer, a file per worker (its servers are per file or folder).
TEST_WORKERS ?= 4
SLOW_WORKERS ?= 2
# Byte-compiled once up front: each test worker, and each service and worker process the
# tests start, would otherwise compile the project again (PYTHONDONTWRITEBYTECODE).
COMPILE := $(PY) -m compileall -q -j 0 -x '/\.(venv|git|data)/|/mutants/' .

.PHONY: run test test-slow bench simulate mutation clean-data

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

run: $(VENV)/.installed
	$(PY) main.py serve

test: $(VENV)/.installed
	@$(COMPILE)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not slow"

test-slow: $(VENV)/.installed
	@$(COMPILE)
	$(PY) -m pytest -q -n $(SLOW_WORKERS) --dist loadfile -m slow

# Mutants of the quick rules, the guidance filter and the safety rules against their fast
# tests ([tool.mutmut] in pyproject.toml); prints the survivors and the kill rate per file.
mutation: $(VENV)/.installed
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children $${MUTATION_JOBS:-2} || true
	$(PY) -m bench.mutation_report

bench: $(VENV)/.installed
	$(PY) -m bench.run_all

simulate: $(VENV)/.installed
	$(PY) main.py simulate scenarios/voice_booking.yaml

clean-data:
	rm -rf .data
