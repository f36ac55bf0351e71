# karpenter-health: every CI step is one target. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo
BED := e2e/bed/bed.sh
BED_DIR ?= $(CURDIR)/e2e/.bed
export KH_BED_DIR := $(BED_DIR)
CRD_FILE := crds/karpenter-health.io_karpenterhealths.yaml
CHART_DIR := deploy/charts/karpenter-health
CRD_CHART_DIR := deploy/charts/karpenter-health-crd

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z][a-z-]*:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: deps
deps: ## install the Debian and PyPI packages the bed needs, build kube-apiserver (cached)
	@bash e2e/bed/install-deps.sh
	@bash e2e/bed/build-kube.sh >/dev/null

.PHONY: fmt
fmt: ## format the code
	$(CARGO) fmt --all

.PHONY: fmt-check
fmt-check: ## fail when the code is not formatted
	$(CARGO) fmt --all -- --check

.PHONY: lint
lint: ## clippy over every target, warnings denied
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

.PHONY: test-unit
test-unit: ## unit, property and adapter tests (no bed)
	$(CARGO) test --workspace --exclude karpenter-health-e2e --exclude karpenter-health-oracle --locked

# The differential suite: generated clusters judged by the engine and by Karpenter's own scheduler
# and AWS provider, built from the Go modules of every release in oracle/karpenter/releases
# (oracle/build.sh caches each build). ORACLE_CASES scenarios, each judged at every release.
ORACLE_CASES ?= 2000
.PHONY: oracle
oracle: ## the differential suite: ORACLE_CASES generated clusters per release, the engine against Karpenter's own scheduler (see oracle/)
	@bash e2e/bed/install-deps.sh >/dev/null
	@for r in $$(bash oracle/build.sh --list); do bash oracle/build.sh $$r >/dev/null || exit 1; done
	KH_ORACLE_CASES=$(ORACLE_CASES) $(CARGO) test --locked -p karpenter-health-oracle --test differential -- --nocapture --test-threads=1

.PHONY: oracle-soak
oracle-soak: ## the differential suite at 100,000 generated clusters per release, before a release (about 3 hours on 2 cores)
	@$(MAKE) --no-print-directory oracle ORACLE_CASES=100000 KH_ORACLE_SEED=$$(date +%s)

.PHONY: crds
crds: ## regenerate the KarpenterHealth CRD from the Rust types
	$(CARGO) run --quiet --locked -p karpenter-health -- crd > $(CRD_FILE)
	cp $(CRD_FILE) deploy/crds/
	cp $(CRD_FILE) $(CHART_DIR)/crds/
	cp $(CRD_FILE) $(CRD_CHART_DIR)/templates/

.PHONY: crds-check
crds-check: ## fail when the committed CRD drifts from the Rust types
	@$(CARGO) run --quiet --locked -p karpenter-health -- crd | diff -u $(CRD_FILE) - \
	  || { echo "CRD drift: run 'make crds' and commit $(CRD_FILE)"; exit 1; }
	@diff -u $(CRD_FILE) deploy/crds/$(notdir $(CRD_FILE)) \
	  || { echo "deploy/crds is stale: run 'make crds'"; exit 1; }
	@diff -u $(CRD_FILE) $(CHART_DIR)/crds/$(notdir $(CRD_FILE)) \
	  || { echo "$(CHART_DIR)/crds is stale: run 'make crds'"; exit 1; }
	@diff -u $(CRD_FILE) $(CRD_CHART_DIR)/templates/$(notdir $(CRD_FILE)) \
	  || { echo "$(CRD_CHART_DIR)/templates is stale: run 'make crds'"; exit 1; }

RBAC_FILE := deploy/rbac.yaml
.PHONY: rbac
rbac: ## regenerate deploy/rbac.yaml (the e2e tests' RBAC) from the chart's RBAC templates
	@bash e2e/bed/install-chart-tools.sh
	bash deploy/render-rbac.sh > $(RBAC_FILE)

