"""The launched runs' heap allocator (lmrl/allocator.py): which library, how it reaches a child's LD_PRELOAD,
and that a child started through `child_env` really runs under it."""

import subprocess
import sys

import pytest

from lmrl.allocator import allocator_library, preload_env
from lmrl.dist import child_env


def test_system_keeps_glibc_and_leaves_the_environment_alone():
    assert allocator_library("system") is None
    env = {"LD_PRELOAD": "/x/libfoo.so", "A": "1"}
    assert preload_env(env, "system") == env


def test_a_named_library_is_preloaded_first_once(tmp_path):
    lib = tmp_path / "libmymalloc.so"
    lib.write_bytes(b"")
    env = preload_env({"LD_PRELOAD": "/x/libfoo.so"}, str(lib))
    assert env["LD_PRELOAD"] == f"{lib}:/x/libfoo.so"
    assert preload_env(env, str(lib))["LD_PRELOAD"] == env["LD_PRELOAD"]  # already there: not twice
    assert preload_env({}, str(lib))["LD_PRELOAD"] == str(lib)


def test_a_missing_library_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="LMRL_ALLOCATOR=.*nothing.so.*tcmalloc.*system"):
        allocator_library(str(tmp_path / "nothing.so"))


def test_the_environment_variable_chooses(monkeypatch):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setenv("LMRL_ALLOCATOR", "system")
    assert allocator_library() is None
    assert "LD_PRELOAD" not in child_env(A="1")


@pytest.mark.skipif(allocator_library("tcmalloc") is None,
                    reason="tcmalloc is not installed (`make install` installs libtcmalloc-minimal4 as root)")
def test_a_child_started_through_child_env_runs_under_tcmalloc(monkeypatch):
    monkeypatch.delenv("LMRL_ALLOCATOR", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    code = "print(any('tcmalloc' in line for line in open('/proc/self/maps')))"
    child = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "True"
    monkeypatch.setenv("LMRL_ALLOCATOR", "system")
    plain = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "False"
