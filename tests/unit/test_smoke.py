"""The training smoke job (gpuinfra.jobs.smoke) and the judge of its log
(gpuinfra.jobs.smoke_verdict).

No real smoke-job log exists in tests/fixtures yet, so the logs here are CONSTRUCTED: the batch
script's own lines as :func:`sbatch_script` prints them, each rank's line as the training script
prints it, torchrun's failure report in the layout of torch.distributed.elastic's ChildFailedError
(pytorch.org/docs/stable/elastic/errors.html), srun's error lines as Slurm 22.05 prints them.
"""

from __future__ import annotations

import ast
import json
import shlex
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.jobs.nccl_verdict import SOCKET_CAUSE
from gpuinfra.jobs.smoke import (
    K8sSettings,
    SmokeError,
    SmokePlan,
    SmokeSettings,
    indexed_job,
    sbatch_script,
    training_script,
)
from gpuinfra.jobs.smoke_verdict import (
    CRASH_CAUSE,
    MISSING_CAUSE,
    NEVER_JOINED_CAUSE,
    REPLICA_CAUSE,
    Expected,
    expected_from_log,
    judge_smoke,
    parse_smoke,
)
from gpuinfra.knowledge import kubernetes as k8s
from gpuinfra.knowledge.nccl import min_busbw
from tests.conftest import REPO

GLOO = SmokePlan("gpu", ("lab-worker1", "lab-worker2"), "gloo", 1, None)
HGX = SmokePlan("hgx", ("hgx01", "hgx02"), "nccl", 8, "h100-sxm5-80gb")


def job_lines(backend: str = "gloo", nodes: int = 2, procs: int = 1,
              hosts: tuple[str, ...] = ("lab-worker1", "lab-worker2")) -> list[str]:
    said = {"backend": backend, "container": None, "nodes": nodes, "partition": "gpu",
            "procs_per_node": procs, "world_size": nodes * procs}
    return [f"GPUINFRA-SMOKE-JOB {json.dumps(said, sort_keys=True)}",
            f"GPUINFRA-SMOKE-HOSTS {','.join(hosts)} endpoint {hosts[0]}:29500"]


def result(rank: int, host: str, world: int = 2, backend: str = "gloo", busbw: float = 0.9,
           nbytes: int = 64 * 1024**2, in_sync: bool = True) -> str:
    body = {"rank": rank, "world_size": world, "local_rank": 0, "host": host,
            "backend": backend, "device": "cpu", "torch": "1.13.1", "steps": 20,
            "step_ms": 3.2 + rank, "loss": 1.01, "replicas_in_sync": in_sync,
            "allreduce_bytes": nbytes, "allreduce_ms": 70.1, "algbw_gbytes_per_s": busbw,
            "busbw_gbytes_per_s": busbw}
    return f"GPUINFRA-SMOKE {json.dumps(body, sort_keys=True)}"


GOOD = "\n".join(job_lines() + [result(0, "lab-worker1"), result(1, "lab-worker2"),
                                "GPUINFRA-SMOKE-END srun exit 0"])

NEVER_JOINED = "\n".join(job_lines() + [
    "[W socket.cpp:401] [c10d] The server socket has failed to listen on any local network "
    "address.",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/torch/distributed/run.py", line 766, in main',
    "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    "srun: error: lab-worker1: task 0: Exited with exit code 1",
    "GPUINFRA-SMOKE-END srun exit 1",
])

CRASHED = "\n".join(job_lines() + [
    result(0, "lab-worker1"),
    "Traceback (most recent call last):",
    '  File "<string>", line 30, in <module>',
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by "
    "peer [10.89.0.11]:24010",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    "============================================================",
    "python3 FAILED",
    "------------------------------------------------------------",
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "------------------------------------------------------------",
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-05-01_10:00:00",
    "  host      : lab-worker2",
    "  rank      : 1 (local_rank: 0)",
    "  exitcode  : 1 (pid: 4242)",
    "  error_file: <N/A>",
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
    "============================================================",
    "srun: error: lab-worker2: task 1: Exited with exit code 1",
    "GPUINFRA-SMOKE-END srun exit 1",
])


