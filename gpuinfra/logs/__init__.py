"""Central logs: the journal on the head, forwarding to a site's syslog, Loki."""
