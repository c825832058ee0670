"""`gpuinfra check` for the RDMA and kernel captures a node's operator pastes (issue 24):
`ibstat`, `ibv_devinfo`, `show_gids`, `mlxconfig query`, `lspci -vvv`, `lsmod`, `dmesg`,
`/proc/cmdline`.

    gpuinfra check --ibstat ibstat.txt --inventory inventory/site.py --host gpu1
    gpuinfra check --ibstat ibstat.txt --nic mlx5_0:rate=400 --nic mlx5_1:rate=400 [--json]

The expectation comes from the spec (``--inventory`` and ``--host``: the same rules the roles
deploy with and the verify suite judges with) or, for a capture from elsewhere, from options.
Exit 0: every capture passes; 1: a failure; 2: unusable input; 3: no failure, but a capture
is incomplete (cut, filtered) or shows nothing to judge: it cannot pass.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from gpuinfra.captures import FAIL, PASS, CaptureVerdict
from gpuinfra.errors import GpuinfraError
from gpuinfra.rdma.node import GpuDirect, gpudirect_path
from gpuinfra.spec.model import RdmaNic
from gpuinfra_cli.inputs import one_stdin, read_capture, spec_node
from gpuinfra_cli.output import capture_envelope, render_captures

EXIT_OK, EXIT_FAIL, EXIT_NOT_PASSED = 0, 1, 3

# option -> the parse KIND of its capture (gpuinfra.parsers), where the two names differ
PARSE_KINDS = {"ibv_devinfo": "ibv", "show_gids": "show-gids", "lspci_vvv": "lspci-vvv"}
# option -> (the command whose output it takes, help)
KINDS: dict[str, str] = {
    "ibstat": "`ibstat` (port state, physical state, rate, link layer)",
    "ibv_devinfo": "`ibv_devinfo` (port state, link layer)",
    "show_gids": "`show_gids` (the RoCE GID index: present, v2, on its netdev)",
    "mlxconfig": "`mlxconfig`/`mstconfig -d DEV [-e] query` of one NIC, or a loop over several "
                 "(ATS_ENABLED)",
    "lspci_vvv": "`lspci -vvv` whole, -s per device, or grepped (ATSCtl, ACSCtl)",
    "lsmod": "`lsmod`, whole or grepped (nvidia_peermem for GPUDirect RDMA)",
    "dmesg": "`dmesg`/`journalctl -k`, whole or grepped (IOMMU, nvidia_peermem, XIDs)",
    "cmdline": "`cat /proc/cmdline` (the IOMMU kernel arguments)",
}
HELP = ("host captures (RDMA and kernel); the expectation from --inventory/--host, or from "
        "--nic, --gpudirect, --iommu, --acs-off, --hypervisor, --rdma, --cpu-vendor")


def add_to(p: argparse.ArgumentParser) -> None:
    """Register the host kinds on the `check` parser (its one hook)."""
    group = p.add_argument_group(HELP)
    for kind, what in KINDS.items():
        group.add_argument(f"--{kind.replace('_', '-')}", dest=f"host_{kind}", metavar="FILE",
                           help=what)
    group.add_argument("--inventory", help="the site's inventory: the expectation is --host's "
                       "spec")
    group.add_argument("--host", help="the host the captures are from (with --inventory)")
    group.add_argument("--group-data", metavar="DIR", help="the site's group_data folder")
    group.add_argument("--no-group-data", action="store_true", help="the site has none")
    group.add_argument("--nic", action="append", default=[], metavar="NAME[:KEY=VALUE,...]",
                       help="an expected NIC without a spec (repeatable); keys: pci, ats "
                       "(yes/no), link_layer (infiniband/ethernet), rate (Gb/s), gid_index, "
                       "netdev; e.g. mlx5_0:link_layer=ethernet,rate=400,gid_index=3")
    group.add_argument("--device", metavar="NAME", help="which --nic a one-device capture "
                       "(mlxconfig) is of, when several are expected (a loop over several "
                       "NICs is matched by each --nic's pci=)")
    group.add_argument("--gpudirect", choices=("peermem", "dma-buf", "none"),
                       help="the node's GPUDirect RDMA path (lsmod)")
    group.add_argument("--iommu", choices=("on", "passthrough"), help="what dmesg must show: "
                       "on (a VFIO hypervisor) or passthrough (an RDMA node, iommu=pt)")
    group.add_argument("--acs-off", action="store_true", help="lspci -vvv: ACS must be off "
                       "on the bridges shown (or on --bridge ones)")
    group.add_argument("--bridge", action="append", default=[], metavar="BDF",
                       help="a GPU-NIC bridge whose ACS must be off (repeatable)")
    group.add_argument("--hypervisor", action="store_true", help="cmdline: a VFIO host")
    group.add_argument("--rdma", action="store_true", help="cmdline: a host with real RDMA NICs")
    group.add_argument("--cpu-vendor", choices=("GenuineIntel", "AuthenticAMD"),
                       help="cmdline: the CPU vendor (the IOMMU argument differs)")
    p.epilog = ("kinds: nvidia-smi captures (--topo, --p2p, --nvlink, --smi-q: need --profile "
                "and --gpus) and host captures: " + ", ".join(
                    f"--{k.replace('_', '-')}" for k in KINDS) + ". Exit 3: no failure, but a "
                "capture is incomplete or shows nothing to judge.")
    for action in p._actions:
        if action.dest in ("profile", "gpus"):
            action.required = False
    nvidia_smi = p.get_default("func")
    p.set_defaults(func=lambda args: dispatch(args, nvidia_smi))


def dispatch(args: argparse.Namespace, nvidia_smi: Callable[[argparse.Namespace], int]) -> int:
    """Host captures here; nvidia-smi ones to the existing check (which needs its options)."""
    files = {k: getattr(args, f"host_{k}") for k in KINDS if getattr(args, f"host_{k}")}
    if not files:
        if args.inventory:
            _gpus_from_spec(args)
        if args.profile is None or args.gpus is None:
            raise GpuinfraError("nvidia-smi captures need --profile and --gpus; or give a host "
                                "capture: " + ", ".join(f"--{k.replace('_', '-')}"
                                                        for k in KINDS))
        return nvidia_smi(args)
    if args.topo or args.p2p or args.nvlink or args.smi_q:
        raise GpuinfraError("check nvidia-smi captures and host captures in separate runs")
    one_stdin([(f"--{kind.replace('_', '-')}", path) for kind, path in files.items()])
    texts = {kind: read_capture(path, PARSE_KINDS.get(kind, kind)) for kind, path in files.items()}
    expect = expectation(args)
    verdicts = [judge(kind, text, expect) for kind, text in texts.items()]
    if args.json:
        print(json.dumps(capture_envelope(verdicts, args.host, list(files.values())), indent=2))
    else:
        print(render_captures(verdicts, f"{expect['host']}: {', '.join(files)}"))
    if any(v.verdict == FAIL for v in verdicts):
        return EXIT_FAIL
    return EXIT_OK if all(v.verdict == PASS for v in verdicts) else EXIT_NOT_PASSED


def _gpus_from_spec(args: argparse.Namespace) -> None:
    """The nvidia-smi captures' expectation (profile, GPU count, model) from --host's spec;
    an option given beside it must agree with the spec."""
    node, _ = spec_node(args)
    if node.gpus is None:
        raise GpuinfraError(f"{node.name}: no GPUs in the spec of {args.inventory} (no "
                            "gpu_model/gpu_count): nothing to judge nvidia-smi captures against")
    spec = {"profile": node.gpus.topology.name, "gpus": node.gpus.count,
            "model": node.gpus.model.key}
    for key, value in spec.items():
        given = getattr(args, key)
        if given is not None and str(given) != str(value):
            raise GpuinfraError(f"--{key} {given}: the spec of {node.name} in {args.inventory} "
                                f"says {value}; fix: leave --{key} out (the spec is the "
                                "expectation), or check without --inventory")
        setattr(args, key, value)
    args.expectation_from = f"the spec of {node.name} in {args.inventory}"


def expectation(args: argparse.Namespace) -> dict[str, Any]:
    """What the host must show: from its spec, or from the options."""
    if args.inventory:
        return _from_spec(args)
    nics = [_nic(spec) for spec in args.nic]
    gpudirect = {"peermem": GpuDirect("peermem", "given with --gpudirect"),
                 "dma-buf": GpuDirect("dma-buf", "given with --gpudirect"),
                 "none": GpuDirect("none", "given with --gpudirect")}.get(args.gpudirect or "")
    return {"host": args.host or "-", "nics": nics, "gpudirect": gpudirect,
            "iommu": args.iommu, "acs_off": args.acs_off, "bridges": args.bridge,
            "hypervisor": args.hypervisor, "rdma": args.rdma or bool(nics),
            "cpu_vendor": args.cpu_vendor, "device": args.device, "drain_xids": None}


def _from_spec(args: argparse.Namespace) -> dict[str, Any]:
    from gpuinfra.knowledge.packages import open_modules_for
    from gpuinfra.knowledge.xids import drain_xids

    node, spec = spec_node(args)
    real_rdma = bool(node.rdma_nics) and not node.soft_roce
    gpudirect = None
    if node.gpus is not None and node.rdma_nics:
        gpudirect = gpudirect_path(spec.rdma_stack,
                                   open_modules_for(node.gpus.model,
                                                    node.settings["nvidia_driver_open_modules"]),
                                   node.settings["rdma_peermem"])
    iommu = "on" if node.vfio is not None else ("passthrough" if real_rdma else None)
    acs_off = bool(node.gpus is not None and real_rdma and node.vfio is None
                   and node.settings.get("rdma_acs_disable"))
    return {"host": node.name, "nics": list(node.rdma_nics), "gpudirect": gpudirect,
            "iommu": args.iommu or iommu, "acs_off": args.acs_off or acs_off,
            "bridges": args.bridge, "hypervisor": node.vfio is not None, "rdma": real_rdma,
            "cpu_vendor": args.cpu_vendor, "device": args.device,
            "drain_xids": drain_xids(node.settings.get("health_xid_policy") or {})}


def _nic(spec: str) -> RdmaNic:
    """``mlx5_0:link_layer=ethernet,rate=400`` -> RdmaNic; GpuinfraError naming the bad key."""
    name, _, rest = spec.partition(":")
    fields: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            if key == "rate":
                fields["rate_gbps"] = float(value)
            elif key == "gid_index":
                fields["gid_index"] = int(value)
            elif key == "ats":
                fields["ats"] = {"yes": True, "true": True, "no": False, "false": False}[value]
            elif key == "link_layer" and value in ("infiniband", "ethernet"):
                fields["link_layer"] = value
            elif key in ("pci", "netdev"):
                fields[key] = value.lower() if key == "pci" else value
            else:
                raise ValueError
        except (ValueError, KeyError):
            raise GpuinfraError(f"--nic {spec}: {item!r} is not KEY=VALUE with a key of pci, "
                                "ats (yes/no), link_layer (infiniband/ethernet), rate, "
                                "gid_index, netdev") from None
    if not name:
        raise GpuinfraError(f"--nic {spec}: no NIC name before the ':'")
    return RdmaNic(name, **fields)


def judge(kind: str, text: str, expect: dict[str, Any]) -> CaptureVerdict:
    """One capture through its library judge."""
    from gpuinfra.captures import kernel, rdma

    host, nics = expect["host"], expect["nics"]
    if kind == "ibstat":
        return rdma.judge_ibstat(text, nics, host)
    if kind == "ibv_devinfo":
        return rdma.judge_ibv_devinfo(text, nics, host)
    if kind == "show_gids":
        return rdma.judge_show_gids(text, nics, host)
    if kind == "mlxconfig":
        if not nics:
            raise GpuinfraError("--mlxconfig: no NIC expected: give --nic NAME:ats=yes|no (or "
                                "--inventory and --host)")
        return rdma.judge_mlxconfig(text, nics, host, expect["device"])
    if kind == "lspci_vvv":
        return rdma.judge_lspci_vvv(text, nics, expect["acs_off"], expect["bridges"], host)
    if kind == "lsmod":
        if expect["gpudirect"] is None:
            return CaptureVerdict("lsmod", host, {"gpudirect": None}, judged=False,
                                  sentences=True)
        return kernel.judge_lsmod(text, expect["gpudirect"], host)
    if kind == "dmesg":
        return kernel.judge_dmesg(text, expect["iommu"], host, expect["drain_xids"])
    return kernel.judge_cmdline(text, expect["hypervisor"], expect["rdma"],
                                expect["cpu_vendor"], host)


