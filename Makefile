# mq-ingest: set-up, the demo job, and the test suite. Each target installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
JAVA_MIN := 17

.PHONY: demo test lint bench java venv dev rocketmq clean

## Run the main job on the embedded default (fake queue, local Spark).
demo: java venv
	$(PY) -m ingest.run --config conf/local.yaml

## Install dev dependencies and run the whole suite.
test: java dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/pytest -q tests

lint: dev
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

## Java 17 or newer must be on PATH for Spark; install OpenJDK 17 from the OS packages if not.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1); \
	if [ -n "$$v" ] && [ "$$v" -ge $(JAVA_MIN) ]; then echo "java $$v found"; else \
	  echo "Java $(JAVA_MIN) not found; installing OpenJDK 17"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if command -v apt-get >/dev/null; then \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jre-headless; \
	  elif command -v dnf >/dev/null; then $$SUDO dnf install -y java-17-openjdk-headless; \
	  elif command -v brew >/dev/null; then brew install openjdk@17; \
	  else echo "install Java 17 and re-run" >&2; exit 1; fi; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(VENV)/bin/python
	$(PIP) install -q -e .
	$(MAKE) --no-print-directory rocketmq

dev: $(VENV)/bin/python
	$(PIP) install -q -e '.[dev]'
	$(MAKE) --no-print-directory rocketmq

## Both RocketMQ clients own the top-level `rocketmq` package: 4.x (native) first, then 5.x (gRPC).
rocketmq: $(VENV)/bin/python
	@$(PY) -c "import rocketmq.client, rocketmq.v5.producer" 2>/dev/null || { \
	  $(PIP) install -q --force-reinstall --no-deps 'rocketmq-client-python==0.5.0rc2' && \
	  $(PIP) install -q -e '.[rocketmq4]' && $(PIP) install -q -e '.[rocketmq5]'; }

bench: java dev
	$(PY) bench/e2e_fake.py

clean:
	rm -rf data spark-warehouse
