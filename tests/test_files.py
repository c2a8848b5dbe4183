"""The one bounded reader of regular files (`llmgw_wire._files`), on real files of every kind.

The TLS settings, the shard store and the schema checker read through it;
their own words for each refusal are tested beside them. Here: that each
kind of file is refused for what it is, named with its path, and that what
is read is bounded by the limit whatever the file claims.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from llmgw_wire._files import LINK, FileRefusedError, read_limited, read_regular

# A FIFO with no writer is refused rather than waited on; were it waited on,
# the test fails here rather than hangs.
pytestmark = pytest.mark.timeout(60)

LIMIT = 4096


@pytest.fixture
def regular(tmp_path: Path) -> Path:
    path = tmp_path / "regular.pem"
    path.write_bytes(b"x" * 100)
    return path


def refusal(path: Path, *, follow_links: bool = True) -> FileRefusedError:
    with pytest.raises(FileRefusedError) as caught:
        read_regular(path, LIMIT, follow_links=follow_links)
    return caught.value


def test_a_regular_file_is_read_whole_with_the_stat_of_what_was_read(regular: Path) -> None:
    data, info = read_regular(regular, LIMIT)
    assert data == b"x" * 100
    assert stat.S_ISREG(info.st_mode)
    assert (info.st_ino, info.st_size) == (regular.stat().st_ino, 100)


@pytest.mark.parametrize(
    ("size", "limit"),
    [(0, LIMIT), (1, LIMIT), (LIMIT, LIMIT), (200_000, 1 << 20), (1 << 20, 1 << 20)],
)
def test_a_file_up_to_the_limit_is_read_whole(tmp_path: Path, size: int, limit: int) -> None:
    path = tmp_path / "file"
    data = os.urandom(size)
    path.write_bytes(data)
    assert read_regular(path, limit)[0] == data


@pytest.mark.parametrize("follow_links", [True, False])
def test_a_fifo_no_one_writes_is_refused_not_waited_on(tmp_path: Path, follow_links: bool) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    refused = refusal(fifo, follow_links=follow_links)
    assert str(refused) == f"{fifo} is not a regular file (a FIFO)"
    assert (refused.path, refused.kind) == (str(fifo), "a FIFO")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    refused = refusal(tmp_path)
    assert str(refused) == f"{tmp_path} is not a regular file (a directory)"
    assert refused.kind == "a directory"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_dev_zero_is_refused_not_read() -> None:
    refused = refusal(Path("/dev/zero"))
    assert str(refused) == "/dev/zero is not a regular file (a character device)"
    assert refused.kind == "a character device"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_a_link_to_dev_zero_is_refused_for_what_it_leads_to_or_for_being_a_link(
    tmp_path: Path,
) -> None:
    zero = tmp_path / "zero.proto"
    zero.symlink_to("/dev/zero")
    followed = refusal(zero, follow_links=True)
    assert str(followed) == f"{zero} is not a regular file (a character device)"
    not_followed = refusal(zero, follow_links=False)
    assert str(not_followed) == f"{zero} is not a regular file (a symbolic link)"
    assert not_followed.kind == LINK


def test_a_link_to_a_regular_file_is_read_when_followed_and_refused_when_not(
    tmp_path: Path, regular: Path
) -> None:
    link = tmp_path / "link.pem"
    link.symlink_to(regular)
    data, info = read_regular(link, LIMIT, follow_links=True)
    assert data == b"x" * 100
    assert info.st_ino == regular.stat().st_ino
    refused = refusal(link, follow_links=False)
    assert (str(refused), refused.kind) == (f"{link} is not a regular file (a symbolic link)", LINK)


def test_a_file_over_the_limit_is_refused_by_its_size_before_a_byte_is_read(
    tmp_path: Path,
) -> None:
    big = tmp_path / "big.binpb"
    with big.open("wb") as out:
        out.truncate(10 << 30)  # sparse: 10 GiB that take no disk
    refused = refusal(big)
    assert str(refused) == f"{big} is larger than {LIMIT} bytes ({10 << 30} bytes)"
    assert (refused.kind, refused.size, refused.limit, refused.grew) == (
        None,
        10 << 30,
        LIMIT,
        False,
    )


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_file_larger_than_its_stat_says_is_read_only_to_one_byte_past_the_limit() -> None:
    # /proc's files are regular and say they are empty: only reading shows
    # their size, as it would show a file that grows while it is read.
    status = Path("/proc/self/status")
    assert status.stat().st_size == 0
    with pytest.raises(FileRefusedError) as caught:
        read_regular(status, 10)
    refused = caught.value
    assert str(refused) == f"{status} is larger than 10 bytes (11 bytes or more)"
    assert (refused.kind, refused.size, refused.grew) == (None, 11, True)


def test_what_is_checked_is_the_descriptor_read_not_only_the_path(
    tmp_path: Path, regular: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The path looked at first passes (a regular file); by the time it is
    # opened it is a FIFO, then a link: the open descriptor is checked again.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(regular)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda *args, **kwargs: real_stat(regular))
    refused = refusal(fifo)
    assert str(refused) == f"{fifo} is not a regular file (a FIFO)"
    refused = refusal(link, follow_links=False)
    assert str(refused) == f"{link} is not a regular file (a symbolic link)"


def test_a_missing_file_is_the_file_systems_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent", LIMIT)


def test_a_name_is_read_in_the_directory_dir_fd_opens(tmp_path: Path, regular: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_regular(regular.name, LIMIT, dir_fd=fd)[0] == b"x" * 100
        os.mkfifo("fifo", dir_fd=fd)
        with pytest.raises(FileRefusedError, match=r"^fifo is not a regular file \(a FIFO\)$"):
            read_regular("fifo", LIMIT, dir_fd=fd)
    finally:
        os.close(fd)


class CheckFailedError(Exception):
    pass


def test_check_sees_the_descriptors_stat_before_the_size_is_checked(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with big.open("wb") as out:
        out.truncate(LIMIT + 1)
    seen: list[os.stat_result] = []

    def check(info: os.stat_result) -> None:
        seen.append(info)
        raise CheckFailedError

    with pytest.raises(CheckFailedError):
        read_regular(big, LIMIT, check=check)
    assert [(info.st_ino, info.st_size) for info in seen] == [(big.stat().st_ino, LIMIT + 1)]
    # A check that passes lets the size be checked.
    with pytest.raises(FileRefusedError, match="is larger than"):
        read_regular(big, LIMIT, check=seen.append)


def test_check_is_not_asked_about_a_file_that_is_not_regular(tmp_path: Path) -> None:
    seen: list[os.stat_result] = []
    with pytest.raises(FileRefusedError, match=r"\(a directory\)"):
        read_regular(tmp_path, LIMIT, check=seen.append)
    assert seen == []


def test_read_limited_reads_one_byte_past_the_limit_of_an_endless_stream() -> None:
    asked: list[int] = []

    def read(size: int) -> bytes:
        asked.append(size)
        return b"\0" * size

    data = read_limited(read, 200_000)
    assert len(data) == 200_001
    assert sum(asked) == 200_001


@pytest.mark.parametrize("size", [0, 1, 99, 100, 101])
def test_read_limited_gives_what_a_stream_holds_up_to_one_past_the_limit(size: int) -> None:
    data = bytes(range(256)) * 2
    assert read_limited(io.BytesIO(data[:size]).read, 100) == data[: min(size, 101)]
