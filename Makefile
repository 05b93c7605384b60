# mq-ingest: set-up, the demo job, and the test suite. Each target installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
UV     := $(VENV)/bin/uv
INSTALL := $(UV) pip install -q --python $(PY)
# Python caches the modules it compiles (.pyc) under every target here, even where
# PYTHONDONTWRITEBYTECODE is set (this machine, CI): without the cache every process the suite
# starts compiled its imports again (the CLI tests ran 1.5-2x slower). Written on first import,
# only what is imported is compiled: compiling all of the venv's 10,863 modules at install
# (uv's --compile-bytecode) took 21 s of the set-up's critical path (43 s of CPU).
unexport PYTHONDONTWRITEBYTECODE
JAVA_MIN := 17
# The exact versions every target installs; pyproject.toml holds the ranges the code supports.
LOCK   := .ci/constraints.txt
# The docs site; --strict fails on a broken link or a missing page (never --quiet: it hides them).
DOCS_BUILD := NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --config-file .ci/mkdocs.yml

.PHONY: demo test check lint static static-checks rewritten-tests docs lock wheel mns-emulator smoke-lowest bench bench-quick bench-soak bench-tuning bench-crash bench-scale bench-cpu bench-claim-check bench-intake bench-workers bench-s3 bundle java venv dev s3a-jars rocketmq localstack postgres mariadb cds clean

## Run the main job on the embedded default (fake queue, local Spark).
demo: java venv cds
	$(PY) -m ingest.run --config conf/local.yaml

## Parallel pytest (pytest-xdist): each worker has its own SparkSession (~1 GB of JVM), ports and
## tmp dirs. Most tests wait (Spark triggers, long polls, visibility timeouts, JVM starts), so more
## workers than cores pay; memory bounds it (a worker and the CLI job it may run: ~2 GB). Fixtures
## that must not run twice (LocalStack, the standalone cluster, the wheel build) keep their module
## on one worker with an `xdist_group` mark (--dist loadgroup). Override: make test TEST_WORKERS=6;
## more pytest options: make test PYTEST_ARGS="--junitxml=junit.xml".
TEST_WORKERS  ?= 4
CHECK_WORKERS ?= 3
XDIST = --dist loadgroup -n

## Install dev dependencies and run the whole suite (the docs site is built too: a broken link fails).
## The set-up runs side by side (make -j4): the servers' packages and LocalStack's venv beside the
## project's install; after it the class archive (one JVM thread, the critical path), the static
## checks and pytest's rewritten test modules. 107 s on a clean checkout; each one's output is
## printed as it ends.
test: java
	@$(MAKE) --no-print-directory -j4 --output-sync=target TEST_SETUP=1 dev postgres mariadb localstack cds static-checks rewritten-tests
	$(VENV)/bin/pytest -q --durations=25 $(XDIST) $(TEST_WORKERS) $(PYTEST_ARGS) tests

lint: dev
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

## Lint, format, types and the docs site: what `test` and `check` run before pytest.
define STATIC_CHECKS
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(DOCS_BUILD)
endef
static: dev
	$(STATIC_CHECKS)

# The order of `test`'s parallel set-up (MariaDB after PostgreSQL: one package manager at a time).
ifdef TEST_SETUP
cds static-checks rewritten-tests: dev
localstack: $(UV)
mariadb: postgres
endif

# `static` without installing first (test has installed).
static-checks:
	$(STATIC_CHECKS)

# pytest caches the test modules it rewrites (assert messages) beside them; written before the
# xdist workers start, no worker rewrites them all (9.1 s of CPU for a worker's collection, 4.9 s
# from this cache).
rewritten-tests:
	@$(VENV)/bin/pytest -q --collect-only -p no:cacheprovider tests >/dev/null

## The fast check for every change: lint, types (mypy with the pydantic plugin), the docs site,
## then unit and contract tests (no Spark), about a minute and a half.
check: static
	$(VENV)/bin/pytest -q $(XDIST) $(CHECK_WORKERS) -m "not spark" tests/unit tests/contract

## The documentation site, docs/ -> site/ (MkDocs, Material theme). --strict: a broken link, a
## missing page or a page left out of the nav fails. `$(VENV)/bin/mkdocs serve` to browse it.
## After changing a config model: $(PY) -m ingest.config.reference --write docs (the option tables).
docs: dev
	$(DOCS_BUILD)

