"""The job_containers role's files as text (gpuinfra.jobs.containers) and the spec gate's rules
for its keys."""

from __future__ import annotations

import shutil

import pytest

from gpuinfra.jobs.containers import (
    OCI_RUNTIMES,
    enroot_conf,
    oci_conf,
    oci_conf_keys,
    oci_conf_problems,
    pyxis_plugstack,
)
from gpuinfra.spec import HostInput
from gpuinfra_deploy.run.knobs import spec_problems
from gpuinfra_deploy.templates import text as file_text


@pytest.mark.parametrize("runtime", OCI_RUNTIMES)
@pytest.mark.parametrize("gpus", [False, True])
def test_oci_conf_is_what_slurmstepd_22_05_accepts(runtime, gpus):
    text = file_text(oci_conf(runtime, gpus))
    assert oci_conf_problems(text) == []
    keys = oci_conf_keys(text)
    assert set(keys) == {"runtimequery", "runtimekill", "runtimedelete", "runtimerun"}
    for value in keys.values():
        assert "--rootless=true --root=/run/gpuinfra-oci/%u" in value
        assert "%n.%u.%j.%s.%t" in value
    assert "%b" in keys["runtimerun"]


def test_oci_conf_patterns_are_slurms_own_examples():
    crun = oci_conf_keys(file_text(oci_conf("crun")))
    assert crun["runtimerun"] == ("/usr/bin/crun --rootless=true --root=/run/gpuinfra-oci/%u "
                                  "run --bundle %b %n.%u.%j.%s.%t")
    assert crun["runtimekill"].endswith("kill -a %n.%u.%j.%s.%t")
    assert crun["runtimedelete"].endswith("delete --force %n.%u.%j.%s.%t")
    nvidia = oci_conf_keys(file_text(oci_conf("crun", gpus=True)))
    assert nvidia["runtimerun"] == ("/usr/bin/nvidia-container-runtime --rootless=true "
                                    "--root=/run/gpuinfra-oci/%u run %n.%u.%j.%s.%t -b %b")


def test_oci_conf_problems_are_slurmstepds():
    assert oci_conf_problems('RunTimeRun="x"\n') == [
        "runtimequery: missing", "runtimekill: missing", "runtimedelete: missing"]
    both = file_text(oci_conf("crun")) + 'RunTimeCreate="x"\nRunTimeStart="y"\n'
    assert "RunTimeRun and RunTimeCreate/RunTimeStart are mutually exclusive" in \
        oci_conf_problems(both)
    assert oci_conf_problems(file_text(oci_conf("crun")) + "ContainerPathOverride=/x\n") == [
        "containerpathoverride: not a setting Slurm 22.05 reads"]


def test_enroot_conf_and_pyxis_line():
    text = file_text(enroot_conf({"runtime": "/run/e/$(id -u)", "cache": "/c", "data": "/d"}))
    assert text.splitlines()[-3:] == ["ENROOT_RUNTIME_PATH /run/e/$(id -u)",
                                      "ENROOT_CACHE_PATH /c", "ENROOT_DATA_PATH /d"]
    assert file_text(pyxis_plugstack()).endswith("required /usr/local/lib/slurm/spank_pyxis.so\n")


def site(**data) -> list[HostInput]:
    common = {"schedulers": ["slurm"], "cluster_name": "t", **data}
    return [HostInput("head01", ("head",), {"node_address": "10.0.0.1", **common}),
            HostInput("gpu01", ("workers",), {"node_address": "10.0.0.2", **common})]


@pytest.mark.parametrize(("runtime", "knobs"), [
    ("enroot-pyxis", ["job_containers_enroot_sha256", "job_containers_enroot_caps_sha256",
                      "job_containers_pyxis_sha256"]),
    ("apptainer", ["job_containers_apptainer_sha256"]),
])
def test_a_downloaded_runtime_needs_the_sites_checksums(runtime, knobs):
    problems = spec_problems(site(job_containers_runtime=runtime))
    fields = sorted({p.field for p in problems})
    assert fields == sorted(knobs)
    for p in problems:
        assert "gpuinfra installs no download it cannot check" in p.problem
        assert f"set {p.field} once for the site" in p.fix
        assert "sha256sum" in p.fix
    given = {k: "0" * 64 for k in knobs}
    assert spec_problems(site(job_containers_runtime=runtime, **given)) == []


