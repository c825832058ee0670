"""Boot drop-ins (gpuinfra.units): order and a bounded restart; unit names checked."""

from __future__ import annotations

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.units import boot_dropin, dropin_path


def test_dropin_orders_pulls_in_and_bounds_restarts():
    text = boot_dropin("munged first", ("munge.service", "network-online.target"),
                       ("munge.service",))
    assert text.splitlines()[1:] == [
        "[Unit]", "# munged first", "After=munge.service network-online.target",
        "Wants=munge.service", "StartLimitIntervalSec=600", "StartLimitBurst=30", "",
        "[Service]",
        "# Restarted when it fails (a dependency not ready yet), a bounded number of",
        "# times.", "Restart=on-failure", "RestartSec=10"]
    assert dropin_path("slurmctld.service") == \
        "/etc/systemd/system/slurmctld.service.d/gpuinfra-boot.conf"


@pytest.mark.parametrize("unit", ["munge", "x.service\nExecStart=/bin/sh", "../x.service", ""])
def test_a_unit_name_that_is_not_one_is_refused(unit):
    with pytest.raises(GpuinfraError):
        boot_dropin("why", (unit,))
