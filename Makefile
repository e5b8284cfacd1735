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

.PHONY: help setup experiment test test-unit lint schema clean linkemu linkemu-test \
	dashboards bench-links \
	bench-agent-start bench-agents bench-metrics bench-logs bench-routes bench-primers bench-spin reproduce vm-check vagrant-check vm-tunnel bench-crash soak bench-fuzz bench-signals bench-export mutants

help:
	@echo "make setup       install everything (Ansible playbook, idempotent)"
	@echo "make experiment  run the default experiment (sets up first if needed);"
	@echo "                 EXPERIMENT=name PROFILE=quick|paper to choose another"
	@echo "make test        run the test suite (needs root for the network tests)"
	@echo "                 and the link emulator's C tests, plain and under ASan/UBSan;"
	@echo "                 JUnit XML with durations in TEST_REPORT_DIR (/tmp/mcclab-test-report)"
	@echo "make lint        ruff, ansible-lint and the schema check"
	@echo "make specs       regenerate the generated ORMCC specs and topologies"
	@echo "make bench-agents ~4 min: CPU per datagram, one process per agent vs agent hosts (root)"
	@echo "make bench-onoff ~1 min: CPU per datagram, on/off UDP flows in processes vs one host (root)"
	@echo "make bench-routes ~20 s: routes and sysctls, one process per change vs one per node (root)"
	@echo "make bench-primers ~1 min: TCP window primers on a lab, one process per flow vs one for all (root)"
	@echo "make bench-spin  ~30 s: the link emulator's CPU with its spinning unbounded vs bounded (root)"
	@echo "make bench-fuzz  ~3 min: 100,000 datagrams into every port of every agent (root)"
	@echo "make bench-signals ~7 min: SIGINT and SIGTERM at every phase of a run, and a second one"
	@echo "make bench-crash ~15 min: SIGKILL campaign, 20 kills of 'mcclab run', then 'mcclab clean'"
	@echo "make soak        ~20 min: ORMCC Fig. 4 n=24 over 1000 s, memory and descriptors sampled"
	@echo "make bench-export ~2 min: peak memory of exporting a run's series, old way and new"
	@echo "make mutants     ~10 min: mutate each protocol core, its behaviour tests must fail"
	@echo "make reproduce   every paper experiment (PROFILE=quick|paper), then results/index.html;"
	@echo "                 RESUME=results/reproduce/ID goes on with one that stopped"
	@echo "make clean       remove what crashed labs left (labs in use stay: mcclab clean --all)"
	@echo "make vm-check    slow (~23 min cached, ~30 cold, under QEMU TCG): a Debian 12 VM provisioned with the"
	@echo "                 playbook, kernel link backend checks inside (docs/vm-check.md)"
	@echo "make vagrant-check slow: vagrant up + make experiment through the VM, checked from"
	@echo "                 the host, then vagrant destroy (docs/vagrant-check.md)"
	@echo "make vm-tunnel   Grafana and Prometheus of the Vagrant VM on 127.0.0.1 (VirtualBox)"

setup:
	@command -v ansible-playbook >/dev/null || { $(SUDO) apt-get update -q && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q ansible; }
	$(SUDO) $(PLAYBOOK)

$(MCCLAB):
	$(MAKE) setup

linkemu:
	$(MAKE) -C linkemu

# MCCLAB_VM=1: `make experiment` and `make test` run in the Vagrant VM. By default
# they do where `vagrant up` made a machine for this checkout, or on a host with
# Vagrant and no local Mininet (docs/setup.md, "Vagrant").
MCCLAB_VM ?= $(if $(wildcard .vagrant/machines/*/*/id),1,$(if $(shell command -v mnexec),0,$(if $(shell command -v vagrant),1,0)))
# Readiness waits in the VM stretched by this factor (mcclab.slowdown; e.g. 10 under
# software emulation), passed through to the guest when set.
MCCLAB_TIMEOUT_SCALE ?=
VM_ENV     := $(if $(MCCLAB_TIMEOUT_SCALE),MCCLAB_TIMEOUT_SCALE=$(MCCLAB_TIMEOUT_SCALE))
VM_SSH_CONFIG := .vagrant/mcclab-ssh-config