def test_oci_and_none_need_no_checksum():
    assert spec_problems(site(job_containers_runtime="oci")) == []
    assert spec_problems(site()) == []


@pytest.mark.parametrize(("key", "value", "words"), [
    ("job_containers_runtime", "docker", "not one of the choices"),
    ("job_containers_oci_runtime", "podman", "not one of the choices"),
    ("job_containers_enroot_sha256", "ABC", "not a SHA-256"),
    ("job_containers_enroot_cache_path", "relative/path", "not an absolute path"),
    ("job_containers_enroot_cache_path", "/x/$(rm -rf /)", "not an absolute path"),
    ("job_containers_oci_bundle", "/srv/b b", "not an absolute path"),
])
def test_bad_values_are_refused_with_host_field_value_and_fix(key, value, words):
    problems = spec_problems(site(**{key: value}))
    assert [p.field for p in problems] == [key]
    assert words in problems[0].problem
    assert problems[0].value == value
    assert f"set {key} in group_data" in problems[0].fix


# ------------------------------------------------------------------ the checked download

def _download(tmp_path, sha256: str):
    import subprocess

    from gpuinfra_roles.job_containers import download_script

    source = tmp_path / "enroot_3.5.0-1_amd64.deb"
    source.write_bytes(b"release file")
    dest = tmp_path / "cache" / source.name
    run = subprocess.run(["sh", "-c", download_script(f"file://{source}", str(dest), sha256)],
                         capture_output=True, text=True, check=False)
    return run, dest


def test_the_download_keeps_a_file_only_with_the_sites_sha256(tmp_path):
    import hashlib

    good = hashlib.sha256(b"release file").hexdigest()
    run, dest = _download(tmp_path, good)
    assert run.returncode == 0, run.stderr
    assert dest.read_bytes() == b"release file"


def test_a_download_with_another_sha256_fails_naming_both_and_leaves_nothing(tmp_path):
    import hashlib

    run, dest = _download(tmp_path, "0" * 64)
    assert run.returncode == 1
    assert f"has SHA-256 {hashlib.sha256(b'release file').hexdigest()}" in run.stderr
    assert f"the site expects {'0' * 64}: not installed" in run.stderr
    assert list(dest.parent.iterdir()) == []  # neither the file nor its .part


# ------------------------------------------------------- Pyxis's plugin judged before listing

@pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("nm")), reason="needs gcc, nm")
def test_the_plugstack_line_waits_for_a_real_spank_plugin(tmp_path):
    """What SPANK_PLUGIN(name, version) defines, compiled for real: accepted; a plugin without
    plugin_type, or any other binary, refused naming the symbol."""
    import subprocess

    from gpuinfra_roles.job_containers import spank_check

    def build(source: str) -> str:
        (tmp_path / "p.c").write_text(source)
        so = tmp_path / "p.so"
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "p.c")],
                       check=True)
        return str(so)

    def judged(plugin: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", spank_check(plugin)], capture_output=True,
                              text=True, check=False)

    spank = ('char plugin_name[] = "pyxis"; char plugin_type[] = "spank";\n'
             "const unsigned int plugin_version = 1;\n")
    assert judged(build(spank)).returncode == 0
    without = judged(build(spank.replace("plugin_type", "other")))
    assert without.returncode == 1
    assert "no plugin_type: not a SPANK plugin" in without.stdout
    assert judged("/bin/true").returncode == 1


# ------------------------------------------- oci.conf kept in slurmd's cache (it empties it)

def test_the_path_unit_watches_slurmds_cache_and_the_kept_copy():
    from gpuinfra.jobs.containers import OCI_CONF_DIR, OCI_CONF_KEPT, OCI_SYNC, oci_sync_units

    units = {name: file_text(unit) for name, unit in oci_sync_units().items()}
    path = units["gpuinfra-oci-conf.path"].splitlines()
    assert f"PathChanged={OCI_CONF_DIR}" in path
    assert f"PathChanged={OCI_CONF_KEPT}" in path
    assert "Unit=gpuinfra-oci-conf.service" in path
    assert "WantedBy=multi-user.target" in path  # at boot, before slurmd fetches
    service = units["gpuinfra-oci-conf.service"].splitlines()
    assert f"ExecStart={OCI_SYNC}" in service
    # a few slurmd restarts in a row must not stop the path unit for good (start-limit-hit)
    assert "StartLimitIntervalSec=0" in service