.PHONY: rbac-check
rbac-check: ## fail when deploy/rbac.yaml drifts from the chart's RBAC templates
	@bash e2e/bed/install-chart-tools.sh
	@bash deploy/render-rbac.sh | diff -u $(RBAC_FILE) - \
	  || { echo "RBAC drift: run 'make rbac' and commit $(RBAC_FILE)"; exit 1; }

.PHONY: chart-test
chart-test: ## the Helm chart: lint, render, a real install on its own bed, alert unit tests, Prometheus + Alertmanager end to end
	@bash e2e/bed/install-chart-tools.sh
	@$(CARGO) build --quiet --locked -p karpenter-health
	@$(CARGO) build --quiet --locked -p karpenter-health-aws-gaps --bin aws-gap-proxy
	@bash deploy/charts/test.sh

CARGO_DENY_VERSION := 0.20.2
.PHONY: deny
deny: ## licenses, bans and sources of every dependency (installs cargo-deny from crates.io if missing)
	@cargo-deny --version 2>/dev/null | grep -q "$(CARGO_DENY_VERSION)" \
	  || $(CARGO) install cargo-deny --version $(CARGO_DENY_VERSION) --locked
	cargo-deny --log-level error check licenses bans sources

.PHONY: purity-check
purity-check: ## the check engine and the API crate pull in no runtime, client or AWS SDK
	@for crate in karpenter-health-checks karpenter-health-api; do \
	  bad=$$($(CARGO) tree --locked -p $$crate -e normal --prefix none | grep -E '^(tokio|kube-client|kube-runtime|aws-sdk-|aws-config|hyper) ' | sort -u); \
	  if [ -n "$$bad" ]; then echo "$$crate must stay pure but depends on: $$bad"; exit 1; fi; \
	done; echo "purity-check: api and checks depend on no runtime, client or AWS SDK"

.PHONY: e2e-up
e2e-up: ## start the local bed (etcd, kube-apiserver, controller-manager, moto)
	@bash $(BED) up $(BED_DIR)

.PHONY: e2e-down
e2e-down: ## stop the local bed
	@bash $(BED) down $(BED_DIR)

.PHONY: e2e
# AWS adapter tests share moto but isolate by region and name, so they run in parallel; operator
# tests share cluster singletons (aws-auth, the Karpenter Deployment), so they run one at a time.
# One test binary per bed (e2e/tests/<binary>/main.rs, a module per condition or concern): 38
# binaries took 214 s to build after a change to e2e/src, three take 46 s.
E2E_OPERATOR_TESTS := --test operator
E2E_AWS_TESTS := --test aws
# Verdict against behaviour: the real Karpenter controller, each release of LAB_RELEASES on a bed
# of its own whose Karpenter CRDs are the release's own, the releases side by side (e2e/lab.sh).
# Each of the two releases over two beds (reasons, the longest module, on one; the other lab
# modules on the other), so that the lab takes as long as its longest half.
LAB_RELEASES ?= v1.14.1/reasons v1.14.1/rest v1.8.6/reasons v1.8.6/rest
# Run after them, alone: beside the four beds above, v1.6.3's Karpenter twice left its
# EC2NodeClass without subnets for the whole test (four minutes), while it passes in 38 s alone.
LAB_ALONE ?= v1.6.3/classic_failures/before_1_7

.PHONY: e2e-list-check
e2e-list-check: ## fail when an e2e test file is in no binary `make e2e` runs (a module main.rs does not declare is never compiled)
	@for f in e2e/tests/*; do case "$$f" in e2e/tests/operator|e2e/tests/aws|e2e/tests/lab) ;; \
	  *) echo "$$f: e2e tests live in e2e/tests/operator, aws or lab (the binaries make e2e runs)"; exit 1;; esac; done
	@for f in e2e/tests/*/*.rs; do m=$$(basename $$f .rs); [ $$m = main ] && continue; \
	  grep -qx "mod $$m;" $$(dirname $$f)/main.rs \
	  || { echo "$$f is never compiled: declare it in $$(dirname $$f)/main.rs (mod $$m;)"; exit 1; }; done
