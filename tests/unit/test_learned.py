"""The learned lists' folder (gpuinfra_deploy/run/learned.py): private, and names made safe."""

from __future__ import annotations

import stat

from gpuinfra_deploy.run.learned import LearnedLists, file_name, write_private_json


def test_an_older_folder_left_readable_by_others_is_made_private_at_the_next_write(tmp_path):
    folder = tmp_path / "site-abc"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    write_private_json(folder / "h.json", {"commands": []})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "h.json").stat().st_mode) == 0o600


def test_a_host_name_never_leaves_the_folder_and_two_alike_stay_apart(tmp_path):
    lists = LearnedLists(tmp_path / "x")
    lists.save("../../etc/evil", "k", ["echo 1"])
    lists.save("a_b", "k", ["echo a_b"])
    lists.save("a/b", "k", ["echo a/b"])
    assert sorted(p.parent for p in tmp_path.rglob("*.json")) == [tmp_path / "x"] * 3
    assert file_name("a_b") != file_name("a/b")
    assert LearnedLists(tmp_path / "x").own("a/b") == ["echo a/b"]
    assert LearnedLists(tmp_path / "x").own("a_b") == ["echo a_b"]
