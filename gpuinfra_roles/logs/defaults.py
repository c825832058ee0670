"""Data keys of the `logs` role: default and rule of each (override them in group_data).

Every node's journal on the head (systemd-journal-upload -> systemd-journal-remote, TLS with a
CA the head makes). Every key is site-wide: the head holds every node's logs under one cap.
Checked by the spec gate before any host is touched; the cap is also checked against the
head's disk when the deploy is planned (gpuinfra.logs.disk_problem).
"""

from gpuinfra.logs import DEFAULT_PORT, RETENTION, SIZE
from gpuinfra.logs_forward import forward_rule
from gpuinfra.spec.knobs import Knob, defaults
from gpuinfra.spec.rules import boolean, integer, text

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
    # syslog or Elasticsearch/OpenSearch (gpuinfra/logs_forward.py). Empty: no forwarding
    # (and a forwarding file an earlier deploy wrote is removed). Independent of logs_enabled.
    Knob("logs_forward", [], forward_rule(),
         "the site's syslog / Elasticsearch targets each node forwards its logs to"),
)

DEFAULTS = defaults(KNOBS)
