# Two commands on a fresh machine: `make run` and `make test`. Both create .venv and install what they need.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STORE_DIR ?= var/store
# `make run PROCFILE=Procfile.ha`: automatic failover: a name server with the embedded controller and two brokers in
# controller mode (stores $(STORE_DIR) and $(STORE_DIR)-slave, ports $(BROKER_PORT) and 10921) instead of one broker
PROCFILE ?= Procfile
NAMESRV_PORT ?= 9876
BROKER_PORT ?= 10911
PORT ?= 8000
WEB_PORT := $(PORT)
REDIS_PORT ?= 6379
REDIS_URL ?= redis://127.0.0.1:$(REDIS_PORT)/0
BROKER_CORE_NAMESRV ?= 127.0.0.1:$(NAMESRV_PORT)
# the console's controller (Procfile.ha embeds it in the name server); empty otherwise
BROKER_CORE_CONTROLLER ?= $(if $(filter Procfile.ha,$(PROCFILE)),127.0.0.1:$(NAMESRV_PORT),)
export STORE_DIR NAMESRV_PORT BROKER_PORT WEB_PORT BROKER_CORE_NAMESRV BROKER_CORE_CONTROLLER REDIS_PORT REDIS_URL

.PHONY: run test test-pure test-fast lint bench clean system-packages

# The PostgreSQL run leaves out the modules whose Celery worker subprocesses keep a SQLite file of their own (the
# tests read it with sqlite3): on PostgreSQL they would run the same SQLite code again
PG_IGNORE := $(foreach m,test_beat_and_jobs_page test_dlq_resend test_alerts_lag test_worker_process,\
	--ignore=tests/workers/$(m).py)

# A real RocketMQ client not written here, for tests/compat: the Apache C++ core bundled in PyPI's rocketmq 0.4.4,
# in its own virtualenv (its module name `rocketmq` must stay out of .venv)
CPP_CLIENT_VENV := .venv-rocketmq
CPP_CLIENT_STAMP := $(CPP_CLIENT_VENV)/.installed
# ... and the C++ 2.1 core (PyPI rocketmq-python-cvs 2.1.0.3) for tests/compat/test_cpp21_first_send.py
CPP21_CLIENT_VENV := .venv-rocketmq21
CPP21_CLIENT_STAMP := $(CPP21_CLIENT_VENV)/.installed
# ... and ali-ons, the Node.js RocketMQ 4.x client, pinned by tests/compat/node/package-lock.json
NODE_CLIENT_DIR := tests/compat/node
NODE_CLIENT_STAMP := $(NODE_CLIENT_DIR)/node_modules/.installed
# ... and rocketmq-client-nodejs, Apache's RocketMQ 5 Node.js client (gRPC), pinned by tests/compat/node5/package-lock.json
NODE5_CLIENT_DIR := tests/compat/node5
NODE5_CLIENT_STAMP := $(NODE5_CLIENT_DIR)/node_modules/.installed

$(STAMP): requirements.txt
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	@touch $(STAMP)

# The codec's C extension (broker_core/codec/_native_c/*.c and its header, one module), built in place with the
# machine's gcc and Python headers; BROKER_CORE_PURE_PYTHON=1 runs without it
EXT_SUFFIX := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))" 2>/dev/null)
NATIVE := broker_core/codec/_native$(EXT_SUFFIX)