e2e: ## end-to-end tests on a fresh bed, then the lab's (the real Karpenter of each of LAB_RELEASES, side by side) on beds of their own; each bed is stopped afterwards whatever happens
	@bash $(BED) up $(BED_DIR)
	@$(CARGO) build --locked -p karpenter-health && $(CARGO) test --locked -p karpenter-health-e2e --no-run --quiet
	@# One after the other: beside the lab (three beds), the operator's caches were seen not to
	@# sync within a minute on 2 cores, and single `check` runs to time out.
	@status=0; \
	  $(CARGO) test --locked -p karpenter-health-e2e --lib --bins $(E2E_AWS_TESTS) -- --test-threads=4 && \
	  $(CARGO) test --locked -p karpenter-health-e2e $(E2E_OPERATOR_TESTS) -- --test-threads=1 \
	  || status=$$?; \
	  bash $(BED) down $(BED_DIR); [ $$status -eq 0 ] || exit $$status
	@$(MAKE) --no-print-directory e2e-lab

.PHONY: e2e-lab
e2e-lab: ## verdict against behaviour: the real Karpenter of each of LAB_RELEASES (v1.14.1 v1.8.6) on a bed of its own, side by side
	@CARGO=$(CARGO) bash e2e/lab.sh $(LAB_RELEASES)
	@[ -z "$(LAB_ALONE)" ] || CARGO=$(CARGO) bash e2e/lab.sh $(LAB_ALONE)

# `make e2e-repeat N=20 TESTS="operator/leader_election operator/shutdown"`: chosen e2e tests N times in a row
# on a bed of their own, each failure reported with its round, tests and kept log (e2e/repeat.sh).
# TESTS defaults to the whole suite; FILTER keeps only test functions whose names contain it.
N ?= 5
TESTS ?= aws operator
FILTER ?=
.PHONY: e2e-repeat
e2e-repeat: ## run chosen e2e tests N times and report each failure: make e2e-repeat N=20 TESTS="operator/leader_election operator/shutdown"
	@KH_BED_DIR=$(CURDIR)/e2e/.bed-repeat KH_REPEAT_FILTER=$(FILTER) bash e2e/repeat.sh $(N) $(TESTS)

# Extra flags for `make bench` and `make bench-large`, after their own (the last of a flag wins),
# e.g. `make bench BENCH_FLAGS="--idle 60s --cold-starts 2"`. KH_BENCH_OPERATOR=<binary> runs a
# prebuilt operator instead of building this tree's (see e2e/bench.sh).
BENCH_FLAGS ?=
# Issue 13's large scale in about 30 minutes: a shorter idle, fewer cold starts, relists and edits.
BENCH_LARGE_FLAGS := --node-claims 50000 --node-classes 100 --node-pools 250 \
  --memory-steps 0,10000 --cold-starts 2 --relists 2 --idle 120s --edits 60 --watch-probes 50

.PHONY: bench
bench: ## the benchmark on its own bed: 10,000 NodeClaims, 50 NodePools, 20 EC2NodeClasses, storms (see docs/benchmarks.md)
	@bash e2e/bench.sh $(BENCH_FLAGS)

.PHONY: bench-large
bench-large: ## the benchmark at 50,000 NodeClaims, 250 NodePools, 100 EC2NodeClasses (about 30 min)
	@bash e2e/bench.sh $(BENCH_LARGE_FLAGS) $(BENCH_FLAGS)

