"""The logs role's forwarding file (gpuinfra/logs/forward.py), judged by a real ``rsyslogd -N1``
through the very check command the role runs on a host (Debian's ``rsyslog`` and
``rsyslog-elasticsearch``: `make test` installs them and sets GPUINFRA_REQUIRE_TOOLS=1, so a
missing rsyslogd fails there instead of skipping)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuinfra.errors import GpuinfraError
from gpuinfra.logs.forward import check_command, forward_conf, forward_rule, packages
from gpuinfra_deploy.templates import text as file_text

SYSLOG = {"kind": "syslog", "host": "10.0.0.5", "port": 514, "protocol": "tcp"}
ES = {"kind": "opensearch", "url": "http://os.example", "index": "gpuinfra-logs"}
# Debian 12's /etc/rsyslog.conf, its RainerScript and legacy lines (the package's own file).
MAIN = """module(load="imuxsock")
module(load="imklog")
$WorkDirectory {work}
$IncludeConfig {dropins}/*.conf
*.*;auth,authpriv.none\t-/var/log/syslog
"""


def rsyslogd() -> str:
    path = shutil.which("rsyslogd") or ("/usr/sbin/rsyslogd"
                                        if os.path.exists("/usr/sbin/rsyslogd") else None)
    if path is None:
        if os.environ.get("GPUINFRA_REQUIRE_TOOLS"):
            pytest.fail("rsyslogd is missing (apt-get install rsyslog rsyslog-elasticsearch)")
        pytest.skip("rsyslogd not installed (apt-get install rsyslog rsyslog-elasticsearch)")
    if not Path("/usr/lib/x86_64-linux-gnu/rsyslog/omelasticsearch.so").exists() and \
            not list(Path("/usr/lib").glob("*/rsyslog/omelasticsearch.so")):
        if os.environ.get("GPUINFRA_REQUIRE_TOOLS"):
            pytest.fail("rsyslog's omelasticsearch is missing (apt-get install "
                        "rsyslog-elasticsearch)")
        pytest.skip("rsyslog-elasticsearch not installed")
    return path


def judged(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    """The role's check (gpuinfra.logs.forward.check_command) on ``text`` staged beside a
    main file and a drop-in folder holding an older forwarding file, which it must ignore."""
    rsyslogd()
    dropins, stage, work = tmp_path / "rsyslog.d", tmp_path / "rsyslog.d/.gpuinfra-staged", \
        tmp_path / "spool"
    for folder in (dropins, stage, work):
        folder.mkdir(parents=True, exist_ok=True)
    main = tmp_path / "rsyslog.conf"
    main.write_text(MAIN.format(work=work, dropins=dropins))
    live = dropins / "60-gpuinfra-forward.conf"
    live.write_text('action(type="omfwd" this-is="the old, broken live file")\n')
    (dropins / "20-other.conf").write_text("# another package's drop-in\n")
    (stage / live.name).write_text(text)
    command = check_command(str(stage), main=str(main), dropins=str(dropins), live=str(live))
    env = {**os.environ, "PATH": f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"}
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env,
                          timeout=60)


def test_rsyslogd_accepts_the_rendered_file(tmp_path):
    result = judged(tmp_path, file_text(forward_conf([SYSLOG, ES,
                                                      {**SYSLOG, "protocol": "udp"}])))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "End of config validation run" in result.stderr + result.stdout
    copied = (tmp_path / "rsyslog.d/.gpuinfra-staged/probe/d")
    assert sorted(p.name for p in copied.iterdir()) == ["20-other.conf",
                                                        "60-gpuinfra-forward.conf"]


@pytest.mark.parametrize(("broken", "words"), [
    ('protocol="tcp"', 'protocl="tcp"'),  # a misspelt parameter
    ('protocol="tcp"', 'protocol="tpc"'),  # a bad value
    ('module(load="omelasticsearch")', 'module(load="omelasticsearch-nope")'),
])
def test_rsyslogd_refuses_a_broken_file(tmp_path, broken, words):
    text = file_text(forward_conf([SYSLOG, ES]))
    assert broken in text
    result = judged(tmp_path, text.replace(broken, words, 1))
    assert result.returncode != 0
    assert "rsyslogd" in result.stderr + result.stdout


def test_the_text_and_its_packages():
    text = file_text(forward_conf([SYSLOG]))
    assert text.startswith("# Managed by gpuinfra")
    assert "omelasticsearch" not in text
    assert 'queue.type="linkedList"' in text and 'action.resumeRetryCount="-1"' in text
    assert packages([SYSLOG]) == ["rsyslog"]
    assert packages([SYSLOG, ES]) == ["rsyslog", "rsyslog-elasticsearch"]
    es = file_text(forward_conf([ES]))
    assert 'server="os.example"\n       serverport="9200"\n       usehttps="off"' in es


def test_a_value_that_would_end_its_string_is_refused():
    with pytest.raises(GpuinfraError, match="item 0: host"):
        forward_conf([{**SYSLOG, "host": 'x" type="omfile'}])
    assert forward_rule().problem([{**SYSLOG, "host": 'x"'}]) == \
        "item 0: host: not a host name or IP address"
    assert forward_rule().problem([]) is None