def nccl_log(net: str, busbw: float) -> str:
    hosts = ("hgx01", "hgx02")
    lines = job_lines("nccl", 2, 8, hosts)
    lines += ["hgx01:1234:1300 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0"
              if net == "IB" else "hgx01:1234:1300 [0] NCCL INFO NET/IB : No device found.",
              f"hgx01:1234:1300 [0] NCCL INFO Using network {net}"]
    lines += [result(r, hosts[r // 8], 16, "nccl", busbw, 8 * 1024**3) for r in range(16)]
    return "\n".join(lines + ["GPUINFRA-SMOKE-END srun exit 0"])


def srun_argv(text: str) -> list[str]:
    """The srun command of the script as the shell splits it (the code spans lines)."""
    start = text.index("\nsrun ") + 1
    return shlex.split(text[start:text.index("\nstatus=$?", start)])


def by_check(findings, check):
    return [f for f in findings if f.check == check]


def failed(findings):
    return {(f.check, f.subject) for f in findings if f.failed}


# ---------------------------------------------------------------------------- the job

def test_training_script_is_python_and_prints_one_result_line():
    code = training_script("gloo", 1024)
    ast.parse(code)
    assert 'print("GPUINFRA-SMOKE " + json.dumps(result' in code
    assert "DistributedDataParallel" in code and "dist.all_reduce(tensor)" in code
    assert 'BACKEND, STEPS, WARMUP, NBYTES, ITERS = "gloo", 20, 3, 1024, 10' in code
    assert "'" not in code  # nothing for the shell's quoting to split


@pytest.mark.parametrize("backend", ["nccl", "gloo"])
def test_training_script_has_no_undefined_or_unused_names(tmp_path, backend):
    """No torch here to run it: pyflakes' checks (ruff F) catch a misspelt name before a job
    does."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff not in the virtual environment")
    path = tmp_path / "train.py"
    path.write_text(training_script(backend, 1024))
    found = subprocess.run([str(ruff), "check", "--isolated", "--select", "F,E9", str(path)],
                           capture_output=True, text=True, check=False)
    assert found.returncode == 0, found.stdout


@pytest.mark.parametrize("args", [("mpi", 1024), ("gloo", 3), ("gloo", 0)])
def test_training_script_refuses_bad_values(args):
    with pytest.raises(SmokeError):
        training_script(*args)


def test_gloo_sbatch_runs_torchrun_under_srun_with_slurms_rendezvous():
    text = sbatch_script(GLOO)
    lines = text.splitlines()
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert not any("--gres" in line or "--exclusive" in line for line in lines)
    assert 'GPUINFRA_SMOKE_HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste ' \
           "-sd, -)" in lines
    argv = srun_argv(text)
    inner = argv[argv.index("-c") + 1]
    for part in ("--nnodes=$SLURM_JOB_NUM_NODES", "--node_rank=$SLURM_NODEID",
                 "--rdzv_endpoint=$GPUINFRA_SMOKE_HEAD:29500", "--rdzv_backend=c10d",
                 "--nproc_per_node=1", "--rdzv_id=$SLURM_JOB_ID"):
        assert part in inner.split(), part
    assert argv[-1] == training_script("gloo", 64 * 1024**2)  # the code, as one argument
    assert "NCCL_DEBUG" not in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_nccl_sbatch_asks_for_the_gpus_and_rdma():
    text = sbatch_script(HGX, ib_hcas=["mlx5_0", "mlx5_1"], ib_gid_index=3)
    lines = text.splitlines()
    for line in ("#SBATCH --gres=gpu:h100-sxm5-80gb:8", "#SBATCH --exclusive",
                 "export NCCL_DEBUG=INFO  # the log names the transport (NET/IB or NET/Socket)",
                 "export NCCL_IB_HCA='=mlx5_0,mlx5_1'", "export NCCL_IB_GID_INDEX=3"):
        assert line in lines, line
    assert "--nproc_per_node=8" in text and '"nccl", 20, 3, 8589934592' in srun_argv(text)[-1]


def test_container_goes_to_srun_quoted():
    text = sbatch_script(GLOO, SmokeSettings(container="/var/lib/bundles/torch smoke"))
    srun = srun_argv(text)
    assert "--container=/var/lib/bundles/torch smoke" in srun
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


@pytest.mark.parametrize(("plan", "settings"), [
    (SmokePlan("gpu;id", ("n1",), "gloo", 1, None), SmokeSettings()),
    (SmokePlan("gpu", ("n1 n2",), "gloo", 1, None), SmokeSettings()),
    (GLOO, SmokeSettings(container="relative/bundle")),
    (GLOO, SmokeSettings(time_limit="$(reboot)")),
    (GLOO, SmokeSettings(python="python3\nreboot")),
])
def test_values_the_shell_could_misread_are_refused(plan, settings):
    with pytest.raises(SmokeError):
        sbatch_script(plan, settings)


# ---------------------------------------------------------------------------- the judge

def test_a_good_gloo_run_passes_every_check():
    log = parse_smoke(GOOD)
    findings = judge_smoke(log, expected_from_log(log))
    assert not failed(findings) and not [f for f in findings if f.severity == "warn"]
    assert {f.check for f in findings} == {"joined", "ranks", "replicas", "exit", "busbw",
                                           "step-time"}
    assert by_check(findings, "busbw")[0].observed.startswith("0.90 GB/s at 64 MiB")
    assert "median 4.20 ms over 20 steps (slowest rank: 1 on lab-worker2)" in \
        by_check(findings, "step-time")[0].observed


def test_a_node_that_never_joined_is_named_with_the_rendezvous_timeout():
    log = parse_smoke(NEVER_JOINED)
    findings = judge_smoke(log, expected_from_log(log))
    joined = {f.subject: f for f in by_check(findings, "joined")}
    assert joined["lab-worker2"].cause == NEVER_JOINED_CAUSE
    assert "RendezvousTimeoutError" in joined["lab-worker2"].observed
    assert ("ranks", "job") in failed(findings) and ("exit", "job") in failed(findings)
    assert by_check(findings, "ranks")[0].cause == NEVER_JOINED_CAUSE
    assert not by_check(findings, "crash")  # the node left waiting gave up: not a crash


def test_a_crashed_rank_is_named_with_its_exit_code_and_exception():
    log = parse_smoke(CRASHED)
    findings = judge_smoke(log, expected_from_log(log))
    crash = by_check(findings, "crash")
    assert [c.subject for c in crash] == ["rank 1 on lab-worker2"]
    assert crash[0].cause == CRASH_CAUSE
    assert crash[0].observed.startswith("exit code 1; RuntimeError: ") and \
        "Connection closed by peer" in crash[0].observed
    assert ("joined", "lab-worker1") not in failed(findings)
    assert "missing 1" in by_check(findings, "ranks")[0].observed


def test_a_log_cut_before_the_results_says_ranks_are_missing_not_crashed():
    log = parse_smoke("\n".join(job_lines() + [result(0, "lab-worker1")]))
    findings = judge_smoke(log, expected_from_log(log))
    assert by_check(findings, "ranks")[0].cause == MISSING_CAUSE
    assert by_check(findings, "exit")[0].severity == "warn"


def test_replicas_out_of_sync_fail():
    log = parse_smoke("\n".join(job_lines() + [result(0, "lab-worker1"),
                                               result(1, "lab-worker2", in_sync=False),
                                               "GPUINFRA-SMOKE-END srun exit 0"]))
    findings = judge_smoke(log, expected_from_log(log))
    assert by_check(findings, "replicas")[0].cause == REPLICA_CAUSE
    # S1 (test audit e4dd2f2): the verdict, not only the message
    assert ("replicas", "job") in failed(findings)
    assert by_check(findings, "replicas")[0].observed == "ranks 1 differ"


def test_ranks_of_another_world_size_fail():
    """S3 (test audit e4dd2f2): ranks 0 and 1 report a world of 4 for a 2 x 1 job (the job was
    run with another --nodes): ranks fails with the fix naming --nodes."""
    log = parse_smoke("\n".join(job_lines() + [result(0, "lab-worker1", world=4),
                                               result(1, "lab-worker2", world=4),
                                               "GPUINFRA-SMOKE-END srun exit 0"]))
    findings = judge_smoke(log, Expected(backend="gloo", nodes=2, procs_per_node=1))
    [ranks] = by_check(findings, "ranks")
    assert ("ranks", "job") in failed(findings) and ranks.observed == "world size ['4']"
    assert ranks.fix == "pass the --nodes the job really had"


FLOOR = min_busbw("nvswitch-all-to-all", "H100-SXM5-80GB", 8, 2, 8, 400)


def test_nccl_over_ib_above_the_floor_passes():
    log = parse_smoke(nccl_log("IB", 400.0))
    findings = judge_smoke(log, Expected("nccl", 2, 8, rdma=True), FLOOR)
    assert not failed(findings)
    assert by_check(findings, "transport")[0].observed == "IB"
    assert "nccl#1221" in by_check(findings, "busbw")[0].expected  # the floor's source


def test_nccl_falling_back_to_sockets_with_rdma_nics_fails():
    log = parse_smoke(nccl_log("Socket", 400.0))
    findings = judge_smoke(log, Expected("nccl", 2, 8, rdma=True), FLOOR)
    assert by_check(findings, "transport")[0].cause == SOCKET_CAUSE
    # without RDMA NICs, sockets are the expected path
    findings = judge_smoke(log, Expected("nccl", 2, 8, rdma=False), FLOOR)
    assert by_check(findings, "transport")[0].severity == "ok"


def test_nccl_below_the_floor_fails_and_without_a_floor_warns():
    log = parse_smoke(nccl_log("IB", 100.0))
    busbw = by_check(judge_smoke(log, Expected("nccl", 2, 8, True), FLOOR), "busbw")[0]
    assert busbw.failed and f">= {FLOOR.min_busbw:g} GB/s" in busbw.expected
    assert by_check(judge_smoke(log, Expected("nccl", 2, 8, True)), "busbw")[0].severity \
        == "warn"


def test_a_small_nccl_all_reduce_is_not_judged_against_the_plateau_floor():
    lines = job_lines("nccl", 2, 8, ("hgx01", "hgx02"))
    lines += [result(r, ("hgx01", "hgx02")[r // 8], 16, "nccl", 500.0, 64 * 1024**2)
              for r in range(16)]
    busbw = by_check(judge_smoke(parse_smoke("\n".join(lines)), Expected("nccl", 2, 8, True),
                                 FLOOR), "busbw")[0]
    assert busbw.severity == "warn" and "plateau" in busbw.cause


def test_prefixed_lines_are_read_and_other_logs_refused():
    labelled = "\n".join(f"{i % 2}: {line}" for i, line in enumerate(GOOD.splitlines()))
    assert len(parse_smoke(labelled).results) == 2
    with pytest.raises(GpuinfraError, match="not the smoke job's log"):
        parse_smoke("# nThread 1 nGpus 1\n")


def test_without_the_job_line_the_ranks_say_the_shape():
    log = parse_smoke("\n".join([result(0, "a"), result(1, "b")]))
    assert expected_from_log(log) == Expected("gloo", 2, 1)


# ---------------------------------------------------------------------------- Kubernetes

GPU_JOB = indexed_job(K8sSettings(image="registry.example/torch:24.01", nodes=2,
                                  gpus_per_node=8))
CPU_JOB = indexed_job(K8sSettings(image="registry.example/torch:24.01", nodes=2))
RDMA_JOB = indexed_job(K8sSettings(image="registry.example/torch:24.01", nodes=2,
                                   gpus_per_node=8, rdma=True))


@pytest.mark.parametrize("minor", k8s.SUPPORTED_MINORS)
@pytest.mark.parametrize("objects", [GPU_JOB, CPU_JOB, RDMA_JOB], ids=["nccl", "gloo", "rdma"])
def test_the_indexed_job_validates(objects, minor):
    for obj in objects:
        assert kubernetes_validate.validate(obj, minor, strict=True) == minor


def test_the_indexed_job_shape():
    service, job = GPU_JOB
    assert service["spec"]["clusterIP"] == "None"
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == 2
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    assert pod["runtimeClassName"] == "nvidia"
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert "--node_rank=$(JOB_COMPLETION_INDEX)" in container["command"]
    assert "--rdzv_endpoint=gpuinfra-smoke-0.gpuinfra-smoke.default.svc:29500" in \
        container["command"]
    cpu_pod = CPU_JOB[1]["spec"]["template"]["spec"]
    assert "runtimeClassName" not in cpu_pod and "resources" not in cpu_pod["containers"][0]


def test_an_rdma_job_asks_for_the_nodes_rdma_devices_and_may_lock_memory():
    """Issue 46 item 3: NCCL over InfiniBand/RoCE needs the node's /dev/infiniband (the RDMA
    shared device plugin's resource) and to pin its buffers (IPC_LOCK)."""
    container = RDMA_JOB[1]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8,
                                                "rdma/rdma_shared_device_a": 1}
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    assert "securityContext" not in GPU_JOB[1]["spec"]["template"]["spec"]["containers"][0]
    with pytest.raises(SmokeError, match="RDMA is for NCCL across GPUs"):
        indexed_job(K8sSettings(image="x", rdma=True))


def test_a_broken_indexed_job_fails_the_schema():
    job = json.loads(json.dumps(GPU_JOB[1]))
    job["spec"]["completionMode"] = ["Indexed"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, k8s.SUPPORTED_MINORS[-1], strict=True)


def test_kubernetes_names_are_refused_unless_dns_labels():
    with pytest.raises(SmokeError):
        indexed_job(K8sSettings(image="x", name="Smoke_Job"))


def test_the_srun_launcher_starts_every_rank_from_slurms_variables():
    """launcher "srun" (Debian 12's torch 1.13 cannot run torchrun under Python 3.11, measured
    in the lab): srun starts the ranks and PyTorch meets on the first host (env://)."""
    text = sbatch_script(GLOO, SmokeSettings(launcher="srun"))
    argv = srun_argv(text)
    inner = argv[argv.index("-c") + 1].split()
    for part in ("env", "RANK=$SLURM_PROCID", "WORLD_SIZE=$SLURM_NTASKS",
                 "LOCAL_RANK=$SLURM_LOCALID", "MASTER_ADDR=$GPUINFRA_SMOKE_HEAD",
                 "MASTER_PORT=29500"):
        assert part in inner, part
    assert "torch.distributed.run" not in inner
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)
    with pytest.raises(GpuinfraError, match="launcher"):
        sbatch_script(GLOO, SmokeSettings(launcher="mpirun"))


def test_torchrun_gets_the_flag_every_torch_release_reads():
    """torch 1.13's torchrun knows only --no_python (measured: "unrecognized arguments:
    --no-python"); 2.x reads both spellings."""
    inner = srun_argv(sbatch_script(GLOO))
    assert "--no_python" in inner[inner.index("-c") + 1].split()


# ---------------------------------------------------------------------------- real logs


def test_real_lab_logs_pass_and_fail_naming_the_killed_ranks_node() -> None:
    """The two jobs gpuinfra_lab/training_smoke.py ran on the lab (tests/fixtures/smoke)."""
    root = REPO / "tests" / "fixtures" / "smoke"
    good = parse_smoke((root / "lab-2node-gloo-pass.out").read_text())
    findings = judge_smoke(good, expected_from_log(good))
    assert not [f for f in findings if f.failed] and len(good.results) == 2
    assert {r["host"] for r in good.results} == {"lab-worker1", "lab-worker2"}
    killed = parse_smoke((root / "lab-2node-gloo-rank-killed.out").read_text())
    failed = [f for f in judge_smoke(killed, expected_from_log(killed)) if f.failed]
    assert killed.exit_status == 143 and killed.results == []
    assert any("lab-worker2" in f.subject and f.cause == CRASH_CAUSE for f in failed), failed


def test_the_labs_torch_step_reports_a_torch_already_installed(tmp_path):
    """gpuinfra_lab.training_smoke's install step on a worker that has torch (a second
    `make demo` on a running lab) prints its version like a fresh install does: it printed
    nothing, and the proof failed "python3-torch could not be installed or imported (exit 0)"."""
    import os
    import subprocess

    from gpuinfra_lab.training_smoke import INSTALL, PACKAGES

    fake = tmp_path / "bin"
    fake.mkdir()
    # a python3 whose torch imports: it prints the version only when the code asks for it
    (fake / "python3").write_text('#!/bin/sh\ncase "$2" in *torch.__version__*) '
                                  'echo 2.1.0;; esac\n')
    (fake / "apt-get").write_text("#!/bin/sh\necho apt-get must not run >&2\nexit 1\n")
    for tool in fake.iterdir():
        tool.chmod(0o755)
    done = subprocess.run(["sh", "-c", INSTALL.format(p=" ".join(PACKAGES))],
                          capture_output=True, text=True,
                          env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"})
    assert (done.returncode, done.stdout.strip().splitlines()[-1:]) == (0, ["2.1.0"])
    assert "apt-get must not run" not in done.stderr


def test_the_smoke_pods_have_a_shared_memory_dev_shm():
    """Issue 46 item 3: NCCL's intra-node transport and PyTorch's data loaders live in
    /dev/shm, which a container gets at 64 MiB; the smoke pods mount a memory-backed emptyDir
    there (both backends)."""
    for objects in (GPU_JOB, CPU_JOB):
        pod = objects[1]["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0].get("volumeMounts", [])}
        assert "/dev/shm" in mounts, pod
        assert volumes[mounts["/dev/shm"]]["emptyDir"] == {"medium": "Memory"}
