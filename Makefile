# Two commands do all the set-up: `make demo` (the main job on the local lab) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# molecule runs ansible-config by name: .venv/bin must be on PATH. Ansible's state (ANSIBLE_HOME,
# ANSIBLE_LOCAL_TEMP) goes in a private directory made for the run (mktemp -d: 0700, a fresh
# name), never in $HOME or a fixed /tmp path another user could prepare; removed afterwards.
MOLECULE := PATH="$(CURDIR)/$(BIN):$$PATH" ANSIBLE_HOME="$$state/ansible-home" \
  ANSIBLE_LOCAL_TEMP="$$state/ansible-local" $(BIN)/molecule
PRIVATE_STATE := state=$$(mktemp -d -t gpuinfra-molecule.XXXXXXXX) && \
  trap 'rm -rf "$$state"' EXIT INT TERM &&
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml setup.py | sha256sum | cut -c1-12)

.PHONY: test molecule unit plan lint demo validate deploy verify report render lab-up lab-down lab-reboot \
  lab-status clean test-tools

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

# Tools the unit tests run: virt-xml-validate (Debian's libvirt-clients, with xmllint from
# libxml2-utils) judges the libvirt domain XML the vfio role writes; chromium and its
# chromedriver (Debian's) load `gpuinfra report --html` in a headless browser
# (tests/unit/test_report_browser.py); rsyslog and rsyslog-elasticsearch: `rsyslogd -N1` judges
# the logs role's forwarding file (tests/unit/test_logs_forward.py). Installed with apt-get when
# missing (needs root, as the lab does).
TEST_PACKAGES := libvirt-clients libxml2-utils chromium chromium-driver rsyslog rsyslog-elasticsearch
test-tools:
	@command -v virt-xml-validate >/dev/null && command -v xmllint >/dev/null && \
	  command -v chromium >/dev/null && test -x /usr/bin/chromedriver && \
	  dpkg -s rsyslog-elasticsearch >/dev/null 2>&1 || { \
	  echo "installing $(TEST_PACKAGES) (virt-xml-validate, chromium, rsyslogd: for the unit tests)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q --no-install-recommends $(TEST_PACKAGES) >/dev/null || \
	  { apt-get update -q >/dev/null && \
	    apt-get install -y -q --no-install-recommends $(TEST_PACKAGES) >/dev/null; }; }

# Lint, unit and plan tests (promtool and amtool unpacked from Debian's packages first: the
# alert rules' unit tests run `promtool test rules`), then the lab scenarios (deploy,
# idempotence, verify; the broken-NVLink lab, which must fail verification on its broken
# worker only; the VFIO role on the QEMU hypervisor guest; the RDMA role on two QEMU guests
# with Soft-RoCE and live ib_write_bw between them). Between them, the Slurm of each Debian
# release (20.11, 22.05, 24.11, in containers built once) judges what the slurm role renders
# for each distribution it targets (gpuinfra_lab/slurm_versions.py). pytest's exit 5 ("no tests
# collected") is a failure here: a suite that collects nothing has proven nothing.
test: $(STAMP) test-tools
	$(BIN)/ruff check .
	$(BIN)/python -m gpuinfra_lab.tools
	GPUINFRA_REQUIRE_TOOLS=1 $(BIN)/pytest -q -p no:cacheprovider; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc
	$(BIN)/python -m gpuinfra_lab.slurm_versions
	$(MAKE) molecule

# Each scenario starts by removing any lab (molecule's own state cannot see one started by
# hand) and ends by removing its own: `make test` leaves no lab behind.
# Debian 13: the trixie scenario (the whole deploy on trixie containers), then the vfio and
# rdma scenarios again on guests booting trixie's own kernel (GPUINFRA_LAB_OS).
molecule: $(STAMP)
	$(PRIVATE_STATE) $(MOLECULE) test -s default && $(MOLECULE) test -s broken-nvlink && \
	  $(MOLECULE) test -s roles && $(MOLECULE) test -s vfio && $(MOLECULE) test -s rdma && \
	  $(MOLECULE) test -s trixie && GPUINFRA_LAB_OS=debian-13 $(MOLECULE) test -s vfio && \
	  GPUINFRA_LAB_OS=debian-13 $(MOLECULE) test -s rdma

unit: $(STAMP) test-tools
	$(BIN)/pytest -q tests/unit

lint: $(STAMP)
	$(BIN)/ruff check .

# The release the lab's hosts run (`make demo DISTRO=debian-13`: trixie containers and guests).
DISTRO ?= debian-12

# A site's targets: SITE=<site> runs them on inventory/<site>.py (default: the lab).
SITE ?= lab
INVENTORY := inventory/$(SITE).py

validate: $(STAMP)
	$(BIN)/gpuinfra validate $(INVENTORY)

plan: $(STAMP)
	$(BIN)/pytest -q tests/plan

# The main job on the local lab: validate the spec, start the lab, deploy, reboot the lab
# (the first driver install records "reboot needed"; a reboot applies it), deploy again (must
# change nothing); the training smoke job (gpuinfra_lab/training_smoke.py: PyTorch DDP across
# both workers through Slurm, then the same job with a rank killed, judged FAIL); verify and
# report, with the smoke job's result (also as a page: build/report.html); the health check's
# proof (gpuinfra_lab/health_drain.py: a node drained with its cause and resumed, a
# hand-drained node left alone, an XID during a job); a deploy with a broken slurm.conf must
# be refused while slurmctld keeps running (also when a site template makes it: named in the
# refusal); jobs placed by the fabric (gpuinfra_lab/topology_placement.py: a 2-node job
# asking for one leaf waits, one allowed two runs, a bad topology.conf refused by slurmctld);
# one with a broken prometheus.yml while Prometheus
# keeps serving; a worker without credentials is refused by Prometheus and Alertmanager, one
# with them is answered, and every target is up; every worker's journal reaches the head
# once, also across a restart of its receiver, and a foreign client certificate is refused.
# `make demo BROKEN=1` adds the broken worker (and leaves the smoke job out): the report fails
# on it, and it is shown drained with its cause. The lab stays up afterwards.
demo: $(STAMP)
	$(BIN)/gpuinfra validate inventory/lab.py
	$(BIN)/gpuinfra lab up --os $(DISTRO) $(if $(BROKEN),--broken)
	$(BIN)/pyinfra -y inventory/lab.py deploy.py
	$(BIN)/gpuinfra lab reboot
	$(BIN)/python -m gpuinfra_cli.idempotence inventory/lab.py
	$(if $(BROKEN),,$(BIN)/python -m gpuinfra_lab.training_smoke inventory/lab.py \
	  --keep build/smoke.json)
	$(BIN)/gpuinfra report --inventory inventory/lab.py --html build/report.html \
	  $(if $(BROKEN),,--smoke build/smoke.json) || [ -n "$(BROKEN)" ]
	$(BIN)/python -m gpuinfra_lab.health_drain inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.job_metrics inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.bad_slurm_conf inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.topology_placement inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.bad_template inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.bad_prometheus_conf inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.monitoring_auth inventory/lab.py
	$(BIN)/python -m gpuinfra_lab.central_logs inventory/lab.py
	@echo
	@echo "The report, as a page:  build/report.html (open it in a browser; with the smoke job)"
	@echo "The lab is still up. Look inside: ssh -F .lab/ssh_config lab-worker1"
	@echo "                     or: $(BIN)/gpuinfra lab status"
	@echo "Tear it down:          make lab-down"

deploy: $(STAMP)
	$(BIN)/pyinfra $(if $(filter lab,$(SITE)),-y) $(INVENTORY) deploy.py

verify: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider gpuinfra_verify --inventory $(INVENTORY) -n 4

report: $(STAMP)
	$(BIN)/gpuinfra report --inventory $(INVENTORY)

render: $(STAMP)
	$(BIN)/gpuinfra render $(INVENTORY) --out build/render-$(SITE)

lab-up: $(STAMP)
	$(BIN)/gpuinfra lab up --os $(DISTRO)

lab-down: $(STAMP)
	$(BIN)/gpuinfra lab down

lab-reboot: $(STAMP)
	$(BIN)/gpuinfra lab reboot

lab-status: $(STAMP)
	$(BIN)/gpuinfra lab status

clean:
	rm -rf $(VENV) *.egg-info build/report.html