def sync_script_in(tmp_path):
    """The oci.conf sync script with its paths moved under ``tmp_path``: the cache, the kept
    copy and the script's own path."""
    from gpuinfra.jobs.containers import OCI_CONF, OCI_CONF_DIR, OCI_CONF_KEPT, oci_sync_script

    cache, kept = tmp_path / "conf-cache", tmp_path / "oci.conf"
    script = tmp_path / "sync"
    script.write_text(file_text(oci_sync_script()).replace(OCI_CONF, str(cache / "oci.conf"))
                      .replace(OCI_CONF_DIR, str(cache)).replace(OCI_CONF_KEPT, str(kept)))
    return cache, kept, script


def test_the_sync_script_run_for_real(tmp_path):
    """Copies the kept oci.conf into the cache when it differs, leaves an equal one alone,
    removes the cache's copy when none is kept, and waits quietly for a cache slurmd has not
    made yet."""
    import subprocess

    cache, kept, script = sync_script_in(tmp_path)

    def sync() -> None:
        subprocess.run(["sh", str(script)], check=True)

    kept.write_text(file_text(oci_conf("crun")))
    sync()  # no cache yet: nothing, exit 0
    assert not cache.exists()
    cache.mkdir()
    (cache / "slurm.conf").write_text("fetched")
    sync()
    assert (cache / "oci.conf").read_text() == file_text(oci_conf("crun"))
    before = (cache / "oci.conf").stat().st_mtime_ns
    sync()
    assert (cache / "oci.conf").stat().st_mtime_ns == before  # equal: not rewritten
    kept.unlink()
    sync()
    assert sorted(p.name for p in cache.iterdir()) == ["slurm.conf"]
    # Many at once (the deploy's run beside the path unit's): each its own temporary name,
    # every run exits 0, one oci.conf and no temporary left (a shared name failed 1 of 40).
    kept.write_text(file_text(oci_conf("crun")))
    for _ in range(3):
        (cache / "oci.conf").unlink(missing_ok=True)
        runs = [subprocess.Popen(["sh", str(script)], stderr=subprocess.PIPE)
                for _ in range(12)]
        assert [r.wait() for r in runs] == [0] * 12, [r.stderr.read() for r in runs]
        assert sorted(p.name for p in cache.iterdir()) == ["oci.conf", "slurm.conf"]
        assert (cache / "oci.conf").read_text() == file_text(oci_conf("crun"))


def test_the_sync_script_sees_slurmd_empty_the_cache_while_it_runs(tmp_path):
    """systemd starts the sync once for changes made while it runs, so a run that found
    oci.conf in place must still see slurmd remove it a moment later (its cache emptied and
    refilled) and put it back before it ends. Shown red on the script that ended at its first
    look (oci.conf left out of the cache)."""
    import subprocess
    import time

    cache, kept, script = sync_script_in(tmp_path)
    kept.write_text(file_text(oci_conf("crun")))
    cache.mkdir()
    (cache / "slurm.conf").write_text("fetched")
    (cache / "oci.conf").write_text(file_text(oci_conf("crun")))  # in place at its first look
    run = subprocess.Popen(["sh", str(script)], stderr=subprocess.PIPE)
    time.sleep(0.2)
    (cache / "oci.conf").unlink()  # slurmd's fetch: the cache emptied, then refilled
    (cache / "slurm.conf").write_text("fetched again")
    assert run.wait(timeout=30) == 0, run.stderr.read()
    assert (cache / "oci.conf").read_text() == file_text(oci_conf("crun"))


def test_the_roles_bundle_with_runc_is_refused_at_validate():
    problems = spec_problems(site(job_containers_runtime="oci", job_containers_oci_runtime="runc",
                                  job_containers_oci_bundle="/srv/b"))
    assert [p.field for p in problems] == ["job_containers_oci_bundle"]
    assert "uid mappings of the user who made it" in problems[0].problem
    assert "job_containers_oci_runtime = 'crun'" in problems[0].fix
    assert spec_problems(site(job_containers_runtime="oci", job_containers_oci_bundle="/srv/b")) \
        == []
