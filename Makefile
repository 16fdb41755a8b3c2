# TideMQ: `make run` and `make test` set up everything they need on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: install run test lint format bench clean openapi spark spark-package

$(INSTALLED): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	touch $(INSTALLED)

install: $(INSTALLED)

## run: the local platform on 127.0.0.1:8080 (embedded store under ./.tidemq), in the foreground; S3 (and DynamoDB)
## from an embedded moto server unless AWS_ENDPOINT_URL is set or TIDEMQ_LOCAL_AWS=off (AWS itself); webhooks may
## reach 127.0.0.1 (local demos) unless TIDEMQ_PUSH_ALLOWED_HOSTS says otherwise
run: $(INSTALLED)
	TIDEMQ_TIER=$${TIDEMQ_TIER:-s3} TIDEMQ_LOCAL_AWS=$${TIDEMQ_LOCAL_AWS:-moto} \
		TIDEMQ_PUSH_ALLOWED_HOSTS=$${TIDEMQ_PUSH_ALLOWED_HOSTS-127.0.0.1} $(PY) -m functions.local_gateway

## test: lint (ruff, the import-linter layering contracts), then the whole suite (unit, integration, end-to-end)
test: $(INSTALLED)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

## spark: run a Spark job on local[2]: make spark JOB=export ARGS="--bucket tidemq-tier --topic orders --output out"
## (without JOB: list the jobs); S3 and DynamoDB as AWS_ENDPOINT_URL says
spark: $(INSTALLED)
	$(PY) -m spark_emr $(if $(JOB),run $(JOB) $(ARGS),list)

## spark-package: what EMR Serverless runs, into SPARK_PACKAGE (default dist/spark): each job's entry point, a zip of
## the project code the jobs import, a Python environment archive of wheels fetched for EMR_PLATFORM (aarch64 or
## x86_64; default TIDEMQ_EMR_PLATFORM, else aarch64) and EMR_PYTHON (default TIDEMQ_EMR_PYTHON_VERSION, else 3.11),
## and manifest.json; `python -m spark_emr upload` then copies it to TIDEMQ_EMR_PACKAGE_URI
SPARK_PACKAGE ?= dist/spark
spark-package: $(INSTALLED)
	$(PY) -m spark_emr package --output $(SPARK_PACKAGE) $(if $(EMR_PLATFORM),--platform $(EMR_PLATFORM)) \
		$(if $(EMR_PYTHON),--python-version $(EMR_PYTHON))

## openapi: regenerate docs/openapi.json from the handlers
openapi: $(INSTALLED)
	$(PY) -m functions.openapi > docs/openapi.json

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .

format: $(INSTALLED)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## bench: the engine, metadata, HTTP, tier and Spark compaction benchmarks (JSON lines on stdout); bench/peers.sh
## runs the peers
bench: $(INSTALLED)
	$(PY) bench/engine.py
	$(PY) bench/topics.py
	$(PY) bench/http_api.py
	$(PY) bench/transport.py
	$(PY) bench/send_floor.py
	$(PY) bench/tier.py
	$(PY) bench/serverless.py
	$(PY) bench/spark_compaction.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache cdk.out
