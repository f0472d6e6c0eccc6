"""The epilog's reader of a job's runtime-features file (slurm_plugin/features_file.py) on real
files: links, FIFOs, other owners, oversized files, and the TaskProlog's creation of it.
Runs as root (as the tests/slurm suite does), the most a planted link could reach."""
from __future__ import annotations

import os
import threading

import pytest

from hpcpredict.slurm_plugin import features_file
from hpcpredict.slurm_plugin.features_file import FeaturesFileRefused, take

UID = os.getuid()
OTHER_UID = 65534


def test_a_regular_file_of_the_job_user_is_read_whole_and_removed(tmp_path):
    path = tmp_path / ".hpcpredict-features-7"
    path.write_text("HPCPREDICT t=1 n=400\nHPCPREDICT t=2 solver=cg\n")
    found = take(str(path), UID, max_bytes=65536, max_lines=1000)
    assert found.text == "HPCPREDICT t=1 n=400\nHPCPREDICT t=2 solver=cg\n"
    assert (found.lines, found.truncated, found.removed) == (2, False, True)
    assert not path.exists()


def test_no_file_is_no_features(tmp_path):
    assert take(str(tmp_path / "missing"), UID, max_bytes=100, max_lines=10) is None


def test_a_symbolic_link_is_refused_and_its_target_left_alone(tmp_path):
    secret = tmp_path / "root-only"
    secret.write_text("HPCPREDICT t=1 secret=4242\n")
    secret.chmod(0o600)
    link = tmp_path / ".hpcpredict-features-8"
    link.symlink_to(secret)
    with pytest.raises(FeaturesFileRefused, match="symbolic link") as refused:
        take(str(link), UID, max_bytes=65536, max_lines=1000)
    assert "4242" not in str(refused.value)
    assert link.is_symlink() and secret.read_text() == "HPCPREDICT t=1 secret=4242\n"


def test_a_file_of_another_owner_is_refused_even_through_a_hard_link(tmp_path):
    other = tmp_path / "someone-elses"
    other.write_text("HPCPREDICT t=1 secret=4242\n")
    os.chown(other, OTHER_UID, OTHER_UID)
    hard = tmp_path / ".hpcpredict-features-9"
    os.link(other, hard)
    with pytest.raises(FeaturesFileRefused, match=f"owned by uid {OTHER_UID}, not the job's uid {UID}"):
        take(str(hard), UID, max_bytes=65536, max_lines=1000)
    assert hard.exists()


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / ".hpcpredict-features-10"
    os.mkfifo(fifo)
    result = {}

    def read():
        try:
            take(str(fifo), UID, max_bytes=100, max_lines=10)
        except FeaturesFileRefused as refused:
            result["refused"] = str(refused)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "blocked on a FIFO with no writer"
    assert result["refused"] == "is not a regular file"


def test_a_directory_is_refused(tmp_path):
    (tmp_path / ".hpcpredict-features-11").mkdir()
    with pytest.raises(FeaturesFileRefused, match="not a regular file"):
        take(str(tmp_path / ".hpcpredict-features-11"), UID, max_bytes=100, max_lines=10)


@pytest.mark.parametrize("max_bytes, max_lines, text, lines", [
    (40, 1000, "HPCPREDICT t=1 a=1\nHPCPREDICT t=2 b=2\n", 2),   # both lines fit (38 bytes)
    (30, 1000, "HPCPREDICT t=1 a=1\n", 1),                       # whole lines only: the cut line is dropped
    (10, 1000, "", 0),                                           # not even one whole line
    (1000, 1, "HPCPREDICT t=1 a=1\n", 1),                         # the line limit
])
def test_reading_is_bounded_to_whole_lines(tmp_path, max_bytes, max_lines, text, lines):
    path = tmp_path / "f"
    path.write_text("HPCPREDICT t=1 a=1\nHPCPREDICT t=2 b=2\n" + "x" * 10_000_000)
    found = take(str(path), UID, max_bytes=max_bytes, max_lines=max_lines, remove=False)
    assert (found.text, found.lines, found.truncated) == (text, lines, True)
    assert found.bytes_read <= max_bytes + 1      # never more than the bound (plus one to see there is more)


