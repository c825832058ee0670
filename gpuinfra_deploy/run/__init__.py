"""The run machinery: ``site`` (the run's Site handed to every role), ``knobs`` (the
registry of the roles' data keys, found by file, and the spec built from them),
``inventory`` (loading an inventory as pyinfra does, for the spec), ``role`` (applying a
role where it applies) and ``summary`` (the failed hosts listed at the end of a run).
"""
