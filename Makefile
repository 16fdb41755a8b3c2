# TideMQ: `make run` and `make test` set up everything they need on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed

.PHONY: chromium protos install run test test-long test-localstack localstack mutation lint format bench clean openapi spark spark-package synth deploy destroy first-user

## install: one .venv with everything a developer needs: the client (shared/tidemq, its own distribution) and the
## server (this directory's pyproject.toml), both editable, with the dev, Spark and CDK extras
$(INSTALLED): pyproject.toml shared/tidemq/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e './shared/tidemq[s3,httpx]' -e '.[dev,spark,infra]'
	touch $(INSTALLED)

install: $(INSTALLED)

## run: the local platform on 127.0.0.1:8080 (embedded store under ./.tidemq), in the foreground; S3 (and DynamoDB)
## from an embedded moto server, or with TIDEMQ_LOCAL_AWS=localstack a LocalStack it installs on first use and starts,
## unless AWS_ENDPOINT_URL is set or TIDEMQ_LOCAL_AWS=off (AWS itself); webhooks may reach 127.0.0.1 (local demos)
## unless TIDEMQ_PUSH_ALLOWED_HOSTS says otherwise
run: $(INSTALLED)
	@if [ "$${TIDEMQ_LOCAL_AWS:-moto}" = localstack ] && [ -z "$${AWS_ENDPOINT_URL:-}" ]; then \
		$(PY) -m devtools.localstack install; fi
	TIDEMQ_TIER=$${TIDEMQ_TIER:-s3} TIDEMQ_LOCAL_AWS=$${TIDEMQ_LOCAL_AWS:-moto} \
		TIDEMQ_PUSH_ALLOWED_HOSTS=$${TIDEMQ_PUSH_ALLOWED_HOSTS-127.0.0.1} $(PY) -m servers.gateway

## chromium: the browser the console's tests drive (Playwright with executable_path; never `playwright install`):
## Debian's chromium package, installed when missing (as root, else with sudo)
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
$(CHROMIUM):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium || \
		($(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

chromium: $(CHROMIUM)

## test: lint (ruff, the import-linter layering contracts), then the whole suite (unit, integration, end-to-end,
## Spark) on TEST_WORKERS pytest-xdist workers (default 2: one a core here; tests/conftest.py says how work is split)
TEST_WORKERS ?= 2
test: $(INSTALLED) $(CHROMIUM)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=15 -m "not long"

## test-long: the longest crash and scale tests (marked `long`: minutes each), which make test leaves out; CI runs both.
## The long fault runs go first, on their own: each checks that throughput comes back after every fault, which a
## neighbour test loading the same two cores would blur
FAULT_RUNS := tests/e2e/test_faults.py
test-long: $(INSTALLED)
	$(PY) -m pytest -n $(TEST_WORKERS) --durations=5 -m long $(FAULT_RUNS)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=5 -m long --ignore=$(FAULT_RUNS)

## test-localstack: the tests that use S3 or DynamoDB (tier, serverless backend, push, maintenance, Spark jobs), on
## LocalStack instead of moto; installs LocalStack on first use (into .venv-localstack and .localstack: ~2 min)
test-localstack: $(INSTALLED) localstack
	TIDEMQ_LOCAL_AWS=localstack $(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder

## mutation: mutation testing of the record module (devtools/mutation.py: its survivors, and those known to be
## equivalent in devtools/record_mutants.toml); about half an hour on two cores, so make test leaves it out
mutation: $(INSTALLED)
	$(PY) -m devtools.mutation

## localstack: install LocalStack for TIDEMQ_LOCAL_AWS=localstack (make run and make test-localstack do it themselves)
localstack: $(INSTALLED)
	$(PY) -m devtools.localstack install

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

## The CDK CLI (aws-cdk@2 from npm: 3.x rejects aws-cdk-lib v2), installed under build/ (ignored by git)
CDK_CLI := build/cdk-cli/node_modules/.bin/cdk
CDK := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 $(CDK_CLI) --no-notices

$(CDK_CLI):
	npm install --prefix build/cdk-cli --no-audit --no-fund --loglevel=error aws-cdk@2

## synth: the CDK app (infra_cdk/) into cdk.out/, the cdk-nag checks included; offline, no AWS credentials needed
## (CDK_ARGS="-c key=value ...": docs/deploy.md lists the settings)
synth: $(INSTALLED) $(CDK_CLI)
	AWS_EC2_METADATA_DISABLED=true $(CDK) synth --quiet $(CDK_ARGS)

## deploy, destroy: the stack in the account and region of the AWS profile (docs/deploy.md: what it costs at rest and
## per million messages); destroy keeps the data unless the stack was deployed with CDK_ARGS="-c retain_data=false"
deploy: $(INSTALLED) $(CDK_CLI)
	$(CDK) bootstrap $(CDK_ARGS)
	$(CDK) deploy $(CDK_ARGS)

## first-user: the deployed stack's first super user, into ~/.tidemq/credentials (once; docs/deploy.md)
first-user: $(INSTALLED)
	$(VENV)/bin/python -m infra_cdk.first_user $(FIRST_USER_ARGS)

destroy: $(INSTALLED) $(CDK_CLI)
	$(CDK) destroy --force $(CDK_ARGS)

## protos: regenerate the gRPC proxy's protobuf modules from RocketMQ's vendored .proto files
## (servers/grpc_proxy/protocol; a unit test checks the committed ones are what this gives)
protos: $(INSTALLED)
	$(PY) -m devtools.rocketmq_protos

## openapi: regenerate docs/openapi.json from the handlers
openapi: $(INSTALLED)
	$(PY) -m functions.openapi > docs/openapi.json

lint: $(INSTALLED)
	$(VENV)/bin/ruff check .

format: $(INSTALLED)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## bench: the engine, metadata, HTTP, gRPC, tier and Spark compaction benchmarks and the client's start-up time
## (JSON lines on stdout); bench/peers.sh runs the peers
bench: $(INSTALLED)
	$(PY) bench/engine.py
	$(PY) bench/topics.py
	$(PY) bench/http_api.py
	$(PY) bench/pop.py
	$(PY) bench/transport.py
	$(PY) bench/send_floor.py
	$(PY) bench/grpc.py
	$(PY) bench/tier.py
	$(PY) bench/serverless.py
	$(PY) bench/spark_compaction.py
	$(PY) bench/client_import.py

clean:
	rm -rf $(VENV) .venv-localstack .localstack .pytest_cache .ruff_cache cdk.out build/infra_cdk build/cdk-cli