def test_a_file_exactly_at_the_limit_is_not_truncated(tmp_path):
    path = tmp_path / "f"
    path.write_text("HPCPREDICT t=1 a=1\n")
    found = take(str(path), UID, max_bytes=19, max_lines=1, remove=False)
    assert (found.text, found.truncated, found.removed) == ("HPCPREDICT t=1 a=1\n", False, False)


def test_create_makes_a_file_slurmuser_can_read_whatever_the_umask(tmp_path):
    path = tmp_path / ".hpcpredict-features-12"
    old = os.umask(0o077)
    try:
        assert features_file.create(str(path))
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644 and path.read_text() == ""
    assert features_file.create(str(path))        # our own file already there (the batch step restarted)


def test_create_never_uses_a_planted_link_or_another_users_file(tmp_path):
    link = tmp_path / ".hpcpredict-features-13"
    link.symlink_to(tmp_path / "elsewhere")
    made = features_file.create(str(link))
    assert made.startswith(f"{link}.{UID}.") and os.stat(made).st_uid == UID
    assert not (tmp_path / "elsewhere").exists()
    planted = tmp_path / ".hpcpredict-features-14"
    planted.write_text("")
    os.chown(planted, OTHER_UID, OTHER_UID)
    made = features_file.create(str(planted))
    assert made.startswith(f"{planted}.{UID}.") and len(made) == len(f"{planted}.{UID}.") + 32


