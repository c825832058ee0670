"""Data keys of the `monitoring` role: default and rule of each (override them in group_data).

Also read from the cluster spec: the nodes (``head``: Prometheus, Alertmanager, Grafana, the
Slurm exporter; every node: node_exporter; GPU nodes: the GPU collector and DCGM), each node's
``node_address`` (everything listens on the cluster network only, and Prometheus scrapes
there), ``gpu_count``/``gpu_topology``/``gpu_model`` (the GPU alerts), ``schedulers`` (the
Slurm alerts) and ``cluster_name``. Checked by the spec gate before any host is touched; every
key here lands in the head's files, so each must agree on every host.
"""

from gpuinfra.knowledge.repositories import GRAFANA_REPO
from gpuinfra.monitoring.knobs import (
    RECEIVERS,
    RETENTION,
    SCRAPE_EXTRA,
    SCRAPE_INTERVAL,
    SLURM_EXPORTER_RULE,
)
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, debian_version, http_url, integer, optional

KNOBS = (
    # The whole stack: off leaves every host as it is (nothing is removed).
    Knob("monitoring_enabled", True, boolean(), "the monitoring stack", site_wide=True),
    Knob("monitoring_retention", "30d", RETENTION, "how long Prometheus keeps samples",
         site_wide=True),
    Knob("monitoring_scrape_interval", "30s", SCRAPE_INTERVAL,
         "how often Prometheus scrapes and evaluates the alerts", site_wide=True),
    # The site's own scrape jobs (IPMI, switch or storage exporters), as Prometheus
    # scrape_config dicts: [{"job_name": "ipmi", "static_configs": [{"targets":
    # ["bmc01:9290"]}]}]. Written as data into prometheus.yml; promtool judges the whole file
    # before it replaces the live one, so a bad job is refused and Prometheus keeps running.
    Knob("monitoring_scrape_extra", [], SCRAPE_EXTRA, "extra Prometheus scrape jobs",
         site_wide=True),
    Knob("monitoring_prometheus_port", 9090, integer(1024, 65535), "Prometheus' port",
         site_wide=True),
    Knob("monitoring_alertmanager_port", 9093, integer(1024, 65535), "Alertmanager's port",
         site_wide=True),
    # Prometheus and Alertmanager only over HTTPS with basic auth (their web.yml,
    # gpuinfra/monitoring/web.py): the password, its bcrypt hash, the certificate and its key
    # are made on the head, once. False serves both in plain HTTP without a login, as before.
    Knob("monitoring_web_security", True, boolean(),
         "TLS and basic auth on Prometheus and Alertmanager", site_wide=True),
    Knob("monitoring_node_exporter_port", 9100, integer(1024, 65535), "node_exporter's port",
         site_wide=True),
    # node_exporter on every node only over HTTPS with basic auth, with credentials of its own
    # (gpuinfra/monitoring/web.py): a password and a small CA made on the head, each node's key
    # and certificate signed there and copied to the node through the deploy machine's memory.
    # Off by default: node_exporter serves read-only metrics (no API that changes anything),
    # and turning it on changes the scheme of every node's port 9100 for any other scraper of
    # the site (a central Prometheus, an ad-hoc curl): the operator opts in.
    Knob("monitoring_node_exporter_web_security", False, boolean(),
         "TLS and basic auth on every node's node_exporter", site_wide=True),
    # Who gets which alerts: [{"name": "ops", "webhook_url": "http://...", "severities":
    # ["critical"]}, {"name": "mail", "email_to": ..., "email_from": ..., "smarthost":
    # "mail:25", "alerts": ["GpuMissing"]}]. Empty: alerts are kept in Alertmanager, not sent.
    Knob("monitoring_alert_receivers", [], RECEIVERS, "where alerts are sent", site_wide=True),
    Knob("monitoring_gpu_temperature_max", 85, integer(50, 110),
         "GPU temperature (C) above which GpuTemperatureHigh fires", site_wide=True),
    Knob("monitoring_disk_free_min_percent", 10, integer(1, 50),
         "free space (percent) below which DiskAlmostFull fires", site_wide=True),
    # NVIDIA's DCGM exporter on GPU nodes, from NVIDIA's CUDA repository (the driver's, else
    # the distribution's CUDA repository, else monitoring_dcgm_repo_url), DCGM and exporter
    # pinned as a pair (4.6.0 with 4.8.3: the exporter's release tag 4.6.0-4.8.3, in
    # NVIDIA/dcgm-exporter's README: `nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless`).
    # UNVERIFIED (knowledge audit 9735030 row 92), the .deb versions only: 1:4.6.0-1 and 4.8.3-1
    # follow the naming of the ones seen (datacenter-gpu-manager-exporter_4.8.2-1); the role's
    # apt-cache gate stops before any change when apt lists neither.
    Knob("monitoring_dcgm", True, boolean(), "NVIDIA's DCGM exporter on GPU nodes",
         site_wide=True),
    Knob("monitoring_dcgm_version", "1:4.6.0-1", debian_version(),
         "the exact datacenter-gpu-manager-4-core version", site_wide=True),
    Knob("monitoring_dcgm_exporter_version", "4.8.3-1", debian_version(),
         "the exact datacenter-gpu-manager-exporter version", site_wide=True),
    Knob("monitoring_dcgm_repo_url", None, optional(http_url()),
         "a mirror of NVIDIA's CUDA repository for DCGM", site_wide=True),
    # Which Slurm job holds each GPU (gpuinfra/monitoring/jobmap.py): on Slurm GPU nodes,
    # Slurm's Prolog and Epilog keep dcgm-exporter's HPC job mapping folder, which the GPU
    # collector (gpuinfra_gpu_job_info{job_id,user}) and dcgm-exporter (hpc_job) read; the
    # Epilog logs one line per job (journalctl -t gpuinfra-job). The slurm role names the hooks
    # in slurm.conf. On Kubernetes GPU workers, dcgm-exporter labels GPU metrics with the pod
    # holding each GPU (--kubernetes: the kubelet's pod-resources API).
    Knob("monitoring_job_mapping", True, boolean(),
         "job-aware GPU metrics (Slurm jobs by Prolog/Epilog, Kubernetes pods by the kubelet)",
         site_wide=True),
    # Grafana from Grafana's own apt repository (not in Debian), pinned; the datasource and
    # the GPU-cluster dashboard provisioned from the spec.
    Knob("monitoring_grafana", True, boolean(), "Grafana on the head", site_wide=True),
    Knob("monitoring_grafana_version", "12.1.1", debian_version(),
         "the exact grafana package version", site_wide=True),
    Knob("monitoring_grafana_port", 3000, integer(1024, 65535), "Grafana's port",
         site_wide=True),
    Knob("monitoring_grafana_repo_url", GRAFANA_REPO, http_url(),
         "Grafana's apt repository (or a mirror)", site_wide=True),
    # The Slurm exporter (rivosinc/prometheus-slurm-exporter: nodes by state, jobs) on the
    # head, from its release tarball checked against its SHA-256: no distribution packages it.
    # None: off. {"version": "1.6.0", "sha256": "..."} (optionally "url": a mirror).
    Knob("monitoring_slurm_exporter", None, SLURM_EXPORTER_RULE, "the Slurm exporter",
         site_wide=True),
)

DEFAULTS = defaults(KNOBS)