ifeq ($(MCCLAB_VM),1)
# The run in the VM (the checkout rsynced to /vagrant first), then its results
# back into this checkout's results/ (rsync over Vagrant's ssh settings), and the
# report's path on this host. The exit status is the run's.
experiment:
	vagrant rsync
	@vagrant ssh -c "cd /vagrant && sudo env $(VM_ENV) make experiment EXPERIMENT=$(EXPERIMENT) PROFILE=$(PROFILE)"; \
	status=$$?; \
	vagrant ssh-config > $(VM_SSH_CONFIG) && mkdir -p results && \
	rsync -a --rsync-path="sudo rsync" -e "ssh -F $(VM_SSH_CONFIG)" \
		default:/vagrant/results/ results/ || status=1; \
	run=$$(ls -td results/$(EXPERIMENT)/*/ 2>/dev/null | head -n 1); \
	[ -z "$$run" ] || echo "results on this host: $(CURDIR)/$${run%/}/ (report: $(CURDIR)/$${run}report.html)"; \
	exit $$status

test:
	vagrant rsync
	vagrant ssh -c "cd /vagrant && sudo env $(VM_ENV) make test PYTEST_ARGS='$(PYTEST_ARGS)'"

# Grafana and Prometheus of the VM on this host's 127.0.0.1 through `vagrant ssh`
# (VirtualBox, whose NAT cannot reach the guest's loopback; libvirt forwards them
# by itself). Stops with Ctrl-C.
vm-tunnel:
	vagrant ssh -- -N -L 127.0.0.1:3000:127.0.0.1:3000 -L 127.0.0.1:9090:127.0.0.1:9090
else
experiment: $(MCCLAB)
	$(SUDO) $(MCCLAB) run $(EXPERIMENT) --profile $(PROFILE)
endif

# `make test` runs two lanes, one after the other. The unit lane (tests/unit: no lab,
# nothing machine-wide) runs on TEST_WORKERS processes (pytest-xdist; `auto`: one per
# CPU). The lab lane (tests/integration) runs in one process, one lab at a time: its
# labs hold a machine-wide lock, and its timing checks want the machine to themselves,
# so nothing else runs beside it. PYTEST_ARGS set: one plain pytest run of the
# selection instead. Each lane leaves its JUnit XML (each test's duration) in
# TEST_REPORT_DIR (junit-unit.xml, junit.xml); CI prints the slowest tests from them
# (.ci/slowest.py). pytest-timeout's session timeout stops a lane between tests once
# its seconds have passed (a test in progress is bounded by its own timeout, at most
# 600 s), so a wedged lab cannot eat CI's budget. Both lanes run even if the first
# fails, so one CI run reports every failure.
TEST_REPORT_DIR ?= /tmp/mcclab-test-report
TEST_WORKERS ?= auto
UNIT_SESSION_TIMEOUT ?= 900
PYTEST_SESSION_TIMEOUT ?= 3300

ifneq ($(MCCLAB_VM),1)
test: $(MCCLAB) linkemu-test
	mkdir -p $(TEST_REPORT_DIR)
ifeq ($(strip $(PYTEST_ARGS)),)
	rm -f $(TEST_REPORT_DIR)/junit.xml $(TEST_REPORT_DIR)/junit-unit.xml
	rc=0; \
	$(SUDO) $(PY) -m pytest tests/unit -n $(TEST_WORKERS) \
		--junitxml=$(TEST_REPORT_DIR)/junit-unit.xml \
		--session-timeout=$(UNIT_SESSION_TIMEOUT) || rc=$$?; \
	$(SUDO) $(PY) -m pytest tests/integration --junitxml=$(TEST_REPORT_DIR)/junit.xml \
		--session-timeout=$(PYTEST_SESSION_TIMEOUT) || rc=$$?; \
	exit $$rc
else
	$(SUDO) $(PY) -m pytest --junitxml=$(TEST_REPORT_DIR)/junit.xml \
		--session-timeout=$(PYTEST_SESSION_TIMEOUT) $(PYTEST_ARGS)
endif
endif

# The emulator's C tests (model and command line), then the same tests on an
# ASan + UBSan build (linkemu/Makefile). Also builds the emulator the labs run.
linkemu-test:
	$(MAKE) -C linkemu test test-sanitize

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

bench-agents: $(MCCLAB)
	$(SUDO) $(PY) bench/agents.py $(BENCH_ARGS)

# On/off UDP traffic: a source and a sink process per flow vs one on/off host (~1 min).
.PHONY: bench-onoff
bench-onoff: $(MCCLAB)
	$(SUDO) $(PY) bench/onoff.py $(BENCH_ARGS)

# Static routes one ip process per route against one ip -batch per node, in the same
# run, in namespaces of its own (~10 s; docs/agents.md, bring-up at n = 64).
bench-routes: $(MCCLAB)
	$(SUDO) $(PY) bench/routes.py $(BENCH_ARGS)

bench-primers: $(MCCLAB)
	$(SUDO) $(PY) bench/primers.py $(BENCH_ARGS)

bench-spin: $(MCCLAB)
	$(SUDO) $(PY) bench/spin_budget.py $(BENCH_ARGS)

# Mutation check of the protocol cores (~10 min, no lab): each mutant in
# agents/<protocol>/mutants.py applied alone to a copy of the tree, its behaviour tests run,
# a table of killed and surviving mutants printed. BENCH_ARGS="--protocol pgmcc" for one.
mutants:
	$(PY) bench/mutants.py $(BENCH_ARGS)

# Per-datagram cost of the agents' metrics, old prometheus_client children against the
# plain numbers the collector exports, and one agent host's scrape, generate_latest
# against render_text (~15 s, no lab; docs/agents.md).
bench-metrics:
	$(PY) bench/metrics_cost.py $(BENCH_ARGS)

# Reading the iperf3 servers' logs once a second, whole logs against the lines appended
# since the last look, as the runner and the exporter do (~20 s, no lab; docs/agents.md).
bench-logs:
	$(PY) bench/log_follow.py $(BENCH_ARGS)

# SIGINT and SIGTERM at every phase of `mcclab run` and a second signal during
# teardown (~7 min, not part of `make test`, which runs one signal per phase): prints
# signal, phase, exit code, status, lab gone, tables kept, report built per case.
# BENCH_ARGS="--signals SIGTERM --phases teardown" for a subset.
bench-signals: $(MCCLAB)
	$(SUDO) $(PY) bench/signals.py $(BENCH_ARGS)

# SIGKILL campaign (~15 min, not part of `make test`): kills `mcclab run` at random
# points (bring-up, monitoring, mid-run, export, teardown, analysis), runs `mcclab
# clean` and looks for leftovers of every kind; then one more run must complete.
# BENCH_ARGS="--trials 6" for a shorter campaign (docs/reliability.md).
bench-crash: $(MCCLAB)
	$(SUDO) $(PY) bench/crash.py $(BENCH_ARGS)

# Fuzzing (~3 min, not part of `make test`, which sends 10,000 a port): 100,000 datagrams
# into every UDP port of every protocol's agents on loopback, forged sources included
# (raw socket: root); prints sent, crashes and drops counted by reason per port.
bench-fuzz: $(MCCLAB)
	$(SUDO) $(PY) bench/fuzz_ports.py $(BENCH_ARGS)

# Soak (~20 min): ORMCC Fig. 4 at n = 24, paper profile (1000 s), with the memory and
# descriptors of every long-lived process and the Prometheus database sampled; growth
# after the warm-up must stay under 10 % and no scrape may be lost (docs/reliability.md).
soak: $(MCCLAB)
	$(SUDO) $(PY) bench/soak.py $(BENCH_ARGS)

# Every paper experiment one after the other, then results/index.html (one table per
# paper: paper value, measured mean and spread, verdict, margin, link to each report).
# PROFILE=paper runs the paper's number of trials where it averaged several;
# EXPERIMENTS="default stair-fig9" for a subset. `mcclab index` rebuilds the page from
# results/ alone (docs/reproduce.md).
reproduce: $(MCCLAB)
ifdef RESUME
	$(SUDO) $(MCCLAB) reproduce --resume $(RESUME)
else
	$(SUDO) $(MCCLAB) reproduce --profile $(PROFILE) $(foreach e,$(EXPERIMENTS),--experiment $(e))
endif

# Peak memory of exporting a run's series, the old way (all at once) beside the
# current one (metric by metric), on synthetic answers shaped like the 1000-s soak
# (~2 min, no root, no lab; docs/reliability.md).
bench-export: $(MCCLAB)
	$(PY) bench/export_memory.py $(BENCH_ARGS)

# The Vagrant user path in a real Debian 12 VM (QEMU TCG), not part of `make test`:
# builds/caches the image under /var/cache/mcclab-vm, provisions it with
# ansible/site.yml, runs the kernel link backend, multicast and the quick default
# experiment inside, and the same fidelity settings on the host (userspace).
# VMCHECK_ARGS=--rebuild for a cold run; see docs/vm-check.md.
vm-check: $(MCCLAB) linkemu
	$(SUDO) env PYTHONPATH=$(CURDIR) $(PY) -m mcclab.vmcheck $(VMCHECK_ARGS)

# The README's laptop path for real (slow, not part of `make test`): a libvirt box
# from vm-check's cached image, `vagrant up` (QEMU TCG) with libvirtd in a network
# namespace, the host-side `make experiment`, results/report/Prometheus checked
# from the host, `vagrant destroy -f`, no leftovers. See docs/vagrant-check.md.
vagrant-check: $(MCCLAB)
	$(SUDO) env PYTHONPATH=$(CURDIR) $(PY) -m mcclab.vmcheck.vagrant $(VAGRANTCHECK_ARGS)

lint: $(MCCLAB)
	@command -v ansible-lint >/dev/null || { echo "error: make lint needs ansible-lint," \
		"which make setup does not install: apt-get install ansible-lint (Debian 12)" >&2; exit 1; }
	$(PY) -m ruff check mcclab agents tests bench dashboards labs experiments
	$(PY) -m dashboards --check
	$(PY) -m mcclab topo schema --check schema/topology.schema.json
	$(PY) -m mcclab experiment schema --check schema/experiment.schema.json
	cd ansible && ansible-lint

schema: $(MCCLAB)
	$(PY) -m mcclab topo schema --write schema/topology.schema.json
	$(PY) -m mcclab experiment schema --write schema/experiment.schema.json

# The ORMCC specs and topologies the spec language cannot state once (committed;
# tests/unit/test_ormcc_specs.py checks they are current).
.PHONY: specs
specs:
	$(PY) experiments/gen/ormcc.py

# Grafana dashboards as code: regenerate dashboards/json/*.json (committed).
dashboards: $(MCCLAB)
	$(PY) -m dashboards

clean:
	-$(SUDO) $(MCCLAB) clean
	rm -rf .pytest_cache .ruff_cache
