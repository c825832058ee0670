"""containerd (roles/containerd) on every host that runs it: Kubernetes nodes, and every
host with containerd_everywhere (the lab, where it runs for real).

Per host: containerd running and enabled; its live configuration (``containerd config dump``:
the file as containerd reads it) has SystemdCgroup = true on runc and the pinned release's
sandbox image; the CRI plugin loaded; and a container started through containerd with the
systemd cgroup manager runs (a throw-away root file system of one binary, no image pull: the
lab reaches no registry).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from testinfra.host import Host

from gpuinfra.containers.containerd import live_settings
from gpuinfra.errors import GpuinfraError
from gpuinfra.spec import NodeSpec
from gpuinfra_verify.expect import SiteUnderTest, problem
from gpuinfra_verify.failure import fail
from gpuinfra_verify.kubernetes_expect import containerd_problems, cri_plugin_status

Note = Callable[[str, object], None]

# A root file system holding cat and its libraries, a container on it (runc, systemd cgroup
# driver) printing its own cgroup, then everything removed.
PROBE = r"""set -e
root=$(mktemp -d /var/tmp/gpuinfra-probe.XXXXXX); trap 'rm -rf "$root"' EXIT
for f in /usr/bin/cat $(ldd /usr/bin/cat | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$f")"; cp -L "$f" "$root$f"; done
mkdir -p "$root/proc" "$root/dev" "$root/sys"
id=gpuinfra-probe-$$
timeout 60 ctr run --rm --runc-systemd-cgroup --cgroup "system.slice:gpuinfra:$$" \
  --rootfs "$root" "$id" /usr/bin/cat /proc/self/cgroup"""


@pytest.fixture(scope="module")
def runs_containerd(node: NodeSpec) -> None:
    if "kubernetes" not in node.schedulers and not node.settings["containerd_everywhere"]:
        pytest.skip("no containerd here: not a Kubernetes node, containerd_everywhere False")


pytestmark = pytest.mark.usefixtures("runs_containerd")


def test_containerd_running(host: Host, node: NodeSpec, note: Note) -> None:
    service = host.service("containerd")
    note("containerd", f"{'running' if service.is_running else 'stopped'}, "
                       f"{'enabled' if service.is_enabled else 'disabled'}")
    if not (service.is_running and service.is_enabled):
        fail(note, problem(node.name, "containerd is not running and enabled",
                           "it refused its configuration at start, or was stopped",
                           "`journalctl -u containerd` on the node; deploy (containerd role)"))


def test_containerd_config(host: Host, node: NodeSpec, site: SiteUnderTest, note: Note) -> None:
    dump = host.run("containerd config dump")
    if dump.rc != 0:
        fail(note, problem(node.name, f"containerd config dump failed: {dump.stderr.strip()}",
                           "/etc/containerd/config.toml does not parse",
                           "deploy (containerd role): it writes the file after containerd "
                           "accepted it"))
    try:
        settings = live_settings(dump.stdout)
    except GpuinfraError as exc:
        fail(note, problem(node.name, str(exc), "the dump is not TOML", "see the dump"))
    wrong = containerd_problems(settings, site.spec.kubernetes.pause_image)
    if wrong:
        fail(note, problem(node.name, "containerd's configuration: " + "; ".join(wrong),
                           "config.toml was edited or replaced after the deploy",
                           "deploy (containerd role) to write it again"))


def test_cri_plugin_loaded(host: Host, node: NodeSpec, note: Note) -> None:
    status = cri_plugin_status(host.run("ctr plugins ls").stdout)
    note("cri_plugin", status)
    if status != "ok":
        fail(note, problem(node.name, f"containerd's CRI plugin is {status or 'absent'}",
                           "the CRI plugin failed to load (its section of config.toml, or a "
                           "disabled_plugins entry)", "`journalctl -u containerd | grep cri`"))


def test_container_runs_with_systemd_cgroups(host: Host, node: NodeSpec, note: Note) -> None:
    run = host.run(PROBE)
    if run.rc != 0 or "gpuinfra" not in run.stdout:
        fail(note, problem(node.name, f"a container through containerd did not run "
                                      f"(exit {run.rc}): {(run.stderr or run.stdout).strip()}",
                           "runc or the systemd cgroup manager failed under containerd",
                           "`ctr run` by hand on the node; `journalctl -u containerd`"))
