# mcclab: one entry point for users, CI and developers.
# On a Debian 12 machine every target runs locally; on a host with Vagrant but
# no local Mininet, `make experiment` runs inside the VM instead.

VENV       ?= /opt/mcclab/venv
PY         := $(VENV)/bin/python
MCCLAB     := $(VENV)/bin/mcclab
PLAYBOOK   := ansible-playbook -i ansible/inventory.ini ansible/site.yml
SUDO       := $(if $(filter 0,$(shell id -u)),,sudo)
EXPERIMENT ?= default
PROFILE    ?= quick
PYTEST_ARGS ?=

.PHONY: help setup experiment test test-unit lint schema clean linkemu dashboards bench-links \
	bench-agent-start vm-check

help:
	@echo "make setup       install everything (Ansible playbook, idempotent)"
	@echo "make experiment  run the default experiment (sets up first if needed);"
	@echo "                 EXPERIMENT=name PROFILE=quick|paper to choose another"
	@echo "make test        run the test suite (needs root for the network tests)"
	@echo "make lint        ruff, ansible-lint and the schema check"
	@echo "make clean       remove every namespace, interface and process mcclab made"
	@echo "make vm-check    slow (~23 min cached, ~30 cold, under QEMU TCG): a Debian 12 VM provisioned with the"
	@echo "                 playbook, kernel link backend checks inside (docs/vm-check.md)"

setup:
	@command -v ansible-playbook >/dev/null || { $(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ansible; }
	$(SUDO) $(PLAYBOOK)

$(MCCLAB):
	$(MAKE) setup

linkemu:
	$(MAKE) -C linkemu

ifeq ($(shell command -v mnexec >/dev/null || { command -v vagrant >/dev/null && echo vm; }),vm)
experiment:
	vagrant ssh -c "cd /vagrant && make experiment EXPERIMENT=$(EXPERIMENT) PROFILE=$(PROFILE)"
else
experiment: $(MCCLAB)
	$(SUDO) $(MCCLAB) run $(EXPERIMENT) --profile $(PROFILE)
endif

test: $(MCCLAB)
	$(SUDO) $(PY) -m pytest $(PYTEST_ARGS)

test-unit: $(MCCLAB)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# Link-emulation fidelity benchmark (~20 min, not part of `make test`): brings
# up a lab and writes docs/bench-links-<backend>.md; BENCH_ARGS=--quick for a
# shorter run.
bench-links: $(MCCLAB) linkemu
	$(SUDO) $(PY) bench/bench_links.py $(BENCH_ARGS)

# How long agents take to start, exec'd or forked from the fork server (~30 s,
# prints a table; docs/agents.md). BENCH_ARGS="--counts 8 24 48 72" for other sizes.
bench-agent-start: $(MCCLAB)
	$(SUDO) $(PY) bench/agent_start.py $(BENCH_ARGS)

# The Vagrant user path in a real Debian 12 VM (QEMU TCG), not part of `make test`:
# builds/caches the image under /var/cache/mcclab-vm, provisions it with
# ansible/site.yml, runs the kernel link backend, multicast and the quick default
# experiment inside, and the same fidelity settings on the host (userspace).
# VMCHECK_ARGS=--rebuild for a cold run; see docs/vm-check.md.
vm-check: $(MCCLAB) linkemu
	$(SUDO) env PYTHONPATH=$(CURDIR) $(PY) -m mcclab.vmcheck $(VMCHECK_ARGS)

lint: $(MCCLAB)
	$(PY) -m ruff check mcclab agents tests bench dashboards
	$(PY) -m dashboards --check
	$(PY) -m mcclab topo schema --check schema/topology.schema.json
	cd ansible && ansible-lint

schema: $(MCCLAB)
	$(PY) -m mcclab topo schema --write schema/topology.schema.json

# Grafana dashboards as code: regenerate dashboards/json/*.json (committed).
dashboards: $(MCCLAB)
	$(PY) -m dashboards

clean:
	-$(SUDO) $(MCCLAB) clean
	rm -rf .pytest_cache .ruff_cache
