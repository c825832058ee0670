"""A few SSH round trips per node for the whole verify suite: read-only commands asked at once.

testinfra sends every command of every check in an SSH channel of its own, and sshd starts a
session for each (a fork, PAM, a shell): 60-70 round trips a GPU node, which is what made
``gpuinfra report`` grow with the fleet (docs/measurements.md, bench/fleet.py). Here each host
keeps the commands the suite sent it, in order (learned, at the end of each run:
``gpuinfra_deploy.run.learned``, the deploy's store; a host not seen before borrows the list
of a host of the same kind, learned in this run or before). When the suite sends a read-only
command (:func:`read_only`) it holds no answer for, one command runs on the node, in one
round trip, that command and what the last run asked after it up to the next command that may
change the node (a reading); each is answered from what that round trip printed: the same
command line, run by the same user the same way, its exit code, stdout and stderr byte for
byte.

What goes live: a command not read-only (a container started, a pod created, a bandwidth
test), a command not in the learned list, and a command the same check asks again after
:data:`AGAIN_S` (a check that waits and asks again sees the node as it is now); another check
asking the same command gets the freshest answer held. After a command that is not
read-only, every answer held is dropped, and what the last run asked after that command is
read again at the host's next command (one more round trip), since the command may have
changed it. A reading that cannot be taken or read (no ``base64``/``mktemp`` on the node, a
cut output) falls back to one round trip per command, as before: never a different verdict.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from gpuinfra.shell_batch import BatchUnreadable, batch_script, parse_batch
from gpuinfra_deploy.run.learned import LearnedLists

# Deny by default (issue 44): a command is read-only only when its program AND its arguments
# are a known reading form. A program here reads whatever its arguments (none of them has an
# option that writes a file, changes the node or never ends).
READ_ONLY_COMMANDS = frozenset({
    "base64", "basename", "blkid", "cat", "cut", "df", "dirname", "dpkg-query", "echo",
    "false", "findmnt", "getent", "grep", "head", "ibstat", "ibv_devices", "ibv_devinfo", "id",
    "ls", "lsblk", "lscpu", "lsmod", "lspci", "md5sum", "nproc", "printf", "ps", "readlink",
    "realpath", "sacct", "sha256sum", "sinfo", "squeue", "stat", "test", "tr", "true", "type",
    "uname", "wc", "which", "[",
})
# First words that read for some arguments only: (word, a regex the rest must match).
READ_ONLY_FORMS = {
    "cd": re.compile(r"^\S+$"),  # changes only the directory of the command's own shell
    "containerd": re.compile(r"^config (dump|default)$"),
    "ctr": re.compile(r"^(-n \S+ |--namespace[= ]\S+ )*(plugins?|containers|images|tasks|"
                      r"namespaces|snapshots) (ls|list)\b|^version$"),
    # Slurm's readers: the controller's view (each answer is the view at the reading).
    "scontrol": re.compile(r"^(-o |--oneliner |-d |--details )*(show|ping|version)\b"),
    "sacctmgr": re.compile(r"^(-n |-p |-P |--noheader |--parsable2? |-i )*(show|list)\b"),
    "munge": re.compile(r"^(-n|--no-input)$"),  # a credential of nothing: changes nothing
    "slurmd": re.compile(r"^(-f \S+ )?-G\b|^-C$|^-V$"),  # print GRES / hardware / version
    "systemctl": re.compile(r"^(--no-pager |--value |-p \S+ |--property[= ]\S+ |--all |"
                            r"--plain |--no-legend |--full |--type[= ]\S+ |--state[= ]\S+ )*"
                            r"(is-active|is-enabled|is-failed|is-system-running|show|status|"
                            r"cat|list-units|list-unit-files|list-timers|--version)\b"),
    "gpuinfra-health": re.compile(r"^(reading|status)\b"),
    "/usr/local/sbin/gpuinfra-health": re.compile(r"^(reading|status)\b"),
    # dpkg(1): its query actions only (-i, --configure, --purge... change the node).
    "dpkg": re.compile(r"^(-l|--list|-s|--status|-L|--listfiles|-S|--search|-p|--print-avail|"
                       r"--print-architecture|--print-foreign-architectures|--get-selections|"
                       r"--compare-versions|--version)\b"),
    "mount": re.compile(r"^$|^(-l|--show-labels)$"),  # the table, no filesystem named
    "hostname": re.compile(r"^$|^(-[fsdiIAay]|--(fqdn|long|short|domain|ip-address|"
                           r"all-ip-addresses|all-fqdns|alias|yp))( -\S+)*$"),
    "hostnamectl": re.compile(r"^(--\S+ )*(status)?$"),
}
# Options of a wrapper that take a value (the next word): the wrapped command comes after.
_WRAPPER_VALUES = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "command": set(), "nice": {"-n", "--adjustment"}, "nohup": set(), "stdbuf": {"-i", "-o", "-e"},
    "ionice": {"-c", "-n", "-p", "-P", "-u"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "xargs": {"-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-i", "-L", "-l",
              "-n", "--max-args", "-P", "--max-procs", "-s", "--max-chars"},
    "sudo": {"-u", "--user", "-g", "--group", "-C", "-D", "--chdir", "-h", "--host", "-p",
             "--prompt", "-r", "-t", "-T", "--command-timeout", "-U", "--other-user"},
}
# Options after which env/sudo run nothing but change the environment of nothing: refused.
_WRAPPER_REFUSED = {"env": {"-S", "--split-string"}, "sudo": {"-e", "--edit", "-s", "--shell",
                                                              "-i", "--login", "-v", "-k", "-K"}}
# A reading that may never end (the suite would wait for ever): never batched, never
# read-only.
_FOLLOW = {"tail": {"-f", "-F", "--follow", "--retry"},
           "journalctl": {"-f", "--follow"}}
_JOURNAL_CHANGES = ("--rotate", "--vacuum", "--flush", "--sync", "--relinquish-var",
                    "--smart-relinquish-var", "--setup-keys", "--update-catalog")
_IP_READ_VERBS = {"show", "list", "ls", "lst", "get", "help"}
_RDMA_CHANGE_VERBS = {"add", "del", "delete", "set"}
_FIND_ACTIONS = ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls", "-fprint")


@lru_cache(maxsize=4096)
def read_only(command: str) -> bool:
    """True when ``command`` only reads the node (see :data:`READ_ONLY_COMMANDS`); a command
    wrapped by testinfra in ``sudo [-u USER] /bin/sh -c '...'`` is judged by what it wraps.
    Anything this cannot read with certainty (backticks, ``$(``, here-documents, a ``>`` to a
    file) is not read-only: it goes live."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words[:1] == ["sudo"]:
        rest = words[1:]
        if rest[:1] == ["-u"] and len(rest) > 2:
            rest = rest[2:]
        if rest[:2] in (["/bin/sh", "-c"], ["sh", "-c"]) and len(rest) == 3:
            return read_only(rest[2])
        return False
    if any(mark in command for mark in ("`", "$(", "<<", "\n")):
        return False
    simple = _simple_commands(command)
    return simple is not None and all(_reads(words) for words in simple if words)


def _simple_commands(command: str) -> list[list[str]] | None:
    """The words of each simple command of ``command`` (split at |, ||, &&, ;, parentheses),
    redirections taken out; None when a redirection writes anywhere but /dev/null or another
    stream, or the line cannot be read."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return None
    simple: list[list[str]] = [[]]
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if token in ("|", "||", "&&", ";", "(", ")"):
            simple.append([])
        elif token and set(token) <= set("<>&|;()"):
            if ">" not in token and token != "<":
                return None  # &, <<, |& ...: not read here
            if simple[-1] and simple[-1][-1].isdigit():
                simple[-1].pop()  # the stream number of 2>/dev/null
            target = tokens[at + 1] if at + 1 < len(tokens) else ""
            if ">" in token and not (target == "/dev/null" or (token.endswith("&")
                                                                 and target.isdigit())):
                return None
            at += 1
        else:
            simple[-1].append(token)
        at += 1
    return simple


def _reads(words: list[str]) -> bool:
    """One simple command (its words, redirections taken out) only reads: deny by default."""
    while words and "=" in words[0] and not words[0].startswith("="):
        words = words[1:]  # VAR=value before the command
    if not words:
        return True
    word, args = words[0], words[1:]
    if word in _WRAPPER_VALUES:
        return _wrapper_reads(word, args)
    judge = _ARGUMENT_JUDGES.get(word)
    if judge is not None:
        return judge(args)
    if word in READ_ONLY_FORMS:
        return bool(READ_ONLY_FORMS[word].match(" ".join(args)))
    return word in READ_ONLY_COMMANDS


def _wrapper_reads(word: str, args: list[str]) -> bool:
    """``env``, ``command``, ``nice``, ``timeout``, ``xargs``, ``sudo``...: judged by what they
    run (their options and, for timeout, the duration skipped). ``command -v``/``-V`` and a
    wrapper with nothing to run (env, xargs: echo) read."""
    at = 0
    while at < len(args) and args[at].startswith("-") and args[at] != "--":
        option = args[at].split("=", 1)[0]
        if option in _WRAPPER_REFUSED.get(word, ()):
            return False
        if word == "command" and option in ("-v", "-V"):
            return True
        at += 2 if option in _WRAPPER_VALUES[word] and "=" not in args[at] else 1
    if at < len(args) and args[at] == "--":
        at += 1
    rest = args[at:]
    if word == "env":
        while rest and "=" in rest[0]:
            rest = rest[1:]
    if word == "timeout":
        rest = rest[1:]  # the duration
    if not rest:
        return word in ("env", "xargs", "command", "nice", "nohup")
    return _reads(rest)


def _awk_reads(args: list[str]) -> bool:
    # system(), a pipe to or from a command, print > file, close(): the program acts.
    program = " ".join(a for a in args if not a.startswith("-"))
    return not any(mark in program for mark in ("system", "|", ">", "close", "fflush")) \
        and not any(a.startswith(("-i", "--include", "-l", "--load", "-f")) for a in args)


_SED_WRITE = re.compile(r"(^|[;{}\s])\d*[wWe]\b|(^|[;{}\s])[wWe]\s*/|/[gpiImMe0-9]*[we]\b")


def _sed_reads(args: list[str]) -> bool:
    if any(a.startswith(("-i", "--in-place", "-f", "--file", "-s")) for a in args):
        return False
    return not any(_SED_WRITE.search(a) for a in args if not a.startswith("-"))


def _find_reads(args: list[str]) -> bool:
    return not any(a.startswith(_FIND_ACTIONS) for a in args)


def _date_reads(args: list[str]) -> bool:
    # -s/--set, or a bare MMDDhhmm[[CC]YY] operand, set the clock; +FORMAT only reads.
    return not any(a.startswith(("-s", "--set")) or not a.startswith(("-", "+"))
                   for a in args if a not in ("-u", "-R", "-I", "--utc", "--rfc-email"))


def _sort_reads(args: list[str]) -> bool:
    return not any(a.startswith(("-o", "--output")) or (a.startswith("-") and not
                   a.startswith("--") and "o" in a[1:]) for a in args)


def _uniq_reads(args: list[str]) -> bool:
    return len([a for a in args if not a.startswith("-")]) <= 1  # a second operand is written


def _ip_reads(args: list[str]) -> bool:
    rest = [a for a in args if not a.startswith("-")]
    if any(a in ("-batch", "-b", "-force", "-n", "-netns") for a in args):
        return False
    return len(rest) <= 1 or rest[1] in _IP_READ_VERBS


def _rdma_reads(args: list[str]) -> bool:
    return not any(a in _RDMA_CHANGE_VERBS for a in args)


def _ss_reads(args: list[str]) -> bool:
    return not any(a == "--kill" or (a.startswith("-") and not a.startswith("--") and "K" in a)
                   for a in args)


def _follows(word: str) -> Callable[[list[str]], bool]:
    refused = _FOLLOW[word]

    def judge(args: list[str]) -> bool:
        if any(a in refused or (a.startswith("-") and not a.startswith("--")
                                and any(f"-{c}" in refused for c in a[1:])) for a in args):
            return False
        return word != "journalctl" or not any(a.startswith(_JOURNAL_CHANGES) for a in args)
    return judge


# nvidia-smi(1)'s reading forms, word by word (the whole line, not its start: "--query-gpu=x
# --format=csv -pm 1" sets persistence mode): queries, listings, topo and NVLink status, MIG
# listings (mig -l*).
_SMI_WORD = re.compile(r"-q|--query|-L|--list-gpus|-x|--xml-format|-h|--help|--query-\w+=\S+|"
                       r"--format=\S+|--id=\S+|--display=\S+|-f|--filename=\S+")
_SMI_VALUE = {"-i", "--id", "-d", "--display"}  # options whose value is the next word


def _nvidia_smi_reads(args: list[str]) -> bool:
    if args[:1] == ["topo"]:
        return all(re.fullmatch(r"-m|--matrix|-mp|-p2p|[rwnap]|-i|\d+|--id=\S+", a)
                   for a in args[1:])
    if args[:1] == ["nvlink"]:
        return bool(args[1:]) and all(re.fullmatch(r"-s|--status|-c|--capabilities|-i|\d+|"
                                                   r"--id=\S+", a) for a in args[1:])
    if args[:1] == ["mig"]:
        return bool(args[1:]) and all(re.fullmatch(r"-l\w*|-i|-gi|-ci|\d+(,\d+)*", a)
                                      for a in args[1:]) and args[1].startswith("-l")
    at = 0
    while at < len(args):
        if args[at] in _SMI_VALUE:
            at += 2
            continue
        if args[at] == "-f":  # -f FILE writes the output there
            return False
        if not _SMI_WORD.fullmatch(args[at]):
            return False
        at += 1
    return True


def _dmesg_reads(args: list[str]) -> bool:
    # -C/-c clear the ring buffer, -D/-E/-n change console logging, -w/-W follow for ever.
    return not any(a.startswith("--") and a.split("=")[0] in (
        "--clear", "--read-clear", "--console-off", "--console-on", "--console-level",
        "--follow", "--follow-new") or (a.startswith("-") and not a.startswith("--")
                                        and set(a[1:]) & set("cCDEnwW")) for a in args)


def _mlxconfig_reads(args: list[str]) -> bool:
    # q/query (with -d DEV, -e, -b FILE...): never set, reset, apply, clear_semaphore, -y.
    verbs = [a for a in args if not a.startswith("-")]
    return ("q" in verbs or "query" in verbs) and not any(
        v in ("set", "s", "reset", "r", "apply", "a", "clear_semaphore", "set_raw",
              "backup", "gen_tlvs_file", "gen_xml_template", "xml2raw", "raw2xml", "xml2bin",
              "create_conf", "apply_conf") for v in verbs) and "-y" not in args


def _sysctl_reads(args: list[str]) -> bool:
    return not any(a in ("-w", "--write", "-p", "--load", "--system") or "=" in a for a in args)


# Programs that read for some arguments only, judged by a function of their arguments.
_ARGUMENT_JUDGES: dict[str, Callable[[list[str]], bool]] = {
    "awk": _awk_reads, "sed": _sed_reads, "find": _find_reads, "date": _date_reads,
    "sort": _sort_reads, "uniq": _uniq_reads, "ip": _ip_reads, "rdma": _rdma_reads,
    "ss": _ss_reads, "tail": _follows("tail"), "journalctl": _follows("journalctl"),
    "sysctl": _sysctl_reads, "nvidia-smi": _nvidia_smi_reads, "dmesg": _dmesg_reads,
    "mlxconfig": _mlxconfig_reads, "mstconfig": _mlxconfig_reads,
}


Exec = Callable[[bytes], tuple[int, bytes, bytes]]


# A check that asks the same command again this soon (testinfra's service module reads
# `is_running` twice in one expression) gets the same answer; asked again later by the same
# check (a check that waits, polling every second or more), the command goes live.
AGAIN_S = 0.2
# At most this many commands in one reading.
WINDOW = 400


def current_test() -> str:
    """The test pytest runs now (its node id), "" outside a test."""
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]


@dataclass
class HostBatch:
    """One host's learned commands, the answers it holds and what it sent (see the module)."""

    name: str
    kind: str
    learned: list[bytes] = field(default_factory=list)
    answers: dict[bytes, tuple[int, bytes, bytes]] = field(default_factory=dict)
    asked: list[bytes] = field(default_factory=list)
    last_ask: dict[tuple[str, bytes], float] = field(default_factory=dict)
    # How far this run has gone in the last run's order: the furthest learned command asked.
    position: int = -1
    problem: str = ""
    clock: Callable[[], float] = time.monotonic
    # False (--no-batch): every command in a round trip of its own, testinfra's way, counted.
    batched: bool = True

    def __post_init__(self) -> None:
        self.index: dict[bytes, int] = {}

    def _where(self, command: bytes) -> int:
        """The command's first place in the last run's order (-1: not there). A borrowed list
        (a same-kind host's, this run) grows as that host goes on: indexed anew."""
        if len(self.index) < len(self.learned):
            for i, learned in enumerate(self.learned):
                self.index.setdefault(learned, i)
        return self.index.get(command, -1)

    def run(self, command: bytes, send: Exec, sent: Counter[str]) -> tuple[int, bytes, bytes]:
        if not self.batched:
            sent[self.name] += 1
            _log_live(self.name, command)
            return send(command)
        reads = read_only(command.decode("utf-8", "replace"))
        now, key = self.clock(), (current_test(), command)
        before = self.last_ask.get(key)
        self.last_ask[key] = now
        if command not in self.asked:
            self.asked.append(command)
        self.position = max(self.position, self._where(command))
        if reads and (before is None or now - before < AGAIN_S):
            if command not in self.answers:
                self._take(command, send, sent)
            if command in self.answers:
                return self.answers[command]
        sent[self.name] += 1
        _log_live(self.name, command)
        answer = send(command)
        if reads:
            self.answers[command] = answer  # the freshest answer, for the checks after
        else:  # it may have changed what the answers read: read what follows again
            self.answers.clear()
        return answer

    def window(self) -> list[bytes]:
        """What the last run asked after the furthest point this run has reached, up to its
        next command that may change the node (the answers would not outlive it)."""
        ahead = []
        for command in self.learned[self.position + 1:]:
            if not read_only(command.decode("utf-8", "replace")):
                break
            ahead.append(command)
        return ahead[:WINDOW]

    def _take(self, first: bytes, send: Exec, sent: Counter[str]) -> None:
        """One round trip: ``first`` and the learned read-only commands of :meth:`window`."""
        wanted = [first] + [c for c in self.window() if c != first and c not in self.answers]
        if len(wanted) < 2:
            return  # nothing to gain: the command goes on its own
        texts = [c.decode("utf-8", "replace") for c in wanted]
        sent[self.name] += 1
        rc, out, err = send(batch_script(texts).encode())
        try:
            if rc != 0:
                raise BatchUnreadable(f"exit {rc}: {err.decode('utf-8', 'replace')[-200:]}")
            answers = parse_batch(out, len(wanted))
        except BatchUnreadable as exc:
            self.problem = f"{self.name}: the one-round-trip reading failed ({exc})"
            self.learned = []  # one round trip per command from now on
            return
        self.answers.update(zip(wanted, answers, strict=True))


@dataclass
class Batches:
    """Every host's :class:`HostBatch` in this process, and where the learned lists live
    (:class:`LearnedLists`, the deploy's own: private files, trusted only when the user's
    alone)."""

    folder: Path | None
    hosts: dict[str, HostBatch] = field(default_factory=dict)
    sent: Counter[str] = field(default_factory=Counter)
    _lists: LearnedLists | None = None

    @property
    def lists(self) -> LearnedLists | None:
        if self.folder is None:
            return None
        if self._lists is None or self._lists.folder != self.folder:
            self._lists = LearnedLists(self.folder)
        return self._lists

    def host(self, name: str, kind: str) -> HostBatch:
        """The host's :class:`HostBatch`; without a folder (--no-batch) one that sends each
        command on its own."""
        if name not in self.hosts:
            self.hosts[name] = HostBatch(name, kind, self._learned(name, kind),
                                         batched=self.folder is not None)
        return self.hosts[name]

    def _learned(self, name: str, kind: str) -> list[bytes]:
        """The host's own list from its last run; else a host of the same kind's, from this
        run (asked so far) or an earlier one."""
        lists = self.lists
        if lists is None:
            return []
        own = lists.own(name)
        if own:
            return [c.encode() for c in own]
        for other in self.hosts.values():
            if other.kind == kind and other.asked:
                return other.asked  # that host's list as it grows (read again after a change)
        return [c.encode() for c in lists.of_kind(kind)]

    def save(self) -> None:
        """Each host's commands of this run in the order first asked, for the next (written
        whole, then renamed: a run cut short leaves the last good list)."""
        lists = self.lists
        if lists is None:
            return
        for host in self.hosts.values():
            # every command in the order asked: the ones that may change the node are
            # never sent in a reading, they end each reading's window (HostBatch.window)
            commands = [c.decode("utf-8", "replace") for c in host.asked]
            if commands:
                lists.save(host.name, host.kind, commands)

    def problems(self) -> Iterable[str]:
        untrusted = self.lists.untrusted.values() if self.lists else ()
        return [*untrusted, *(h.problem for h in self.hosts.values() if h.problem)]


def _log_live(name: str, command: bytes) -> None:
    """With GPUINFRA_VERIFY_LIVE_LOG=<file>: each command sent on its own, a line per command
    (host, then the command), to see what a run could not answer from a node's reading."""
    path = os.environ.get("GPUINFRA_VERIFY_LIVE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{name}\t{command.decode('utf-8', 'replace')!r}\n")


def install(backend: object, batch: HostBatch, sent: Counter[str]) -> None:
    """Route a testinfra paramiko backend's commands through ``batch``."""
    send = backend._exec_command  # type: ignore[attr-defined]
    if getattr(send, "_gpuinfra_batch", None) is batch:
        return

    def exec_command(command: bytes) -> tuple[int, bytes, bytes]:
        return batch.run(command, send, sent)

    exec_command._gpuinfra_batch = batch  # type: ignore[attr-defined]
    backend._exec_command = exec_command  # type: ignore[attr-defined]
