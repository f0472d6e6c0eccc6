"""A place of its own for a test that installs hpcpredict system-wide, so that running the test
suite can never touch the host's installation (its history and models) or its ``hpcpredict`` user.

``run(argv)`` runs ``argv`` under ``unshare --mount --pid --fork --kill-child``: a private mount
namespace where ``/etc``, ``/opt``, ``/var/lib``, ``/var/log``, ``/run`` and ``/usr/local`` are
overlays whose writes land in a scratch directory, and where any existing install (the paths of
``INSTALL_PATHS``, the user and group ``hpcpredict``) is hidden, so the install under test starts
from nothing and its uninstall removes only what it made. The pid namespace ends every process
started inside (the daemon, the test cluster) when ``argv`` exits or the caller is killed. The
scratch directory is then removed: the host is left as it was.

``run(argv, existing_install=True)`` first makes, inside a namespace of the same kind, a host with
an installation of its own (files under every install path, the user ``hpcpredict`` running a
process), runs ``argv`` in a sandbox inside that one, and fails unless the installation, the user
and its process came out untouched.

Run as ``python -m tests.site.sandbox [--existing-install] -- ARGV`` (needs root); the test uses
``run``.
"""
from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OVERLAID = ("/etc", "/opt", "/var/lib", "/var/log", "/run", "/usr/local")
INSTALL_DIRS = ("/opt/hpcpredict", "/etc/hpcpredict", "/var/lib/hpcpredict", "/run/hpcpredict")
INSTALL_FILES = ("/run/hpcpredictd.pid", "/var/log/hpcpredictd.log", "/usr/local/bin/hpcpredict",
                 "/usr/local/bin/hpcpredictd", "/usr/local/share/man/man1/hpcpredict.1",
                 "/usr/local/share/man/man1/hpcpredictd.1", "/etc/cron.d/hpcpredict", "/etc/logrotate.d/hpcpredict-hooks",
                 "/etc/systemd/system/hpcpredictd.service",
                 "/etc/systemd/system/hpcpredict-refresh.service", "/etc/systemd/system/hpcpredict-refresh.timer")
INSTALL_PATHS = INSTALL_DIRS + INSTALL_FILES
USER = "hpcpredict"
ACCOUNT_FILES = ("/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow")
MARK = "HPCPREDICT_SITE_SANDBOX"      # set inside: the test that must only run in here checks it


def run(argv: list[str], *, existing_install: bool = False, env: dict | None = None,
        timeout: float = 1800) -> subprocess.CompletedProcess:
    """``argv`` in a sandbox (see the module's docstring); its output captured."""
    scratch = Path(tempfile.mkdtemp(prefix="hpcpredict-sandbox-"))
    try:
        command = [*unshare(), sys.executable, "-m", "tests.site.sandbox", "--scratch", str(scratch),
                   "--outside", os.readlink("/proc/self/ns/mnt")]
        command += ["--existing-install"] if existing_install else []
        return subprocess.run([*command, "--", *argv], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=timeout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unshare() -> list[str]:
    return ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child", "--mount-proc"]


def enter(scratch: Path, outside: str) -> None:
    """Overlay the system directories (writes go to ``scratch``) and hide any existing install."""
    if os.readlink("/proc/self/ns/mnt") == outside or os.getpid() != 1:
        sys.exit("sandbox: not in a mount and pid namespace of its own (run it through tests.site.sandbox.run)")
    for number, directory in enumerate(OVERLAID):
        upper, work = scratch / f"{number}.upper", scratch / f"{number}.work"
        upper.mkdir(mode=0o755)
        work.mkdir()
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={directory},upperdir={upper},workdir={work}", directory], check=True)
    for path in INSTALL_PATHS:      # removed in the overlay only: a whiteout hides the host's copy
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
    for account_file in ACCOUNT_FILES:      # the user and group, without userdel (which would care
        text = Path(account_file).read_text()   # about the host's processes running as that user)
        kept = [line for line in text.splitlines(keepends=True) if line.split(":", 1)[0] != USER]
        if len(kept) != len(text.splitlines()):
            Path(account_file).write_text("".join(kept))


def make_existing_install() -> dict[str, str]:
    """An installation of the host's own: a file in every install path, the user with a process."""
    subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    USER], check=True)
    for path in INSTALL_PATHS:      # the directories get a file inside, the rest are files
        target = Path(path) / "the-sites-own" if path in INSTALL_DIRS else Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"the site's {path}, not to be touched\n")
    os.chown("/var/lib/hpcpredict", pwd.getpwnam(USER).pw_uid, pwd.getpwnam(USER).pw_gid)
    return snapshot()


def snapshot() -> dict[str, str]:
    """Every file of the install paths with its owner, mode and content hash; the user's entry."""
    state = {f"user {USER}": repr(pwd.getpwnam(USER)[:7])}
    for path in INSTALL_PATHS:
        for file in [Path(path), *(Path(path).rglob("*") if Path(path).is_dir() else [])]:
            info = file.lstat()
            digest = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else ""
            state[str(file)] = f"{info.st_uid}:{info.st_gid} {info.st_mode:o} {digest}"
    return state


def run_as_init(argv: list[str], env: dict | None = None) -> int:
    """Run ``argv`` as pid 1 of the namespace does: daemons started inside (the test cluster's
    munged, slurmctld...) are re-parented to us when they detach, and an exited one must be
    reaped, or it stays a zombie that ``kill -0`` still finds alive."""
    child = subprocess.Popen(argv, env=env)
    while True:
        pid, status = os.wait()
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return child.returncode


def main(args: list[str]) -> int:
    separator = args.index("--")
    options, argv = args[:separator], args[separator + 1:]
    scratch = Path(options[options.index("--scratch") + 1])
    outside = options[options.index("--outside") + 1]
    enter(scratch, outside)
    if "--existing-install" not in options:
        return run_as_init(argv, env=dict(os.environ, **{MARK: "1"}))
    before = make_existing_install()
    # The site's daemon user is busy: the original failure was `userdel: user hpcpredict is
    # currently used by process ...`.
    busy = subprocess.Popen(["setpriv", f"--reuid={USER}", f"--regid={USER}", "--init-groups", "sleep", "infinity"])
    inner = scratch / "inner"
    inner.mkdir()
    code = run_as_init([*unshare(), sys.executable, "-m", "tests.site.sandbox", "--scratch", str(inner),
                        "--outside", os.readlink("/proc/self/ns/mnt"), "--", *argv])
    after = snapshot()
    changed = sorted(set(before.items()) ^ set(after.items()))
    if changed:
        print(f"sandbox: the existing install changed: {changed[:10]}", file=sys.stderr)
    if busy.poll() is not None:
        print(f"sandbox: the existing {USER} user's process ended ({busy.returncode})", file=sys.stderr)
    return code or (3 if changed or busy.poll() is not None else 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
