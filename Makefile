# Run `make` or `make help` to list targets.
# Override PKG to scope most targets, e.g. `make test PKG=./flow/...`.

GO          ?= go
PKG         ?= ./...
TESTFLAGS   ?=
FUZZTIME    ?= 30s
BENCH       ?= .
COVERPROFILE ?= coverage.out

.DEFAULT_GOAL := help

.PHONY: help test test-race lint fmt-check vet bench fuzz cover generate tidy

help: ## Show this help
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

test: ## Run tests (go test; PKG=./flow/... to scope)
	$(GO) test $(TESTFLAGS) $(PKG)

test-race: ## Run tests with the race detector
	$(GO) test -race $(TESTFLAGS) $(PKG)

lint: fmt-check vet ## gofmt check, go vet, then golangci-lint (.ci/lint; includes staticcheck)
	./.ci/lint $(PKG)

fmt-check: ## Fail listing any files not formatted with gofmt
	@out="$$(find . -type f -name '*.go' -not -path './.git/*' -not -path './vendor/*' \
		-not -path '*/testdata/*' -exec gofmt -l {} +)"; \
	if [ -n "$$out" ]; then echo "gofmt: unformatted files (run gofmt -w):"; echo "$$out"; exit 1; fi

vet: ## Run go vet
	$(GO) vet $(PKG)

bench: ## Run benchmarks (BENCH=regexp to filter)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem $(TESTFLAGS) $(PKG)

fuzz: ## Run every Fuzz target for FUZZTIME (default 30s) each
	@set -e; for pkg in $$($(GO) list $(PKG)); do \
		list="$$($(GO) test -list '^Fuzz' $$pkg)" || exit 1; \
		for fn in $$(echo "$$list" | grep '^Fuzz'); do \
			echo "==> $$pkg $$fn ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

cover: ## Write coverage profile to COVERPROFILE and print a summary
	$(GO) test -covermode=atomic -coverprofile='$(COVERPROFILE)' $(TESTFLAGS) $(PKG)
	$(GO) tool cover -func='$(COVERPROFILE)' | tail -n 1
	@echo "HTML report: $(GO) tool cover -html=$(COVERPROFILE)"

generate: ## Run go generate
	$(GO) generate $(PKG)

tidy: ## Run go mod tidy
	$(GO) mod tidy
