"""Monitoring: what the `monitoring` role writes, as pure functions of the spec.

- :mod:`gpuinfra.monitoring.gpumetrics`: the GPU textfile collector's queries and the metric
  text built from their parsed output (this module and the parsers it uses are shipped to the
  nodes and run there by the collector);
- :mod:`gpuinfra.monitoring.prometheus`: prometheus.yml, the alert rules and their promtool
  unit tests, alertmanager.yml, Grafana's datasource and dashboard, all from the spec.
"""
