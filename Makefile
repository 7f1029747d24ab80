# Two commands: `make run` serves the agent, `make test` runs the tests (all but the
# slow set: the real service in a subprocess, chaos); `make test-slow` runs the slow set.
# CI (.ci/run) runs both.
# `make mutation` (not part of `make test`) mutation-tests the observers' rules.
# Both create ./.venv on first use (Python 3.11+, no root, no API keys).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Parallel test processes: most tests wait on real time (audio paced as spoken, timers),
# so more workers than cores still pay off.
TEST_WORKERS ?= 4
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

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
	$(PYTEST) -m "not slow"

test-slow: $(VENV)/.installed
	$(PYTEST) -m slow

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
