"""gpuinfra: the pure library behind the gpuinfra toolkit.

Parsers of vendor tool output, the cluster-spec model and its validation, knowledge tables
(GPU models, MIG profiles, topology profiles, driver packages) and verdicts. Nothing in this
package imports pyinfra, touches the network or reads files: callers hand it text and data.
"""

__version__ = "0.1.0"
