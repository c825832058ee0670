"""Data keys of the `logs` role: default and rule of each (override them in group_data).

Every node's journal on the head (systemd-journal-upload -> systemd-journal-remote, TLS with a
CA the head makes). Every key is site-wide: the head holds every node's logs under one cap.
Checked by the spec gate before any host is touched; the cap is also checked against the
head's disk when the deploy is planned (gpuinfra.logs.journal.disk_problem).
"""

from gpuinfra.logs.forward import forward_rule
from gpuinfra.logs.journal import DEFAULT_PORT, RETENTION, SIZE
from gpuinfra.logs.loki import DEFAULT_LOKI_PORT
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, debian_version, integer, text

KNOBS = (
    # Central logs on (every node's journal on the head). On by default: the lab and every site
    # get them; a site with its own log pipeline turns them off.
    Knob("logs_enabled", True, boolean(), "every node's journal forwarded to the head",
         site_wide=True),
    # The receiver's port on the head's cluster address (the vendor socket's own, 19532).
    Knob("logs_port", DEFAULT_PORT, integer(1024, 65535), "systemd-journal-remote's HTTPS port",
         site_wide=True),
    # The most the head keeps of all nodes' logs (journald's size syntax, base 1024): archived
    # files beyond it are removed, oldest first, every hour. Refused when it, plus one active
    # file per node, would not leave 15% of the head's file system free.
    Knob("logs_max_use", "4G", text(SIZE, "a size like 4G or 512M (K, M, G, T: base 1024)"),
         "the most disk the head's copy of every node's logs may use", site_wide=True),
    # How long the head keeps a node's logs (archived files older than this are removed).
    Knob("logs_retention", "30d", text(RETENTION, "a time like 30d, 12h or 8w (hours, days, "
                                                  "weeks)"),
         "how long the head keeps the nodes' logs", site_wide=True),
    # Option: every node (the head too) also forwards its own logs with rsyslog to the site's
    # syslog or Elasticsearch/OpenSearch (gpuinfra/logs/forward.py). Empty: no forwarding
    # (and a forwarding file an earlier deploy wrote is removed). Independent of logs_enabled.
    Knob("logs_forward", [], forward_rule(),
         "the site's syslog / Elasticsearch targets each node forwards its logs to"),
    # Option: Grafana Loki on the head and Grafana Alloy on every node (the head too) reading
    # its journal, both from Grafana's apt repository (monitoring_grafana_repo_url), pinned
    # (gpuinfra/logs/loki.py); with monitoring's Grafana on, a Loki data source and a dashboard
    # of drained and failed nodes' logs. Loki keeps logs_retention (24h at least); it has no
    # cap in bytes. Independent of logs_enabled. Off: nothing installed (turning it off later
    # leaves Loki and Alloy as they are).
    Knob("logs_loki", False, boolean(), "Loki on the head and Alloy on every node",
         site_wide=True),
    # Loki's HTTP port on the head's cluster address (Loki's own default); its gRPC port,
    # 9095, is on the loopback.
    Knob("logs_loki_port", DEFAULT_LOKI_PORT, integer(1024, 65535), "Loki's HTTP port",
         site_wide=True),
    # UNVERIFIED (no access to apt.grafana.com from here): the .deb versions follow the
    # release tags (Loki v3.6.0, Alloy v1.12.2: grafana/alloy CHANGELOG.md, 2026-01-08); the
    # role's apt-cache gate stops before any change when apt lists other versions but not
    # these, naming what it lists.
    Knob("logs_loki_version", "3.6.0", debian_version(), "the exact loki package version",
         site_wide=True),
    Knob("logs_alloy_version", "1.12.2", debian_version(), "the exact alloy package version",
         site_wide=True),
)

DEFAULTS = defaults(KNOBS)