NATIVE_SOURCES := $(wildcard broker_core/codec/_native_c/*.c broker_core/codec/_native_c/*.h)

$(NATIVE): $(NATIVE_SOURCES) setup.py $(STAMP)
	$(PY) setup.py -q build_ext --inplace
	@rm -rf build

$(CPP_CLIENT_STAMP):
	@test -x $(CPP_CLIENT_VENV)/bin/python || $(PYTHON) -m venv $(CPP_CLIENT_VENV)
	$(CPP_CLIENT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check rocketmq==0.4.4
	@touch $(CPP_CLIENT_STAMP)

$(CPP21_CLIENT_STAMP):
	@test -x $(CPP21_CLIENT_VENV)/bin/python || $(PYTHON) -m venv $(CPP21_CLIENT_VENV)
	$(CPP21_CLIENT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check rocketmq-python-cvs==2.1.0.3
	@touch $(CPP21_CLIENT_STAMP)

$(NODE_CLIENT_STAMP): $(NODE_CLIENT_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "need node and npm (Node 20) for tests/compat"; exit 1; }
	cd $(NODE_CLIENT_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(NODE_CLIENT_STAMP)

$(NODE5_CLIENT_STAMP): $(NODE5_CLIENT_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "need node and npm (Node 20) for tests/compat"; exit 1; }
	cd $(NODE5_CLIENT_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $(NODE5_CLIENT_STAMP)

run: $(STAMP) $(NATIVE) system-packages
	@mkdir -p $(STORE_DIR) $(STORE_DIR)-slave var/redis
	PYTHONPATH="$(CURDIR)" $(PY) manage.py ensure_secret_key
	PYTHONPATH="$(CURDIR)" $(PY) manage.py migrate --noinput
	PYTHONPATH="$(CURDIR)" $(PY) manage.py ensure_admin
	PYTHONPATH="$(CURDIR)" $(PY) manage.py install_schedules
	@echo "console + REST API on http://127.0.0.1:$(WEB_PORT)/api/v1/docs/ ; namesrv 127.0.0.1:$(NAMESRV_PORT);"
	@echo "broker 127.0.0.1:$(BROKER_PORT) (store $(STORE_DIR)), RocketMQ 5 gRPC 127.0.0.1:8081; Ctrl-C stops all"
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" PYTHONPATH="$(CURDIR)" $(VENV)/bin/honcho start -f $(PROCFILE)

# System packages from Debian: chromium for the browser tests (driven by Playwright; `playwright install`
# cannot download browsers here) and redis-server for Celery and the worker tests; openssl makes the gRPC TLS test's
# self-signed certificate.
system-packages:
	@missing=""; command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || \
		missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

test: $(STAMP) $(NATIVE) $(CPP_CLIENT_STAMP) $(CPP21_CLIENT_STAMP) $(NODE_CLIENT_STAMP) $(NODE5_CLIENT_STAMP) \
		system-packages lint
	$(VENV)/bin/pytest
	@echo "codec and store suites again on the pure-Python codec (BROKER_CORE_PURE_PYTHON=1):"
	BROKER_CORE_PURE_PYTHON=1 $(VENV)/bin/pytest -q -p no:cacheprovider tests/unit/codec tests/unit/store \
		tests/integration/test_crash.py tests/integration/test_rocketmq_store_dir.py
	@echo "console and worker suites again on PostgreSQL (tests/postgres.py: DATABASE_URL if postgres://, else a private"
	@echo "server from the machine's initdb, else 127.0.0.1:5432; skipped with the reason where none can be had):"
	$(PY) -m tests.postgres -- $(VENV)/bin/pytest -q -p no:cacheprovider tests/console tests/workers $(PG_IGNORE)

# The whole suite on the pure-Python codec (BROKER_CORE_PURE_PYTHON=1), about 15 minutes; `make test` runs only the
# codec and store suites that way, to stay well under half an hour
test-pure: $(STAMP) $(CPP_CLIENT_STAMP) $(CPP21_CLIENT_STAMP) $(NODE_CLIENT_STAMP) $(NODE5_CLIENT_STAMP) system-packages
	BROKER_CORE_PURE_PYTHON=1 $(VENV)/bin/pytest -q -p no:cacheprovider

# The fast loop: unit and architecture tests only, no broker processes, Redis, Spark or browser (seconds), on two
# workers (pytest-xdist)
test-fast: $(STAMP) $(NATIVE)
	$(VENV)/bin/pytest -m "not integration" -q -n 2

bench: $(STAMP) $(NATIVE)
	$(PY) -m pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	$(PY) -m bench.store
	$(PY) -m bench.broker
	$(PY) -m bench.push

clean:
	rm -rf $(VENV) $(CPP_CLIENT_VENV) $(CPP21_CLIENT_VENV) $(NATIVE) build $(NODE_CLIENT_DIR)/node_modules $(NODE5_CLIENT_DIR)/node_modules var .pytest_cache .ruff_cache .hypothesis
