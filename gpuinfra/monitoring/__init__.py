"""Monitoring: what the `monitoring` role writes, as pure functions of the spec.

- :mod:`gpuinfra.monitoring.gpumetrics`: the GPU textfile collector's queries and the metric
  text built from their parsed output (this module and the parsers it uses are shipped to the
  nodes and run there by the collector);
- :mod:`gpuinfra.monitoring.knobs`: the rules of the role's knobs (judged by the spec gate);
- :mod:`gpuinfra.monitoring.settings`: :class:`~gpuinfra.monitoring.settings.Monitoring`, the
  knobs' checked values as the builders below read them;
- :mod:`gpuinfra.monitoring.scrape`: prometheus.yml and the daemons' listen arguments;
- :mod:`gpuinfra.monitoring.alerts`: the alert rules, and :mod:`gpuinfra.monitoring.alerts_tests`
  their promtool unit tests;
- :mod:`gpuinfra.monitoring.alertmanager`: alertmanager.yml;
- :mod:`gpuinfra.monitoring.grafana`: Grafana's datasource and dashboard;
- :mod:`gpuinfra.monitoring.web`: web.yml of Prometheus and Alertmanager (TLS, basic auth) and
  what their clients send, with the paths of the secrets the head makes;
- :mod:`gpuinfra.monitoring.units`: the daemons' systemd units and drop-ins (built by
  gpuinfra.units).

Every configuration file is a Python structure dumped by the role with pyyaml/json (never text
pasted together), and judged by its consumer before it goes live: ``promtool check config`` (which
also loads the rule file), ``promtool check rules``, ``amtool check-config``.
"""
