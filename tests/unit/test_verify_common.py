"""gpuinfra_verify/test_common.py: a check the site turned off reports a skip, never a pass."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuinfra_verify.test_common import test_etc_hosts_lists_cluster as etc_hosts_check


def test_etc_hosts_check_is_skipped_not_passed_when_the_role_leaves_the_file_alone():
    node = SimpleNamespace(settings={"common_manage_hosts": False})
    with pytest.raises(pytest.skip.Exception, match="common_manage_hosts is False"):
        etc_hosts_check(host=None, site=None, node=node)
