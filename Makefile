# Every target builds its own environment from the project's pinned files:
# .venv from requirements*.txt (+ this package, editable), node_modules from package-lock.json.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PY_STAMP := $(VENV)/.installed
NODE_STAMP := node_modules/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/node_modules/.bin:$(PATH)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup postgres chromium test proof record-times docs docs-serve synth wheel demo soak demo-aws bench capacity report-screenshot clean

setup: $(PY_STAMP) $(NODE_STAMP)

$(PY_STAMP): requirements.txt requirements-dev.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# PostgreSQL's binaries for the SQL adapter's tests (tests/postgres_server.py starts a throwaway server from them):
# a no-op when /usr/lib/postgresql/*/bin/initdb exists, else Debian's postgresql package (apt-get, as root).
postgres:
	bash scripts/ensure-postgresql.sh

# Debian's Chromium for the docs site's browser tests (tests/unit/test_site.py, Playwright): a no-op when
# /usr/bin/chromium exists, else Debian's chromium package (apt-get, as root).
chromium:
	bash scripts/ensure-chromium.sh

# Lint and format check first (ruff, config in pyproject's [tool.ruff]), then mypy, strict over the three packages
# (the constructs and the runtime ship py.typed; config: pyproject's [tool.mypy]), then the docs site, then the
# tests: unit, runtime, the tooling's, and one end-to-end chaos run of the orders example, on both cores (pytest-xdist,
# one test file per worker, so a module's synth fixtures run once). Budget: 10 minutes on 2 cores from a fresh clone,
# set-up included. The long runs are `make proof`'s (tests marked `proof`).
test: setup postgres chromium
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(MKDOCS_BUILD)
	$(PY) -m pytest -m "not proof" -n 2 --dist loadfile --record-time "make test"

# The long runs (tests marked `proof`): `make demo`'s entry point and its unsafe control, the real-account commands
# against a local AWS, Ctrl-C, the walk-through of a user's own app, the gallery, the effects and asynchronous proofs.
# They mostly wait (visibility timeouts, redrive rounds), so three workers share the 2 cores (pytest-xdist,
# --dist loadgroup: a work unit is one test file, or one gallery variant, tests/e2e/conftest.py), each with its own
# local AWS and run folders; the 15 slowest tests are printed. Budget: 12 minutes on 2 cores (recorded runs in
# docs/tests.md; benchmarks/proof_time.py times each file alone). .ci/run runs `make test` then `make proof`:
# together at most 20 minutes. pytest exits 5 when no test is selected: that fails, as it should.
# Both suites record their time when they pass (--record-time; the walk-through records its runs as they pass) into
# .local-aws/times.json, git-ignored: neither suite writes a tracked file, passed or failed, so a clone stays clean
# after its tests (tests/unit/test_times_page.py). `make record-times` commits them on purpose.
proof: setup
	$(PY) -m pytest -m proof -n 3 --dist loadgroup --durations=15 --record-time "make proof"

# The times the suites recorded (.local-aws/times.json) moved into benchmarks/times.json (committed; the latest 10
# runs of each measure), then the pages' recorded times re-rendered from it (docs/tests.md, docs/walkthrough.md;
# benchmarks/times.py): run it after a suite whose time the pages should state, then commit the three files.
record-times: setup
	$(PY) benchmarks/times.py --take

# The docs site (mkdocs.yml: mkdocs-material, API pages from the docstrings with mkdocstrings) into site/, offline.
# --strict: any warning fails, and mkdocs.yml's `validation` makes broken links and anchors and pages missing from
# the nav warnings. NO_MKDOCS_2_WARNING silences mkdocs-material's end-of-life banner (not a warning). No --quiet:
# it drops the warnings before --strict counts them, and a broken link then builds with exit code 0.
MKDOCS_BUILD = NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d site
docs: setup
	$(MKDOCS_BUILD)

# The site as a reader sees it, at http://127.0.0.1:8000/ (rebuilt on each change; Ctrl-C stops it). Search needs
# the site served over http: opened from disk (file://), the browser refuses its worker and search stays on
# "Initializing search".
docs-serve: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve -a 127.0.0.1:8000

# The package is not on PyPI yet: this builds its wheel into dist/ (hatchling, no isolation, offline; the wheels of
# earlier builds removed first, so dist/ holds one) and prints the one line that installs it with the local tooling,
# the line docs/walkthrough.md and docs/embedding.md give (EO: this checkout's folder).
wheel: setup
	rm -f dist/effectively_once-*.whl
	$(PY) -m build --wheel --no-isolation --outdir dist . > /dev/null
	@echo "install it, with the local tooling, into your app's venv:"
	@echo "  pip install \"$$(ls "$(CURDIR)"/dist/effectively_once-*.whl)[local]\""

