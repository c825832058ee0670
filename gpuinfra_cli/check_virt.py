"""`gpuinfra check KIND FILE`: VFIO and Kubernetes captures judged from a file.

    gpuinfra check iommu-groups FILE [--device ADDR]... [--id VVVV:DDDD]...
    gpuinfra check lspci-nnk FILE    [--device ADDR]... [--id VVVV:DDDD]...
    gpuinfra check virsh-hostdev FILE [--device ADDR]...
    gpuinfra check vm-topo FILE --profile P --gpus N [--model M]
    gpuinfra check describe-node FILE [--expect nvidia.com/gpu=8]... [--gpus N]
    gpuinfra check gpu-pods FILE [--node NAME]
    gpuinfra check pod-runtime FILE [--nvidia-default]
    gpuinfra check plugin-log FILE

Each takes the expectation from the spec instead with ``--inventory FILE --host NAME`` (and
``--vm NAME`` for a VM's kinds). The library judges (gpuinfra/captures/): the same code as the
verify suite. Exit 0 pass, 1 a failure, 2 unusable input, 3 no pass: the capture is cut
("incomplete: N complete blocks judged, no failure found") or holds nothing known ("no
verdict").
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any

from gpuinfra.captures import CaptureVerdict
from gpuinfra.errors import GpuinfraError
from gpuinfra_cli.inputs import read_capture
from gpuinfra_cli.output import capture_envelope, render_captures, wrap

EXIT_OK, EXIT_FAIL, EXIT_INCOMPLETE = 0, 1, 3
_PCI_ID = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{4}")


def add_kinds(check: argparse.ArgumentParser) -> None:
    """Register the VFIO and Kubernetes kinds under `gpuinfra check` (called from
    commands.add_check); the NVLink options of `check` itself keep working without a kind."""
    kinds = _kinds(check)
    for name, (helps, add, run) in KINDS.items():
        p = kinds.add_parser(name, help=helps, description=f"{helps}. Exit 0 pass, 1 a "
                             "failure, 2 unusable input, 3 incomplete capture or no verdict.")
        p.add_argument("file", help="the capture ('-' for standard input)")
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                       help="print host, kind, expectation, verdict and findings as JSON")
        p.add_argument("--host", help="the node the capture came from (with --inventory: "
                       "whose spec is the expectation)")
        p.add_argument("--inventory", metavar="FILE", help="judge against this site's spec "
                       "(needs --host)")
        p.add_argument("--group-data", metavar="DIR", help="the site's group_data folder")
        add(p)
        p.set_defaults(func=_runner(run))


def _kinds(check: argparse.ArgumentParser) -> Any:
    """The KIND sub-commands of `check` (made once, whichever module registers first), and
    --profile/--gpus made optional at parse time (required again when no KIND is given)."""
    for action in check._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    nvlink_run = check.get_default("func")
    required = [a for a in check._actions if a.required]
    for action in required:
        action.required = False

    def run_nvlink(args: argparse.Namespace) -> int:
        missing = [a.option_strings[0] for a in required if getattr(args, a.dest) is None]
        if missing:
            raise GpuinfraError(f"check: {', '.join(missing)} required without a KIND (the "
                                "NVLink checks), or give a KIND: gpuinfra check --help")
        return int(nvlink_run(args))

    check.set_defaults(func=run_nvlink)
    return check.add_subparsers(dest="kind", metavar="KIND", required=False,
                                title="capture kinds (gpuinfra check KIND --help)")


def _runner(run: Callable[[argparse.Namespace, str], CaptureVerdict]
            ) -> Callable[[argparse.Namespace], int]:
    def go(args: argparse.Namespace) -> int:
        text = read_capture(args.file, args.kind)
        verdict = run(args, text)
        if getattr(args, "json", False):
            expect = verdict.expectation
            print(json.dumps(capture_envelope([verdict], args.host, [args.file],
                                              expect.get("profile"), expect.get("model")),
                             indent=2))
        else:
            print(render_verdict(verdict))
        if verdict.failed:
            return EXIT_FAIL
        return EXIT_OK if verdict.verdict == "pass" else EXIT_INCOMPLETE
    return go


def render_verdict(verdict: CaptureVerdict) -> str:
    head = f"{verdict.host or 'node'}: {verdict.kind}"
    expected = "; ".join(f"{k}: {v}" for k, v in verdict.expectation.items())
    return "\n".join([render_captures([verdict], head),
                      *wrap(f"note  expected: {expected}", 6),
                      f"verdict: {verdict.verdict}"])


# ---------------------------------------------------------------------------- the spec

def _node(args: argparse.Namespace) -> tuple[Any, Any] | None:
    """(NodeSpec, ClusterSpec) of --host in --inventory, None without --inventory."""
    if not args.inventory:
        return None
    if not args.host:
        raise GpuinfraError("--inventory needs --host: the node whose spec is the expectation")
    from gpuinfra_deploy.run.site import validated_site

    site = validated_site(args.inventory, args.group_data)
    if site is None:
        raise GpuinfraError(f"{args.inventory}: the spec is invalid (listed above)")
    spec = site[1]
    for node in spec.nodes:
        if args.host in (node.name, node.short_name):
            return node, spec
    raise GpuinfraError(f"{args.host}: no such host in {args.inventory}")


def _vm(args: argparse.Namespace, node: Any) -> Any:
    vms = node.vfio.vms
    if args.vm:
        for vm in vms:
            if vm.name == args.vm:
                return vm
        raise GpuinfraError(f"{args.vm}: no such VM of {node.name} (spec: "
                            f"{', '.join(v.name for v in vms) or 'none'})")
    if len(vms) != 1:
        raise GpuinfraError(f"{node.name} has {len(vms)} VMs in the spec: name one with --vm")
    return vms[0]


# ---------------------------------------------------------------------------- VFIO kinds

def _add_devices(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", action="append", default=[], metavar="ADDR",
                   help="a PCI function meant for a VM (repeatable; its card's other "
                   "functions go with it); default: every NVIDIA display function listed")
    p.add_argument("--id", action="append", default=[], metavar="VVVV:DDDD",
                   help="a vendor:device ID meant for VMs (repeatable)")


def _devices(args: argparse.Namespace) -> tuple[list[str], list[str], str] | None:
    from gpuinfra.vfio import normalize_address

    found = _node(args)
    if found is not None:
        node = found[0]
        return list(node.vfio.addresses), list(node.vfio.ids), \
            f"spec of {node.name} (vfio_devices)"
    if not (args.device or args.id):
        return None
    bad = [i for i in args.id if not _PCI_ID.fullmatch(i)]
    if bad:
        raise GpuinfraError(f"--id {bad[0]!r}: expected VVVV:DDDD, e.g. 10de:2331")
    return [normalize_address(d) for d in args.device], [i.lower() for i in args.id], \
        "--device/--id"


def _run_groups(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.vfio import expectation_of, judge_iommu_groups
    from gpuinfra.parsers.iommu import parse_pci_listing

    listing = parse_pci_listing(text)
    given = _devices(args)
    addresses, expectation = expectation_of(*(given or ([], [], "")), listing=None
                                            if given else listing)
    ids = given[1] if given else []
    return judge_iommu_groups(listing, addresses, ids, args.host, expectation,
                              cards_apart=not given)


def _run_binding(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.vfio import expectation_of, judge_binding
    from gpuinfra.parsers.iommu import parse_pci_listing

    listing = parse_pci_listing(text)
    given = _devices(args)
    addresses, expectation = expectation_of(*(given or ([], [], "")), listing=None
                                            if given else listing)
    ids = given[1] if given else []
    return judge_binding(listing, addresses, ids, args.host, expectation)


def _add_vm(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vm", help="the VM of the spec (with --inventory; default: the host's "
                   "only VM)")


def _add_hostdev(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", action="append", default=[], metavar="ADDR",
                   help="a host PCI function (or card) the VM must get (repeatable)")
    _add_vm(p)


def _run_hostdev(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.vfio import judge_hostdevs
    from gpuinfra.parsers.libvirt import parse_hostdevs
    from gpuinfra.vfio import normalize_address

    capture = parse_hostdevs(text)
    found = _node(args)
    if found is not None:
        vm = _vm(args, found[0])
        devices = [normalize_address(d) for d in vm.devices]
        expectation = {"devices": devices, "from": f"spec of {found[0].name}, VM {vm.name}"}
    elif args.device:
        devices = [normalize_address(d) for d in args.device]
        expectation = {"devices": devices, "from": "--device"}
    else:
        raise GpuinfraError("virsh-hostdev: give the VM's devices (--device ADDR, or "
                            "--inventory with --host and --vm)")
    return judge_hostdevs(capture, devices, args.host, expectation)


def _add_vm_topo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", help="topology the VM's GPUs must show (e.g. bridged-pairs, "
                   "pcie-only)")
    p.add_argument("--gpus", type=int, help="GPUs passed to the VM")
    p.add_argument("--model", help="GPU model (link counts)")
    _add_vm(p)


def _run_vm_topo(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.knowledge.lookup import require_model, require_profile
    from gpuinfra.parsers.topo import parse_topo
    from gpuinfra.verdicts import check_system
    from gpuinfra.vfio import slot_of

    found = _node(args)
    if found is not None:
        node = found[0]
        vm = _vm(args, node)
        cards = list(dict.fromkeys(slot_of(d.lower()) for d in vm.devices))
        linked = any(set(g.gpus) <= set(vm.devices) for g in node.vfio.nvlink)
        profile, gpus = ("bridged-pairs" if linked else "pcie-only"), len(cards)
        model = node.gpus.model.key if node.gpus else None
        source = f"spec of {node.name}, VM {vm.name}"
    else:
        if not (args.profile and args.gpus):
            raise GpuinfraError("vm-topo: give --profile and --gpus (or --inventory, --host "
                                "and --vm)")
        profile, gpus, model, source = args.profile, args.gpus, args.model, "--profile/--gpus"
    require_profile(profile)
    if model:
        require_model(model)
    topo = parse_topo(text)
    findings = check_system(profile, gpus, model, None, topo=topo)
    verdict = CaptureVerdict("vm-topo", args.host, {"profile": profile, "gpus": gpus,
                                                    "model": model, "from": source},
                             findings=list(findings), blocks=len(topo.gpus))
    return verdict


# ---------------------------------------------------------------------------- Kubernetes kinds

def _add_describe(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expect", action="append", default=[], metavar="RESOURCE=N",
                   help="an nvidia.com/* count the node must have allocatable (repeatable)")
    p.add_argument("--gpus", type=int, help="shorthand for --expect nvidia.com/gpu=N")


def _run_describe(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.kubernetes import judge_describe_node
    from gpuinfra.kubernetes.deviceplugin import expected_resources
    from gpuinfra.parsers.kubectl_text import parse_describe_node

    node = parse_describe_node(text)
    found = _node(args)
    expected: dict[str, int] | None
    if found is not None:
        expected = expected_resources(found[0], found[1].mig_strategy)
        source = f"spec of {found[0].name}"
    elif args.expect or args.gpus is not None:
        expected = {} if args.gpus is None else {"nvidia.com/gpu": args.gpus}
        for item in args.expect:
            key, sep, value = item.partition("=")
            if not sep or not key.startswith("nvidia.com/") or not value.isdigit():
                raise GpuinfraError(f"--expect {item!r}: expected nvidia.com/RESOURCE=N")
            expected[key] = int(value)
        source = "--expect/--gpus"
    else:
        expected, source = None, "none given: capacity, allocatable and labels judged alone"
    expectation = {"allocatable": expected, "from": source}
    return judge_describe_node(node, expected, args.host, expectation)


def _add_pods(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node", help="judge only the pods on this node (needs `-o wide`)")


def _run_pods(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.kubernetes import judge_pods
    from gpuinfra.parsers.kubectl_text import parse_pods_table

    table = parse_pods_table(text)
    expectation = {"pods": "every pod Running and ready (or Completed); a device plugin pod",
                   "node": args.node}
    return judge_pods(table, args.node, args.host, expectation)


def _run_plugin_log(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.kubernetes import judge_plugin_log, parse_plugin_log

    return judge_plugin_log(parse_plugin_log(text), args.host)


def _add_runtime(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nvidia-default", action="store_true",
                   help="containerd's default runtime is nvidia on these nodes "
                        "(container_toolkit_set_default): a GPU pod may have no runtime class")


def _run_runtime(args: argparse.Namespace, text: str) -> CaptureVerdict:
    from gpuinfra.captures.kubernetes import judge_pod_runtime
    from gpuinfra.parsers.kubectl_text import parse_pod_specs

    specs = parse_pod_specs(text)
    return judge_pod_runtime(specs.pods, specs.cuts, args.host, args.nvidia_default)


def _nothing(p: argparse.ArgumentParser) -> None:
    return None


KINDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None],
                       Callable[[argparse.Namespace, str], CaptureVerdict]]] = {
    "iommu-groups": ("an IOMMU group listing (the /sys/kernel/iommu_groups script with "
                     "`lspci -nns`, or `lspci -nnks` per group): the VM's devices alone in "
                     "their groups", _add_devices, _run_groups),
    "lspci-nnk": ("`lspci -nnk`: the VM's devices bound to vfio-pci", _add_devices,
                  _run_binding),
    "virsh-hostdev": ("`virsh dumpxml VM` (whole or its hostdev sections): the VM passes its "
                      "cards, no other device", _add_hostdev, _run_hostdev),
    "vm-topo": ("`nvidia-smi topo -m` inside a VM: its GPUs and their NVLinks",
                _add_vm_topo, _run_vm_topo),
    "describe-node": ("`kubectl describe node`: allocatable GPUs, unhealthy GPUs, GFD labels",
                      _add_describe, _run_describe),
    "gpu-pods": ("`kubectl get pods` of the GPU Operator / device plugin namespace: every pod "
                 "running ready", _add_pods, _run_pods),
    "pod-runtime": ("`kubectl get pods -o yaml` (or json) or `kubectl describe pod` of GPU "
                    "pods (the device plugin's): each runs under the NVIDIA runtime",
                    _add_runtime, _run_runtime),
    "plugin-log": ("a device plugin's log: each known failure message with its cause; an "
                   "unknown log is no verdict", _nothing, _run_plugin_log),
}
