"""No driver change under running GPU processes (issue 26, item 4): the compute process parser,
the processes per GPU, and the rule (gpuinfra.driverchange).

The process rows are real: tests/fixtures/compute-apps (TensorFlowOnSpark issue 146, two
processes on one GPU). That capture ran a wider query (a header and a used-memory column); its
rows' first three columns are what the project's query prints, and the tests read them so (no
capture of the project's own query with a process running exists: see the folder's INDEX.md).
The -L lines and package versions are the repository's own (knowledge tables, plan fixtures).
"""

from __future__ import annotations

import pytest

from gpuinfra.driverchange import (
    NAMED,
    OVERRIDE,
    GpuProcess,
    PackageChange,
    driver_change_refusal,
    gpu_processes,
    package_changes,
    unreadable_refusal,
)
from gpuinfra.errors import ParseError
from gpuinfra.knowledge.packages import DRIVER_VERSIONS, driver_packages
from gpuinfra.parsers.processes import COMPUTE_APPS_QUERY, ComputeApp, parse_compute_apps
from gpuinfra.sharing.migplan import STATE_COMMAND, compute_processes, node_state
from tests.conftest import REPO

CAPTURE = (REPO / "tests" / "fixtures" / "compute-apps" /
           "tensorflowonspark-issue146-1-gpu-2-python-processes-csv-used-memory.txt")
UUID = "GPU-79610d46-faa4-d4b6-c33b-5112be24ce61"  # the capture's GPU
OTHER = "GPU-11111111-1111-1111-1111-111111111111"


def captured_rows() -> str:
    """The capture's rows as the project's query prints them: no header, three columns."""
    header, *rows = CAPTURE.read_text().splitlines()
    assert header == "gpu_uuid, pid, process_name, used_gpu_memory [MiB]"
    return "\n".join(row.rsplit(", ", 1)[0] for row in rows) + "\n"


def sections(apps: str = "", listing: str | None = None) -> dict[str, str]:
    if listing is None:
        listing = (f"GPU 0: NVIDIA H100 PCIe (UUID: {UUID})\n"
                   f"GPU 1: NVIDIA H100 PCIe (UUID: {OTHER})")
    return {"list": listing, "mode": "", "lgi": "", "lci": "", "apps": apps}


# ----------------------------------------------------------------------------- the parser

def test_the_captured_rows_are_read_with_full_path_names():
    assert parse_compute_apps(captured_rows()) == [
        ComputeApp(UUID, 4910, "/usr/bin/python"), ComputeApp(UUID, 4911, "/usr/bin/python")]


def test_no_process_is_no_output():
    assert parse_compute_apps("") == []
    assert parse_compute_apps("\n") == []
    assert parse_compute_apps("No running processes found\n") == []


def test_a_name_keeps_its_spaces_and_commas():
    (app,) = parse_compute_apps(f"{UUID}, 7, /opt/my app/serve, v2\n")
    assert app.name == "/opt/my app/serve, v2" and str(app) == "7 /opt/my app/serve, v2"


@pytest.mark.parametrize("text", [
    CAPTURE.read_text(),  # the header of the wider query: not what the role runs
    "Failed to initialize NVML: Driver/library version mismatch\n",
    f"{UUID}, [N/A], python\n",
    "4910, /usr/bin/python, 246\n",  # --query-compute-apps=pid,... : another query
])
def test_anything_but_a_row_is_refused_naming_the_line(text):
    """A process the parser cannot read must not pass as no process."""
    with pytest.raises(ParseError, match=r"query-compute-apps.*line 1"):
        parse_compute_apps(text)


def test_a_huge_line_is_a_short_parse_error():
    with pytest.raises(ParseError) as caught:
        parse_compute_apps(f"{UUID}, 1, " + "x" * 100_000)
    assert len(str(caught.value)) < 500


def test_the_mig_state_command_runs_the_query_the_parser_reads():
    assert COMPUTE_APPS_QUERY in STATE_COMMAND


# ----------------------------------------------------------------------------- per GPU

def test_processes_get_their_gpu_from_the_list():
    owned = compute_processes(sections(captured_rows()))
    assert [(index, app.pid) for index, app in owned] == [(0, 4910), (0, 4911)]
    assert [str(p) for p in gpu_processes(owned)] == [
        f"pid 4910 /usr/bin/python on GPU 0 ({UUID})",
        f"pid 4911 /usr/bin/python on GPU 0 ({UUID})"]


def test_a_process_on_a_gpu_the_list_lacks_is_still_counted_by_its_uuid():
    apps = "GPU-22222222-2222-2222-2222-222222222222, 99, /usr/bin/python\n"
    (process,) = gpu_processes(compute_processes(sections(apps)))
    assert process.gpu == "GPU-22222222-2222-2222-2222-222222222222"