# Offline: no credentials or region needed (the stack is environment-agnostic without CDK_DEFAULT_*).
synth: setup
	cdk synth PaymentsSandbox --quiet

# The main job: deploy PaymentsSandbox to a local AWS (moto, loopback only) and push 1,000 payments through it
# with duplicates and crashes; report in reports/demo-report.json. DEMO_ARGS="--unsafe" runs the control.
demo: setup
	$(PY) -m effectively_once_local demo $(DEMO_ARGS)

# The soak (issue 15; not part of `make test`, about 10 to 30 minutes on 2 cores depending on the load): the main
# job on 10,000 generated payments over 200 accounts, 4 pollers per queue, the demo's chaos with 30 % resends and
# 10 % kills after the charge, a 2 s function timeout, a 3,000 s drain timeout. Report in reports/soak-report.json
# (the demo's keys, with payments per second and peak memory in its "run" block); the run's logs in .local-aws/soak.
# Then, whatever the demo's exit code, benchmarks/soak_page.py adds the run to benchmarks/soak-runs.json (committed;
# SOAK_NOTE="..." says what changed) and re-renders the soak table of docs/demo.md from it; the wall clock counts
# from make's start (SOAK_STARTED), set-up included. SOAK_LOAD=N (default 0) runs the demo beside N busy spinners at
# nice 0 (benchmarks/spinners.py: pure CPU, stopped when the demo ends, on Ctrl-C too) to reproduce a loaded machine
# cheaply; the run records N. The recipe exits with the demo's code (1 if only the page failed; 2 for a SOAK_LOAD that
# is not a non-negative integer).
SOAK_PAYMENTS := .local-aws/soak-payments.jsonl
SOAK_LOAD ?= 0
SOAK_STARTED := $(shell date +%s)
soak: setup
	$(PY) -m effectively_once_local sample --count 10000 --accounts 200 --out $(SOAK_PAYMENTS)
	$(PY) benchmarks/spinners.py --count=$(SOAK_LOAD) -- \
		$(PY) -m effectively_once_local demo --payments $(SOAK_PAYMENTS) --concurrency 4 --resend 0.3 \
		--crash-after-charge 0.1 --function-timeout 2 --drain-timeout 3000 \
		--run-dir .local-aws/soak --report reports/soak-report.json $(SOAK_ARGS); code=$$?; \
	$(PY) benchmarks/soak_page.py --report reports/soak-report.json --run-dir .local-aws/soak \
		--started $(SOAK_STARTED) --load=$(SOAK_LOAD) --note "$${SOAK_NOTE:-}" || [ $$code -ne 0 ] || code=1; \
	exit $$code

# A screenshot of the last demo's HTML page (reports/demo-report.png) in headless Chromium: Debian's package, installed
# by the script when missing (needs root). PAGE=... OUT=... for another page (a chaos run's).
report-screenshot:
	scripts/screenshot.sh $(or $(PAGE),reports/demo-report.html) $(OUT)

# The same payments against a real AWS account (docs/sandbox-account.md: credentials, region,
# `cdk bootstrap` once): deploys the sandbox, sends the payments, waits for the queues to drain and reports from the
# ledgers and DLQs. tests/e2e/test_demo_aws.py runs these produce and report lines against the local AWS.
demo-aws: setup
	cdk deploy PaymentsSandbox --require-approval never
	$(PY) -m effectively_once_local produce --stack PaymentsSandbox
	$(PY) -m effectively_once_local report --stack PaymentsSandbox

# Benchmarks (issue 9; 5 to 6 minutes on 2 cores): synth time against a plain-L2 baseline, requests and cost per
# payment, the runtime's CPU time over a bare Powertools handler's (`benchmarks/run.py --only runtime-overhead`
# alone: under a minute; `--only synth` the synth rows alone), handler import time, asset size, unit-test time.
# Prints a table, writes reports/bench.json and the figures the docs show, benchmarks/measured.json (committed), then
# regenerates the pages from it as `make capacity` does.
bench: setup
	$(PY) benchmarks/run.py
	$(PY) benchmarks/capacity.py
	$(PY) benchmarks/pages.py

# From benchmarks/measured.json alone (no measuring): docs/capacity.md, and the generated sections of
# docs/benchmarks.md (the bench table) and docs/sandbox-account.md (what a demo-aws run costs).
# tests/unit/test_capacity.py and tests/unit/test_pages.py check they are current.
capacity: setup
	$(PY) benchmarks/capacity.py
	$(PY) benchmarks/pages.py

clean:
	rm -rf $(VENV) node_modules cdk.out reports .pytest_cache .mypy_cache dist site