.PHONY: image
image: ## the container image FROM scratch (podman, no daemon), reproducible; an oci-archive and its SBOM in the target dir's image/, the digest printed
	@bash e2e/bed/install-image-tools.sh
	shellcheck -x image/build.sh image/test.sh image/lib.sh e2e/bed/install-image-tools.sh
	@digest="$$(bash image/build.sh)" && echo "image: digest $$digest"

.PHONY: release
release: ## every release artifact in the target dir's dist/<version>/: image archive, SBOM, chart package, IAM policy, krew plugin and manifest, SHA256SUMS
	@bash e2e/bed/install-image-tools.sh
	@bash e2e/bed/install-chart-tools.sh
	@bash deploy/release.sh

.PHONY: release-test
release-test: ## make release, then verify every artifact (checksums, chart and krew versions, the plugin runs)
	@bash e2e/bed/install-image-tools.sh
	@bash e2e/bed/install-chart-tools.sh
	shellcheck -x deploy/release.sh deploy/release-test.sh deploy/argocd/test.sh
	@bash deploy/release-test.sh

.PHONY: terraform-test
terraform-test: ## the Terraform example's policy module, applied offline, makes the policy iam-policy prints
	@$(CARGO) build --quiet --locked -p karpenter-health
	@command -v shellcheck >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null; }
	shellcheck -x deploy/terraform/test.sh deploy/changelog-check.sh
	@bash deploy/terraform/test.sh

.PHONY: image-test
image-test: image ## the image on a bed of its own: digest twice, in-cluster config, probes, SIGTERM, Lease
	@bash e2e/bed/install-chart-tools.sh
	@$(CARGO) build --quiet --locked -p karpenter-health-aws-gaps --bin aws-gap-proxy
	@bash image/test.sh

.PHONY: test
TEST_STEPS := deps fmt-check lint test-unit oracle crds-check rbac-check e2e-list-check purity-check deny e2e demo-smoke chart-test terraform-test image-test release-test
test: ## everything CI runs, each step's time printed (make test: STEP took N s)
	@for step in $(TEST_STEPS); do started=$$(date +%s); \
	  $(MAKE) --no-print-directory $$step || { echo "make test: $$step FAILED after $$(( $$(date +%s) - started )) s"; exit 1; }; \
	  echo "make test: $$step took $$(( $$(date +%s) - started )) s"; done

DEMO_BED_DIR ?= $(CURDIR)/e2e/.bed-demo
.PHONY: demo
demo: deps ## start the demo's bed, seed broken Karpenter setups, run the operator, show kubectl get karpenterhealth; fails unless every verdict settles as expected
	@KH_DEMO_BED_DIR=$(DEMO_BED_DIR) bash e2e/demo.sh

.PHONY: demo-down
demo-down: ## stop the demo's bed (its Karpenter, operator and stand-in too)
	@bash $(BED) down $(DEMO_BED_DIR)

.PHONY: demo-smoke
demo-smoke: ## the demo on a bed of its own, its verdicts asserted, the bed stopped afterwards
	@status=0; KH_DEMO_BED_DIR=$(CURDIR)/e2e/.bed-demo-smoke bash e2e/demo.sh || status=$$?; \
	  bash $(BED) down $(CURDIR)/e2e/.bed-demo-smoke; exit $$status

.PHONY: generate
generate: crds ## regenerate what the vocabulary table makes: docs/checks.md, the chart's condition lists and alert tests, the CRD; and the IAM policy templates (a unit test fails when one drifts)
	$(CARGO) run --quiet --locked -p karpenter-health-checks --example generate
	$(CARGO) run --quiet --locked -p karpenter-health-aws --example generate_policies

FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZ_SECONDS (installs cargo-fuzz from crates.io if missing)
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@for t in aws_auth arn trust_policy lint_documents; do mkdir -p fuzz/corpus/$$t; \
	  RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run -s none $$t fuzz/corpus/$$t fuzz/seeds/$$t -- \
	  -max_total_time=$(FUZZ_SECONDS) -max_len=65536 || exit 1; done