def _as(user: str, code: str) -> str:
    import pwd
    import subprocess
    import sys

    entry = pwd.getpwnam(user)
    done = subprocess.run([sys.executable, "-c", code], user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                          capture_output=True, text=True, timeout=60, cwd="/tmp", env={"HOME": "/tmp"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_squatted_name_in_a_shared_directory_does_not_block_the_jobs_features():
    """The attack: in a shared ``features_dir`` (SlurmUser's, mode 1733) user ``daemon`` creates
    the name of a job id that ``bin`` will get, and a decoy of the squat-proof form with bin's
    uid; the sticky bit keeps bin from removing either. bin's TaskProlog still gets a file of its
    own, and the epilog, as SlurmUser (``nobody``, the directory's owner), relays bin's lines."""
    import pwd
    import subprocess
    import tempfile

    slurm_user, victim = pwd.getpwnam("nobody"), pwd.getpwnam("bin")
    shared = tempfile.mkdtemp(prefix="hpd-features-", dir="/tmp")
    try:
        os.chown(shared, slurm_user.pw_uid, slurm_user.pw_gid)
        os.chmod(shared, 0o1733)
        plain = os.path.join(shared, ".hpcpredict-features-77")
        _as("daemon", f"open({plain!r}, 'w').write('HPCPREDICT t=1 planted=1\\n'); "
                      f"open({plain + f'.{victim.pw_uid}.' + 'f' * 32!r}, 'w').write('HPCPREDICT t=1 decoy=1\\n')")
        made = _as("bin", "from hpcpredict.slurm_plugin import features_file as f; "
                          f"p = f.create({plain!r}); open(p, 'a').write('HPCPREDICT t=5 n=400\\n'); print(p)")
        assert made != plain and made.startswith(f"{plain}.{victim.pw_uid}.")
        read = _as("nobody", "from hpcpredict.slurm_plugin.features_file import take; "
                             f"found = take({plain!r}, {victim.pw_uid}, max_bytes=1000, max_lines=10); "
                             "print(repr(found.text), found.removed)")
        assert read == "'HPCPREDICT t=5 n=400\\n' True"
        assert not os.path.exists(made) and os.path.exists(plain)   # the squatter's own file is not ours to read
    finally:
        subprocess.run(["rm", "-rf", shared], check=True)


@pytest.mark.parametrize("settings, job_id, work_dir, path", [
    ({"features_dir": ""}, "5", "/home/a b/run", "/home/a b/run/.hpcpredict-features-5"),
    ({"features_dir": "/shared/f"}, "5", "/home/a", "/shared/f/.hpcpredict-features-5"),
    ({"features_dir": ""}, "5", "", ""),
    ({"features_dir": ""}, "5_1", "/home/a", ""),
    ({"features_dir": ""}, "../5", "/home/a", ""),
    ({"features_dir": ""}, "5", "/home/a\nexport X=1", ""),
])
def test_features_path(settings, job_id, work_dir, path):
    assert features_file.features_path(settings, job_id, work_dir) == path


def test_docstring_example():
    import doctest

    result = doctest.testmod(features_file)
    assert result.attempted > 0 and result.failed == 0


def test_a_working_directory_slurmuser_may_search_but_not_list(tmp_path):
    """SlurmUser is not root on a real site: the reader, run as another user (``daemon``) through
    runuser, reads a job's file in a 0711 directory and, without write permission there, leaves it."""
    import pwd
    import subprocess
    import sys
    import tempfile

    owner = pwd.getpwnam("nobody")
    directory = tempfile.mkdtemp(prefix="hpd-features-", dir="/tmp")
    try:
        os.chown(directory, owner.pw_uid, owner.pw_gid)
        os.chmod(directory, 0o711)
        path = os.path.join(directory, ".hpcpredict-features-15")
        with open(path, "w") as handle:
            handle.write("HPCPREDICT t=1 a=1\n")
        os.chown(path, owner.pw_uid, owner.pw_gid)
        code = ("import sys; from hpcpredict.slurm_plugin.features_file import take; "
                f"found = take({path!r}, {owner.pw_uid}, max_bytes=100, max_lines=10); "
                "print(repr(found.text), found.removed)")
        done = subprocess.run(["runuser", "-u", "daemon", "--", sys.executable, "-c", code], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "'HPCPREDICT t=1 a=1\\n' False"
        assert os.path.exists(path)
    finally:
        subprocess.run(["rm", "-rf", directory], check=True)


@pytest.mark.parametrize("text, shown", [
    ("/home/alice/run", "/home/alice/run"),
    ("/home/\x1b[31mred\t", "/home/?[31mred?"),
    ("/" + "a" * 400, "/" + "a" * 299 + "..."),
])
def test_paths_are_printable_in_the_log(text, shown):
    assert features_file.printable(text) == shown


def test_an_unused_file_is_discarded_and_a_written_one_kept(tmp_path):
    path = tmp_path / ".hpcpredict-features-21"
    assert features_file.create(str(path)) == str(path)
    assert features_file.discard_unused(str(path), UID) == 1 and not path.exists()
    assert features_file.create(str(path)) == str(path)
    path.write_text("HPCPREDICT t=1 n=4\n")
    assert features_file.discard_unused(str(path), UID) == 0 and path.read_text() == "HPCPREDICT t=1 n=4\n"


def test_discarding_touches_no_link_no_other_owner_and_finds_the_squat_proof_name(tmp_path):
    target = tmp_path / "empty-target"
    target.write_text("")
    link = tmp_path / ".hpcpredict-features-22"
    link.symlink_to(target)
    theirs = tmp_path / f".hpcpredict-features-22.{UID}.{'0' * 32}"   # our prefix, another owner
    theirs.write_text("")
    os.chown(theirs, OTHER_UID, OTHER_UID)
    ours = features_file.create(str(link))          # squatted: the squat-proof name
    assert ours != str(link) and os.path.exists(ours)
    assert features_file.discard_unused(str(link), UID) == 1
    assert not os.path.exists(ours)
    assert link.is_symlink() and target.exists() and theirs.exists()


def test_discarding_in_a_missing_directory_is_nothing(tmp_path):
    assert features_file.discard_unused(str(tmp_path / "gone" / ".hpcpredict-features-23"), UID) == 0