def test_the_mig_plan_reads_the_same_processes():
    (gpu0, gpu1) = node_state(sections(captured_rows()))
    assert gpu0.processes == ("4910 /usr/bin/python", "4911 /usr/bin/python")
    assert gpu1.processes == ()


@pytest.mark.parametrize("listing", [
    "",  # no nvidia-smi at all: a first install
    # installed, not loaded yet (before the first reboot): nvidia-smi prints this on stdout
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
    "that the latest NVIDIA driver is installed and running.",
])
def test_no_driver_answering_means_no_process(listing):
    assert compute_processes(sections(listing, listing=listing)) == []


# ----------------------------------------------------------------------------- the change

PINNED_535 = driver_packages("ubuntu-24.04", "535", DRIVER_VERSIONS[("ubuntu-24.04", "535")])
PINNED_570 = driver_packages("ubuntu-24.04", "570", DRIVER_VERSIONS[("ubuntu-24.04", "570")])
INSTALLED_535 = {name: [version] for name, version in PINNED_535.packages.items()}


def test_the_installed_pin_changes_nothing():
    assert package_changes(PINNED_535.packages, INSTALLED_535) == ()


def test_a_branch_change_installs_packages_not_installed_yet():
    changes = package_changes(PINNED_570.packages, INSTALLED_535)
    assert [c.name for c in changes] == list(PINNED_570.packages)
    assert all(c.installed == () for c in changes)
    assert str(changes[0]).endswith("(now: not installed)")


def test_a_version_change_names_the_version_installed():
    older = {name: ["535.288.01-0ubuntu0.24.04.1"] for name in PINNED_535.packages}
    changes = package_changes(PINNED_535.packages, older)
    assert len(changes) == 3
    assert changes[0].installed == ("535.288.01-0ubuntu0.24.04.1",)


# ----------------------------------------------------------------------------- the rule

BUSY = gpu_processes(compute_processes(sections(captured_rows())))
CHANGE = package_changes(PINNED_570.packages, INSTALLED_535)


def test_a_change_under_processes_is_refused_naming_host_processes_why_and_fix():
    refusal = driver_change_refusal("gpu01.example", CHANGE, BUSY, node_name="gpu01",
                                    schedulers=("slurm",))
    assert refusal is not None
    assert refusal.startswith("nvidia_driver: gpu01.example: not changing the NVIDIA driver "
                              "while 2 GPU process(es) run: ")
    assert f"pid 4910 /usr/bin/python on GPU 0 ({UUID}); pid 4911" in refusal
    headless = "nvidia-headless-570-server"
    assert f"would install {headless} {PINNED_570.packages[headless]} (now: not installed)" \
        in refusal
    assert "kernel module stays loaded" in refusal and "version mismatch" in refusal
    assert 'scontrol update nodename=gpu01 state=drain reason="driver change"' in refusal
    assert f"set {OVERRIDE} = True for this host" in refusal
    assert refusal.endswith("The driver on gpu01.example was left as it is")


@pytest.mark.parametrize(("schedulers", "words"), [
    (("kubernetes",), "kubectl drain gpu01 --ignore-daemonsets"),
    (("slurm", "kubernetes"), "state=drain reason=\"driver change\" and kubectl drain gpu01"),
    ((), "Stop those processes (or wait for them to end)"),
])
def test_the_fix_drains_the_nodes_schedulers(schedulers, words):
    refusal = driver_change_refusal("gpu01", CHANGE, BUSY, schedulers=schedulers)
    assert refusal is not None and words in refusal


def test_no_change_is_never_refused_whatever_runs():
    assert driver_change_refusal("gpu01", (), BUSY) is None


def test_a_first_install_is_never_refused():
    processes = gpu_processes(compute_processes(sections(listing="")))
    assert driver_change_refusal("gpu01", CHANGE, processes) is None


def test_the_override_lets_the_change_go():
    assert driver_change_refusal("gpu01", CHANGE, BUSY, override=True) is None


def test_an_unreadable_process_list_is_a_refusal_too():
    with pytest.raises(ParseError) as caught:
        compute_processes(sections(f"{UUID}, [N/A], python\n"))
    refusal = unreadable_refusal("gpu01", caught.value)
    assert "GPU processes running there cannot be read" in refusal
    assert COMPUTE_APPS_QUERY in refusal and OVERRIDE in refusal


def test_a_long_list_is_named_in_part_and_counted():
    many = tuple(GpuProcess(pid, "/usr/bin/python", "GPU 0") for pid in range(NAMED + 5))
    changes = (PackageChange("nvidia-smi", "535.261.03-1"),)
    refusal = driver_change_refusal("gpu01", changes, many)
    assert refusal is not None and "; and 5 more." in refusal
    assert f"pid {NAMED - 1} " in refusal and f"pid {NAMED} " not in refusal