## Refresh the lock (.ci/constraints.txt) from what .venv holds, after changing a dependency.
lock:
	@{ sed -n '1,/^# Refresh/p' $(LOCK); \
	  $(PIP) freeze --exclude-editable | grep -v -i -e '^py-spy==' -e '^#' | LC_ALL=C sort -f; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

## The wheel (python -m build): the runtime packages only, no tests, benchmarks or emulators.
wheel: dev
	$(PY) -m build --wheel --outdir dist

## The lowest PySpark pyproject.toml admits (4.1.0), the rest as locked, in .venv-lowest: the demo
## and the kill -9 tests. Not part of `make test` (a second Spark download); run it before moving
## the lower bound. Last run: docs/operations/upgrades.md.
LOWEST_PYSPARK ?= 4.1.0
smoke-lowest: java
	test -x .venv-lowest/bin/python || $(PYTHON) -m venv .venv-lowest
	sed 's/^pyspark==.*/pyspark==$(LOWEST_PYSPARK)/' $(LOCK) > .venv-lowest/constraints.txt
	.venv-lowest/bin/pip install -q -c .venv-lowest/constraints.txt -e '.[dev]'
	rm -rf .venv-lowest/demo && mkdir -p .venv-lowest/demo/conf && cp conf/local.yaml .venv-lowest/demo/conf/
	cd .venv-lowest/demo && PYTHONPATH=$(CURDIR) ../bin/python -m ingest.run --config conf/local.yaml
	.venv-lowest/bin/pytest -q tests/chaos/test_kill9.py

## The MNS emulator (tests/emulators/mns.py: the MNS REST protocol on 127.0.0.1) for local work from
## a checkout; see docs/getting-started/mns.md.
MNS_PORT ?= 8791
mns-emulator: venv
	$(PY) -m tests.emulators.mns --port $(MNS_PORT) --access-key-id dev --access-key-secret devsecret --queue my-events-queue

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

## PostgreSQL's server and JDBC driver for the jdbc and spark sinks' tests (tests/support/postgres.py
## starts the server as a plain process on 127.0.0.1): Debian's packages, installed when missing.
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && test -f /usr/share/java/postgresql.jar; then \
	  echo "postgresql and its JDBC driver found"; else \
	  echo "installing PostgreSQL and its JDBC driver"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if command -v apt-get >/dev/null; then \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql libpostgresql-jdbc-java; \
	  else echo "install PostgreSQL (server binaries) and its JDBC driver, then re-run" >&2; exit 1; fi; \
	fi

## MariaDB's server and Connector/J for the jdbc sink's MariaDB tests (tests/support/mariadb.py
## starts mariadbd as a plain process on 127.0.0.1): Debian's packages, installed when missing.
mariadb:
	@if test -x /usr/sbin/mariadbd && test -f /usr/share/java/mariadb-java-client.jar; then \
	  echo "mariadb and its JDBC driver found"; else \
	  echo "installing MariaDB and its JDBC driver"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  if command -v apt-get >/dev/null; then \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq mariadb-server libmariadb-java; \
	  else echo "install MariaDB (mariadbd, mariadb-install-db) and MariaDB Connector/J, then re-run" >&2; exit 1; fi; \
	fi

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# uv installs the locked set into the venv: 68 s where pip took 113 s (the same packages, compared
# by pip freeze, both compiling every module then; see PYTHONDONTWRITEBYTECODE above). pip stays
# for users and `lock`.
$(UV): $(VENV)/bin/python
	$(PIP) install -q -c $(LOCK) uv

## uv builds PySpark (sdist only) into a new cache revision on every fresh install: 2.3 GB each,
## never reclaimed, until the disk filled mid-suite. Pruning what no install reaches takes 0.1 s.
venv: $(UV)
	$(INSTALL) -c $(LOCK) -e .
	$(MAKE) --no-print-directory rocketmq
	-@$(UV) cache prune -q

dev: $(UV)
	$(INSTALL) -c $(LOCK) -e '.[dev,docs]'
	$(MAKE) --no-print-directory rocketmq
	-@$(UV) cache prune -q
	-@$(MAKE) --no-print-directory s3a-jars

## Hadoop's S3A for s3a:// paths (ingest/runtime/s3a.py): hadoop-aws at PySpark's Hadoop version and the
## AWS SDK modules it needs (18 MB, not the SDK's 686 MB bundle), from Maven Central once into
## ~/.cache/mq-ingest/s3a/; a job takes them from there without a network. Needs Java; `make dev`
## goes on without them (a job with s3a:// paths then fetches them at start, `check` warns).
s3a-jars:
	@$(PY) -m ingest.runtime.s3a

## Both RocketMQ clients own the top-level `rocketmq` package: 4.x (native) first, then 5.x (gRPC).
rocketmq: $(UV)
	@$(PY) -c "import rocketmq.client, rocketmq.v5.producer" 2>/dev/null || { \
	  $(INSTALL) --reinstall --no-deps 'rocketmq-client-python==0.5.0rc2' && \
	  $(INSTALL) -c $(LOCK) -e '.[rocketmq4]' && $(INSTALL) -c $(LOCK) -e '.[rocketmq5]'; }

## The driver JVM's class archive (ingest/tools/cds.py): built once per Spark and Java, ~4 s off every
## session start. A speed-up only: if it cannot be built, jobs start as they would without it.
cds: java
	@test -x $(PY) || $(MAKE) --no-print-directory venv
	-$(PY) -m ingest.cds

## LocalStack (SQS only) for tests/integration/test_sqs_localstack.py: its own Python 3.13 venv;
## the tests start it as a plain process (no Docker). Without Python 3.13: a notice, exit 0, tests skipped.
## Installed with the project venv's uv where there is one (13 s of wall against pip's 38, the same set).
LOCALSTACK_VENV     ?= .venv-localstack
LOCALSTACK_VERSION  := 2026.3.0
LOCALSTACK_PINS     := 'localstack-core[base-runtime]==$(LOCALSTACK_VERSION)' 'cbor2==5.6.5' 'pyopenssl==24.2.1'
PY313_CANDIDATES    ?= python3.13 $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.13*/bin/python

localstack:
	@if $(LOCALSTACK_VENV)/bin/python -c "import sys, importlib.metadata as m; \
	    sys.exit(m.version('localstack-core') != '$(LOCALSTACK_VERSION)')" 2>/dev/null; then \
	  echo "localstack-core $(LOCALSTACK_VERSION) found in $(LOCALSTACK_VENV)"; exit 0; fi; \
	py=""; for c in $(PY313_CANDIDATES); do \
	  if "$$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then py=$$c; break; fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "SKIP localstack: no Python 3.13 (python3.13 on PATH or ~/.pyenv/versions/3.13*);" \
	       "tests/integration/test_sqs_localstack.py will be skipped"; exit 0; fi; \
	echo "building $(LOCALSTACK_VENV) with $$py: $(LOCALSTACK_PINS)"; \
	rm -rf $(LOCALSTACK_VENV) && "$$py" -m venv $(LOCALSTACK_VENV) && \
	if test -x $(UV); then $(UV) pip install -q --python $(LOCALSTACK_VENV)/bin/python $(LOCALSTACK_PINS); \
	else $(LOCALSTACK_VENV)/bin/pip install -q --disable-pip-version-check $(LOCALSTACK_PINS); fi

## Build the spark-submit bundle (dist/mq-ingest-env.tar.gz + dist/mq_ingest.zip) and print the command.
bundle: dev
	$(PY) -m ingest.tools.bundle --out dist

bench-scale: java dev
	$(PY) bench/scale.py

## The fake-queue benchmark set (raw loop, drain, Spark floor, 1M continuous, latency): ~5 minutes.
## Each run's peak RSS (Python driver, JVM, Python workers) against its budget; MEMORY OVER BUDGET names one over it.
bench: java dev
	$(PY) bench/e2e_fake.py

bench-quick: java dev
	$(PY) bench/e2e_fake.py --quick

## A continuous fake-queue job of 10M messages or 30 minutes: RSS at every 10%; exits 1 if it grows
## over 10% from the second tenth to the last. Smoke run: $(PY) bench/soak.py --messages 50000 --minutes 1
bench-soak: java dev
	$(PY) bench/soak.py

## One knob at a time (receivers, roll size, trigger, files per trigger, in-flight window).
bench-tuning: java dev
	$(PY) bench/tuning.py

## The driver's CPU per message in steady state, by thread (JVM executors, JIT, Python receivers…): ~2 minutes.
bench-cpu: java dev
	$(PY) bench/cpu_split.py

## A continuous job killed at 20 random moments, then a drain, against a clean drain: ~5 minutes.
bench-crash: java dev
	$(PY) bench/crash_amplification.py

## 1 MiB claim-check payloads (S3 pointers, Extended Client format) through SQS → Spark → SQS on
## moto, against a raw S3 get+put loop: ~1 minute.
bench-claim-check: java dev
	$(PY) bench/claim_check.py

## Real-queue intake, the client side: boto3 and aliyun-mns-sdk against endless SQS and MNS endpoints
## (bench/endless_*.js, Node), with no added latency and 20 ms a call; raw loop, pipeline, 1 -> 2 cores.
## Needs node; ~10 minutes (`$(PY) bench/intake.py --quick` for a smoke run).
bench-intake: java dev
	$(PY) bench/intake.py

## Intake workers (intake.mode: workers) against embedded mode on the endless SQS endpoint: the raw
## loops, the job embedded, then with 1, 2 and 3 `mq-ingest intake` processes; msgs/s, CPU a message
## of every process, cores, peak RSS, phases. Needs node; 400,000 messages a run, roughly 10 minutes
## (`$(PY) bench/intake_workers.py --quick --messages 3000` for a smoke run).
bench-workers: java dev
	$(PY) bench/intake_workers.py --workers 1,2,3

## Staging on a local directory and on S3 (moto's server on 127.0.0.1), back to back: msgs/s, CPU a
## message, requests a batch, peak RSS against its budget.
bench-s3: java dev
	$(PY) bench/staging_s3.py

clean:
	rm -rf data spark-warehouse site
