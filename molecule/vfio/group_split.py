"""Lab proof that an IOMMU group split goes red, on the hypervisor guest's real kernel.

    .venv/bin/python molecule/vfio/group_split.py [LAB UP ARGS...]
                                           (default: --workers 1 --vm hv-standins)

On a converged hypervisor guest (lab-hv1: the vfio role deployed, rebooted, its checks green):

1. `gpuinfra lab up ARGS --broken`: the guest keeps running (same machine) under the broken
   variant of its profile (hv-standins-group-split): the NVLink pair behind the bridge passed
   through without the audio device of its IOMMU group.
2. A deploy of the vfio role must fail before it changes anything, naming the group and the
   device left out; the guest's modprobe options and driverctl overrides stay as they were.
3. The audio device is handed back to its host driver (snd_hda_intel) for this boot, as on a
   host that never passed it through.
4. The verify suite must fail exactly test_iommu_groups_whole on lab-hv1, naming the device
   the pair shares its group with, with the fix ("another slot, or ACS in the BIOS").
5. `gpuinfra lab up ARGS` gives the guest its healthy spec back.

Exit 0 when all hold, 1 listing what did not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from gpuinfra_lab.profiles import HV_SPEC, HV_SPEC_GROUP_SPLIT, STANDIN_AUDIO
from gpuinfra_verify.report import read_junit

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / ".venv" / "bin"
GUEST = "lab-hv1"
DEFAULT_ARGS = ["--workers", "1", "--vm", "hv-standins"]
# The function the broken spec leaves out: the audio device of the pair's IOMMU group.
LEFT_OUT = next(d for vm in HV_SPEC["vms"] for d in vm["devices"]
                if d not in {x for v in HV_SPEC_GROUP_SPLIT["vms"] for x in v["devices"]})
STATE = "sha256sum /etc/modprobe.d/gpuinfra-vfio.conf; ls /etc/driverctl.d"


def _run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=timeout)


def _on_guest(command: str) -> str:
    return _run(["ssh", "-F", str(REPO / ".lab" / "ssh_config"), GUEST, command], 120).stdout


def main(argv: list[str]) -> int:
    up = [str(BIN / "gpuinfra"), "lab", "up", *(argv or DEFAULT_ARGS)]
    problems: list[str] = []
    before = _on_guest(STATE)
    broken = _run([*up, "--broken"])
    if broken.returncode != 0:
        print(broken.stdout + broken.stderr)
        return 1
    deploy = _run([str(BIN / "pyinfra"), "-y", "inventory/lab.py", "roles/vfio/deploy.py"])
    output = deploy.stdout + deploy.stderr
    refusal = next((line.strip() for line in output.splitlines()
                    if "shares an IOMMU group" in line), "")
    if deploy.returncode == 0:
        problems.append("the deploy of the split group succeeded")
    if f"with {LEFT_OUT}" not in refusal or "another slot, or ACS in the BIOS" not in refusal:
        problems.append(f"the deploy did not refuse naming {LEFT_OUT} and the fix")
    if _on_guest(STATE) != before:
        problems.append("the refused deploy changed the guest's modprobe options or overrides")
    # The audio device back to its host driver for this boot (the group now holds a device
    # the host uses).
    _on_guest(f"modprobe snd_hda_intel; d=/sys/bus/pci/devices/{LEFT_OUT}; "
              f"echo {LEFT_OUT} > $d/driver/unbind; "
              f"echo snd_hda_intel > $d/driver_override; echo {LEFT_OUT} > "
              "/sys/bus/pci/drivers_probe")
    driver = _on_guest(f"basename $(readlink /sys/bus/pci/devices/{LEFT_OUT}/driver)").strip()
    if driver != "snd_hda_intel":
        problems.append(f"{LEFT_OUT} ({STANDIN_AUDIO}) could not be given back to "
                        f"snd_hda_intel (driver now: {driver or 'none'})")
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "verify.xml"
        suite = _run([str(BIN / "pytest"), "gpuinfra_verify/test_vfio.py", "--inventory",
                      "inventory/lab.py", "-p", "no:cacheprovider", f"--junitxml={junit}"])
        cases = read_junit(junit.read_text()) if junit.is_file() else []
    failed = {c.test: c.message for c in cases if c.outcome == "failed" and c.node == GUEST}
    group = failed.get("test_iommu_groups_whole", "")
    if suite.returncode != 1 or set(failed) != {"test_iommu_groups_whole"}:
        problems.append(f"expected exactly test_iommu_groups_whole[{GUEST}] to fail, got "
                        f"{sorted(failed) or 'no failure'} (pytest exit {suite.returncode})")
    elif "shares an IOMMU group (group" not in group or f"with {LEFT_OUT}" not in group \
            or "ACS in the BIOS" not in group:
        problems.append(f"test_iommu_groups_whole did not name the group and {LEFT_OUT}: "
                        f"{group[:300]}")
    healthy = _run(up)
    if healthy.returncode != 0:
        problems.append(f"lab up (healthy spec) failed: {healthy.stderr.strip()[-200:]}")
    for line in problems:
        print(f"group-split: {line}")
    if problems:
        print("\n".join(output.splitlines()[-20:]))
        print(suite.stdout[-2000:])
        return 1
    print(f"group-split: deploy refused ({refusal[:220]}...); verify failed only "
          f"test_iommu_groups_whole[{GUEST}]: {json.dumps(group.splitlines()[0][:200])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
