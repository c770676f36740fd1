"""The user's key for the live channel: created 0600 on first use (one key however many tasks
start at once), refused like ssh refuses a private key when others can read it or another
user owns it, when it is a symbolic link or its folder can be written by others or belongs to
another user, and a seal that does not open with another key, context or payload."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from scalescope.launch.channel.seals import KEY_BYTES, KeyFileError, load_key, seal, unseal


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "home" / ".scalescope" / "key"
    monkeypatch.setenv("SCALESCOPE_KEY_FILE", str(path))
    return path


def test_the_key_is_created_0600_on_first_use_and_read_after(key_file: Path) -> None:
    key = load_key()
    assert len(key) == KEY_BYTES
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert load_key() == key
    assert [p.name for p in key_file.parent.iterdir()] == ["key"], "no temporary file left"


def test_tasks_starting_together_share_one_key(key_file: Path) -> None:
    keys: list[bytes] = []
    threads = [threading.Thread(target=lambda: keys.append(load_key())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1


def test_a_key_others_can_read_is_refused(key_file: Path) -> None:
    load_key()
    key_file.chmod(0o640)
    with pytest.raises(KeyFileError) as refused:
        load_key()
    assert str(refused.value) == (
        f"the key file {key_file} can be read by others (mode 0640): chmod 600 {key_file}"
    )


def test_a_key_of_another_user_is_refused(key_file: Path, monkeypatch) -> None:
    load_key()
    monkeypatch.setattr(os, "getuid", lambda: key_file.stat().st_uid + 1)
    with pytest.raises(KeyFileError, match="belongs to another user"):
        load_key()


@pytest.mark.parametrize("mode", [0o770, 0o702, 0o1777])
def test_a_key_in_a_folder_others_can_write_is_refused(key_file: Path, mode: int) -> None:
    load_key()
    key_file.parent.chmod(mode)
    with pytest.raises(KeyFileError) as refused:
        load_key()
    folder = key_file.parent
    assert str(refused.value) == (
        f"the key's folder {folder} can be written by others (mode {mode:04o}): chmod go-w {folder}"
    )
    key_file.unlink()
    with pytest.raises(KeyFileError, match="can be written by others"):
        load_key()
    assert not key_file.exists(), "no key created where others could swap it"


def test_a_key_in_a_folder_of_another_user_is_refused(key_file: Path, monkeypatch) -> None:
    load_key()
    uid = key_file.stat().st_uid
    real = os.stat

    def stat_as(path, *args, **kwargs):  # noqa: ANN001, ANN202
        info = real(path, *args, **kwargs)
        if str(path) != str(key_file.parent):
            return info
        return os.stat_result((info.st_mode, info.st_ino, info.st_dev, info.st_nlink,
                               uid + 1, *tuple(info)[5:10]))  # fmt: skip

    monkeypatch.setattr(os, "stat", stat_as)
    with pytest.raises(KeyFileError, match=r"the key's folder .* belongs to another user \(uid"):
        load_key()


def test_a_symlinked_key_is_refused(key_file: Path, tmp_path: Path) -> None:
    load_key()
    real = tmp_path / "elsewhere"
    key_file.rename(real)
    key_file.symlink_to(real)
    with pytest.raises(KeyFileError) as refused:
        load_key()
    assert str(refused.value).startswith(
        f"the key file {key_file} is a symbolic link, which scalescope does not follow"
    )
    real.unlink()
    with pytest.raises(KeyFileError, match="is a symbolic link"):
        load_key()  # dangling: not created through it either
    assert not real.exists()


def test_a_short_key_and_no_key_are_refused(key_file: Path) -> None:
    key_file.parent.mkdir(parents=True)
    key_file.write_bytes(b"short")
    key_file.chmod(0o600)
    with pytest.raises(KeyFileError, match="holds 5 bytes, fewer than 32"):
        load_key()
    key_file.unlink()
    with pytest.raises(KeyFileError, match="no key file at .*SCALESCOPE_KEY_FILE"):
        load_key(create=False)
    assert not key_file.exists()


def test_a_seal_opens_only_with_its_key_context_and_payload() -> None:
    key, other = b"k" * 32, b"o" * 32
    value = seal(key, b"ask:s1:kill:", b"7")
    assert unseal(key, b"ask:s1:kill:", value) == b"7"
    assert unseal(other, b"ask:s1:kill:", value) is None
    assert unseal(key, b"ask:s2:kill:", value) is None, "another relay's session"
    assert unseal(key, b"ask:s1:stacks:", value) is None, "another request"
    assert unseal(key, b"ask:s1:kill:", b"8" + value[1:]) is None, "another count"
    assert unseal(key, b"ask:s1:kill:", b"7") is None
