"""A daemon's new arguments and new configuration in one run: a restart, or a reload, never both.

systemd's ExecReload of these daemons is ``kill -HUP $MAINPID``. A reload right after a restart
can reach the new process before it has installed its SIGHUP handler: the signal's default
action ends it, and systemd counts a death by SIGHUP as a clean exit, so Restart=on-failure does
not bring it back and the deploy reports success with the daemon stopped. (Issue 23: a deploy
interrupted after the head's packages were installed and started, then rerun, left Alertmanager
dead; the next run started it.) Seen on the lab's head (Debian 12, 2026-11-26): `systemctl
restart X && systemctl reload X` left X inactive 3 times out of 3 for prometheus-alertmanager
and once out of once for prometheus, with Result=success, ExecMainCode=2 (killed),
ExecMainStatus=1 (SIGHUP). The restart reads the new configuration anyway.
"""

from __future__ import annotations

from collections.abc import Callable

from pyinfra.operations import systemd


def restart_or_reload(label: str, service: str, args_changed: Callable[[], bool],
                      config_changed: Callable[[], bool]) -> None:
    """Restart ``service`` when its arguments changed; else reload it when its configuration
    changed. Both only when it was already running (pyinfra: a stopped one is started by the
    role's ``running=True`` operation, with both in place)."""
    systemd.service(name=f"Restart {label} on its new arguments", service=service,
                    restarted=True, _if=args_changed)
    systemd.service(name=f"Reload {label} on its new configuration", service=service,
                    reloaded=True, _if=[config_changed, lambda: not args_changed()])
